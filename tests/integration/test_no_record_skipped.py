"""Issue 18, "no record is ever skipped": a partition whose records cannot be read (here a gzip batch that
cannot be decompressed, with a CRC that matches) beside a readable one.

A fetch that fails after the Kafka client has drained other partitions used to lose their records: the
client had moved their positions, the retry went on from there, and the next offset commit passed them
(46 of 100 games of a readable partition were never rated). Now every record of the readable partitions
is rated, the broken partition is rated up to the batch it cannot read and stops there, its committed
offset is that batch's first offset, and the worker says so: an ERROR line with topic, partition, offset
and cause, a /readyz reason and a gauge that name it.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg
import orjson

from tests.integration.harness import (
    captured_logs,
    committed_offsets,
    http_get,
    make_topics,
    metric_samples,
    produce,
    worker_config,
)
from tests.integration.rawkafka import corrupt_gzip_batch, send_raw_batch
from worker import dev
from worker.commands.run import run_service
from worker.dev.streams import games


async def processed(database_url: str) -> set[tuple[str, str]]:
    conn = await asyncpg.connect(database_url)
    try:
        return {(r["source"], r["id"]) for r in await conn.fetch("SELECT source, id FROM processed_messages")}
    finally:
        await conn.close()


def ids(values: list[bytes]) -> set[tuple[str, str]]:
    return {(e["source"], e["id"]) for e in map(orjson.loads, values)}


async def test_a_partition_that_cannot_be_read_stops_alone_and_nothing_is_skipped(database_url, broker):
    topics = await make_topics(broker, partitions=2)
    readable = games(100, players=20, seed=3, source="/p0")
    before = games(10, players=6, seed=4, source="/p1-before")
    after = games(10, players=6, seed=5, source="/p1-after")
    # Partition 1: 10 games, a batch that cannot be read (offsets 10 and 11), 10 more games.
    await produce(broker.bootstrap_servers, topics.input, before, partition=1)
    code = await send_raw_batch(broker.bootstrap_servers, topics.input, 1, corrupt_gzip_batch([b"x", b"y"]))
    assert code == 0, f"the broker refused the batch (error {code})"
    await produce(broker.bootstrap_servers, topics.input, after, partition=1)
    # Partition 0 after it, so that one fetch holds partition 0's records and partition 1's error.
    await produce(broker.bootstrap_servers, topics.input, readable, partition=0)

    port = dev.free_port()
    cfg = worker_config(database_url, broker, topics, metrics_port=port, metrics_host="127.0.0.1", batch_size=500)
    stop = asyncio.Event()
    expected = ids(readable) | ids(before)
    with captured_logs(logging.INFO) as logs:
        task = asyncio.create_task(run_service(cfg, stop_event=stop, install_signals=False))
        try:
            deadline = asyncio.get_running_loop().time() + 60
            while (seen := await processed(database_url)) < expected:
                assert asyncio.get_running_loop().time() < deadline, f"{len(expected - seen)} never rated"
                await asyncio.sleep(0.5)
            assert seen == expected, f"missing: {sorted(expected - seen)[:5]}, extra: {sorted(seen - expected)[:5]}"
            status, body = await asyncio.to_thread(http_get, port, "/readyz")
            assert status == 503 and f"unreadable: {topics.input}[1]@10" in body, body
            _, page = await asyncio.to_thread(http_get, port, "/metrics")
            gauge = metric_samples(page, "rating_worker_unreadable_offset")
            assert gauge == {(("partition", "1"), ("topic", topics.input)): 10.0}, gauge
            await asyncio.sleep(2)  # nothing more is rated: the partition stays stopped at offset 10
            assert await processed(database_url) == expected
        finally:
            stop.set()
            assert await asyncio.wait_for(task, 60) == 0

    committed = await committed_offsets(broker.bootstrap_servers, topics.input, topics.group, 2)
    assert committed == {0: 100, 1: 10}, committed  # never past the records it did not take
    errors = [orjson.loads(line) for line in logs.getvalue().splitlines()
              if line.startswith("{") and '"level":"error"' in line]
    stopped = [e for e in errors if e["msg"].startswith("record cannot be read")]
    assert len(stopped) == 1, errors
    assert (stopped[0]["topic"], stopped[0]["partition"], stopped[0]["offset"]) == (topics.input, 1, 10)
    assert "error" in stopped[0]["cause"].lower(), stopped[0]  # zlib's "Error -3 while decompressing data"


async def test_a_codec_the_worker_lacks_stops_its_partition_and_loses_nothing_elsewhere(
        database_url, broker, monkeypatch):
    """The case first seen: snappy records from a librdkafka producer, and a worker without the codec
    library (here: aiokafka made to believe cramjam is missing). The readable partition's games were
    skipped; now they are all rated, and the snappy partition is stopped at its first record, loudly."""
    import aiokafka.codec
    from confluent_kafka import Producer

    topics = await make_topics(broker, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": "snappy",
                         "linger.ms": 20})
    for value in games(20, players=6, seed=6, source="/snappy"):
        producer.produce(topics.input, value=value, partition=1)
    assert producer.flush(30) == 0
    readable = games(100, players=20, seed=7, source="/plain")
    await produce(broker.bootstrap_servers, topics.input, readable, partition=0)
    monkeypatch.setattr(aiokafka.codec, "cramjam", None)

    port = dev.free_port()
    cfg = worker_config(database_url, broker, topics, metrics_port=port, metrics_host="127.0.0.1", batch_size=500)
    stop = asyncio.Event()
    with captured_logs(logging.INFO) as logs:
        task = asyncio.create_task(run_service(cfg, stop_event=stop, install_signals=False))
        try:
            deadline = asyncio.get_running_loop().time() + 60
            while (seen := await processed(database_url)) < ids(readable):
                assert asyncio.get_running_loop().time() < deadline, f"{len(ids(readable) - seen)} never rated"
                await asyncio.sleep(0.5)
            assert seen == ids(readable)
            status, body = await asyncio.to_thread(http_get, port, "/readyz")
            assert status == 503 and f"unreadable: {topics.input}[1]@0" in body, body
        finally:
            stop.set()
            assert await asyncio.wait_for(task, 60) == 0
    committed = await committed_offsets(broker.bootstrap_servers, topics.input, topics.group, 2)
    assert committed == {0: 100, 1: None}, committed
    stopped = [orjson.loads(line) for line in logs.getvalue().splitlines() if "record cannot be read" in line]
    assert len(stopped) == 1 and "snappy" in stopped[0]["cause"], stopped


async def test_a_fetch_that_fails_after_the_client_moved_its_positions_skips_nothing(database_url, broker,
                                                                                     monkeypatch):
    """The mechanism itself, made certain: the worker's consumer really fetches (its positions move past
    the records), then the call raises instead of returning them, as aiokafka does when a later partition
    of the same answer fails. Three times, on a stream spread over three partitions."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import KafkaError

    topics = await make_topics(broker, partitions=3)
    values = games(300, players=30, seed=8)
    real_getmany = AIOKafkaConsumer.getmany
    failures = {"left": 3, "records_thrown_away": 0}

    async def getmany_that_loses_an_answer(self, *partitions, timeout_ms=0, max_records=None):
        records = await real_getmany(self, *partitions, timeout_ms=timeout_ms, max_records=max_records)
        if records and self._group_id == topics.group and failures["left"] > 0:
            failures["left"] -= 1
            failures["records_thrown_away"] += sum(len(r) for r in records.values())
            raise KafkaError("injected: the answer is lost after the positions moved")
        return records

    monkeypatch.setattr(AIOKafkaConsumer, "getmany", getmany_that_loses_an_answer)
    for p in range(3):
        await produce(broker.bootstrap_servers, topics.input, values[p::3], partition=p)
    cfg = worker_config(database_url, broker, topics, batch_size=40)
    stop = asyncio.Event()
    task = asyncio.create_task(run_service(cfg, stop_event=stop, install_signals=False))
    try:
        deadline = asyncio.get_running_loop().time() + 60
        while (seen := await processed(database_url)) < ids(values):
            assert asyncio.get_running_loop().time() < deadline, f"{len(ids(values) - seen)} never rated"
            await asyncio.sleep(0.5)
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 60) == 0
    assert failures["left"] == 0 and failures["records_thrown_away"] > 0
    monkeypatch.undo()
    committed = await committed_offsets(broker.bootstrap_servers, topics.input, topics.group, 3)
    assert committed == {0: 100, 1: 100, 2: 100}, committed
