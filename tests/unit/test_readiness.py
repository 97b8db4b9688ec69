"""Readiness: several sources (batches retrying after database errors, broker retries, the broker probe,
the start-up), ready only when none of them fails; /readyz and rating_worker_ready follow it.
(Against the real broker and PostgreSQL: tests/integration/test_faults.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime
from types import SimpleNamespace

import orjson
import pytest
from aiokafka import TopicPartition
from aiokafka.errors import KafkaConnectionError

from worker.config import load
from worker.dev.streams import game_event
from worker.observability import HealthServer, Metrics, Readiness
from worker.pipeline import Pipeline
from worker.pipeline.monitors import BROKER_PROBE, BrokerProbe
from worker.store.memory import MemoryStore

CFG = load(env={"DATABASE_URL": "postgresql://x/y", "KAFKA_BOOTSTRAP_SERVERS": "k:9092", "RETRY_BACKOFF_MAX_S": "0.1"})
TP = TopicPartition("games", 0)


def gauge(metrics: Metrics) -> float:
    return metrics.registry.get_sample_value("rating_worker_ready")


async def wait_for(predicate, what: str, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, f"gave up waiting for {what}"
        await asyncio.sleep(0.01)


def test_ready_only_when_no_source_fails():
    metrics = Metrics()
    r = Readiness(metrics)
    assert not r.ready and r.reasons == ["starting"] and gauge(metrics) == 0
    assert r.recover("starting") and r.ready and gauge(metrics) == 1
    assert r.fail("database: batch 3") and r.fail(BROKER_PROBE) and not r.fail(BROKER_PROBE)
    assert r.recover("database: batch 3")
    assert not r.ready and r.reasons == [BROKER_PROBE] and gauge(metrics) == 0, "one recovery hid another failure"
    assert not r.recover("database: batch 3")
    assert r.recover(BROKER_PROBE) and r.ready and gauge(metrics) == 1


async def test_readyz_answers_503_with_the_reasons_then_200():
    metrics = Metrics()
    health = HealthServer(metrics, "127.0.0.1", 0)
    await health.start()

    async def get() -> tuple[bytes, bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", health.port)
        writer.write(b"GET /readyz HTTP/1.0\r\n\r\n")
        await writer.drain()
        response = await reader.read()
        writer.close()
        head, _, body = response.partition(b"\r\n\r\n")
        return head.split(b"\r\n")[0], body

    try:
        assert await get() == (b"HTTP/1.0 503 Service Unavailable", b"not ready: starting\n")
        health.readiness.recover("starting")
        health.readiness.fail("database: batch 7")
        health.readiness.fail(BROKER_PROBE)
        assert await get() == (b"HTTP/1.0 503 Service Unavailable", b"not ready: database: batch 7, broker: probe\n")
        health.readiness.recover("database: batch 7")
        health.readiness.recover(BROKER_PROBE)
        assert await get() == (b"HTTP/1.0 200 OK", b"ready\n")
    finally:
        await health.stop()


class FakeConsumer:
    """topics() answers, fails (connection refused) or hangs (a paused broker), as the test says."""

    def __init__(self) -> None:
        self.mode = "answer"

    async def topics(self) -> set[str]:
        if self.mode == "refuse":
            raise KafkaConnectionError("Unable to get cluster metadata over all known brokers")
        if self.mode == "hang":
            await asyncio.sleep(3600)
        return {"games"}


def ready_pipeline(store=None) -> tuple[Pipeline, Metrics, FakeConsumer]:
    """A pipeline that has not started (no broker: batches are launched by hand), and a broker probe on a
    consumer double, both reporting to the pipeline's readiness."""
    metrics = Metrics()
    pipeline = Pipeline(CFG, store or MemoryStore(), metrics)
    pipeline.probe = BrokerProbe(FakeConsumer(), pipeline.readiness, pipeline.retrier)
    pipeline.readiness.recover("starting")
    return pipeline, metrics, pipeline.probe.consumer


async def test_the_broker_probe_sets_not_ready_when_refused_or_unanswered_and_ready_when_answered():
    pipeline, metrics, consumer = ready_pipeline()
    assert await pipeline.probe.probe() and gauge(metrics) == 1
    consumer.mode = "refuse"
    assert not await pipeline.probe.probe()
    assert pipeline.readiness.reasons == [BROKER_PROBE] and gauge(metrics) == 0
    consumer.mode = "answer"
    assert await pipeline.probe.probe() and gauge(metrics) == 1
    consumer.mode = "hang"
    started = asyncio.get_running_loop().time()
    assert not await pipeline.probe.probe(timeout_s=0.2)
    assert asyncio.get_running_loop().time() - started < 1.0, "the probe must give up after its timeout"
    assert gauge(metrics) == 0
    consumer.mode = "answer"
    assert await pipeline.probe.probe() and pipeline.readiness.ready


async def test_a_retry_that_recovers_does_not_hide_the_broker_probe_and_the_other_way_round():
    pipeline, metrics, consumer = ready_pipeline()
    consumer.mode = "refuse"
    await pipeline.probe.probe()
    failures = iter([ConnectionResetError("cut"), ConnectionResetError("cut")])

    async def flaky() -> str:
        exc = next(failures, None)
        if exc is not None:
            raise exc
        return "done"

    assert await pipeline.retrier.db("mark published", flaky) == "done"
    assert pipeline.readiness.reasons == [BROKER_PROBE] and gauge(metrics) == 0

    # the probe recovers while a publish is still failing: still not ready
    broker_back = asyncio.Event()

    async def publish() -> None:
        if not broker_back.is_set():
            raise KafkaConnectionError("refused")

    task = asyncio.create_task(pipeline.retrier.broker("publish", publish))
    await wait_for(lambda: "broker: publish" in pipeline.readiness.reasons, "the publish to fail")
    consumer.mode = "answer"
    await pipeline.probe.probe()
    assert pipeline.readiness.reasons == ["broker: publish"] and gauge(metrics) == 0
    broker_back.set()
    await task
    assert pipeline.readiness.ready and gauge(metrics) == 1


class FlakyStore(MemoryStore):
    """A MemoryStore whose transactions fail (a connection reset) for messages of the sources in `failing`."""

    def __init__(self) -> None:
        super().__init__()
        self.failing: set[str] = set()

    @contextlib.asynccontextmanager
    async def transaction(self):
        async with super().transaction() as tx:
            processed = tx.processed

            async def failing_processed(ids):
                if {source for source, _ in ids} & self.failing:
                    await asyncio.sleep(0.01)  # a round trip: the next batch takes its locks meanwhile
                    raise ConnectionResetError("connection reset")
                return await processed(ids)

            tx.processed = failing_processed
            yield tx


def batch_of(source: str, players: tuple[str, str], first_offset: int) -> dict:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    values = [orjson.dumps(game_event(i, *players, "1-0", at, source=source)) for i in range(2)]
    return {TP: [SimpleNamespace(value=v, key=None, headers=(), topic=TP.topic, partition=0, offset=first_offset + i,
                                 timestamp=int(time.time() * 1000))
                 for i, v in enumerate(values)]}


async def test_one_batch_committing_does_not_make_ready_while_the_next_one_still_fails():
    store = FlakyStore()
    store.failing = {"/a", "/b"}
    pipeline, metrics, _ = ready_pipeline(store)
    a = await pipeline.launch(batch_of("/a", ("a1", "a2"), 0))
    b = await pipeline.launch(batch_of("/b", ("b1", "b2"), 2))
    reasons = {f"database: batch {a.seq}", f"database: batch {b.seq}"}
    await wait_for(lambda: set(pipeline.readiness.reasons) == reasons, "both batches to fail")
    store.failing = {"/b"}
    await a.task
    assert not pipeline.readiness.ready and gauge(metrics) == 0, "batch 1 committed, batch 2 still fails"
    assert pipeline.readiness.reasons == [f"database: batch {b.seq}"]
    store.failing = set()
    await b.task
    assert pipeline.readiness.ready and gauge(metrics) == 1


async def test_a_batch_given_up_takes_its_reason_back():
    store = FlakyStore()
    store.failing = {"/a"}
    pipeline, _, _ = ready_pipeline(store)
    a = await pipeline.launch(batch_of("/a", ("a1", "a2"), 0))
    await wait_for(lambda: not pipeline.readiness.ready, "the batch to fail")
    a.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await a.task
    assert pipeline.readiness.ready
