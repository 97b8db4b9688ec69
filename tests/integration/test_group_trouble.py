"""Issue 18, "group trouble is named and recovered from": consumer-group members of another client
(librdkafka, through confluent-kafka) in the worker's group.

- A member that offers `range` (librdkafka's and the Java client's first default assignor) shares the group
  with the worker, which offers range besides round robin. Every assignment change is logged at INFO
  (partitions gained and lost) and `rating_worker_assigned_partitions` follows it; once the member leaves,
  the worker takes its partitions over and rates what waited there.
- A member that offers only `cooperative-sticky` cannot share a group with any aiokafka consumer (aiokafka
  has no cooperative protocol). The worker says so in one ERROR line and a readiness reason, keeps trying,
  and exits with code 75 after WATCHDOG_TIMEOUT_S, for its supervisor to start a fresh process. (On Apache
  Kafka it joins as soon as the member is gone; Tansu keeps the group's protocol after the member left, so
  here the exit is the end: docs/operations.md, "Consumer group trouble".)
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time

import orjson
from confluent_kafka import Consumer

from tests.integration.harness import (
    http_get,
    make_topics,
    metric_samples,
    produce,
    wait_processed,
    worker_env,
)
from worker import dev
from worker.commands.run import WATCHDOG_EXIT_CODE
from worker.dev.streams import games, player_of


class ForeignMember:
    """A librdkafka consumer in the group, polling on a thread of its own, never committing."""

    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str) -> None:
        self.assigned: list = []
        self._stop = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                   "partition.assignment.strategy": strategy, "enable.auto.commit": False,
                                   "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        self._consumer.subscribe([topic], on_assign=lambda _, parts: self.assigned.append(len(parts)))
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._consumer.poll(0.2)
        self._consumer.close()  # leaves the group

    def leave(self) -> None:
        self._stop.set()
        self._thread.join(30)


async def until(predicate, timeout: float, what: str) -> None:
    """Wait for `predicate()` (a plain or an async function) to be true."""
    deadline = time.monotonic() + timeout
    while not (await result if inspect.isawaitable(result := predicate()) else result):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await asyncio.sleep(0.3)


def log_lines(text: str, msg: str) -> list[dict]:
    return [e for e in (orjson.loads(line) for line in text.splitlines() if line.startswith("{")) if e["msg"] == msg]


async def assigned_here(port: int, topic: str) -> float:
    """This worker's rating_worker_assigned_partitions for `topic` (-1 while it does not answer yet)."""
    status, page = await asyncio.to_thread(http_get, port, "/metrics")
    if status != 200:
        return -1
    return metric_samples(page, "rating_worker_assigned_partitions").get((("topic", topic),), -1)


async def test_a_foreign_member_offering_range_shares_the_group_and_hands_its_partitions_over(
        database_url, broker, workers):
    topics = await make_topics(broker, partitions=4)
    foreign = ForeignMember(broker.bootstrap_servers, topics.group, topics.input, "range")
    try:
        await until(lambda: bool(foreign.assigned), 30, "the foreign member's assignment")
        port = dev.free_port()
        w = workers.start(worker_env(database_url, broker, topics, metrics_port=port, metrics_host="127.0.0.1"))
        values = games(400, players=30, seed=41)
        await produce(broker.bootstrap_servers, topics.input, values, key_of=player_of)

        async def sharing() -> bool:
            return 0 < await assigned_here(port, topics.input) < 4
        await until(sharing, 60, "the worker to share the group")
        rated_while_shared = await wait_processed(database_url, len(values), timeout=5)
        assert 0 < rated_while_shared < len(values), "the foreign member holds some partitions, unrated"
    finally:
        foreign.leave()

    async def all_four() -> bool:
        return await assigned_here(port, topics.input) == 4
    await until(all_four, 60, "the worker to take the foreign member's partitions")
    assert await wait_processed(database_url, len(values)) == len(values)
    assert await workers.stop(w) == 0
    changes = log_lines(workers.log(), "partitions assigned")
    assert len(changes) >= 2, changes
    shared, whole = changes[-2], changes[-1]
    assert 0 < shared["partitions"] < 4 and whole["partitions"] == 4
    gained = set(whole["gained"].get(topics.input, []))
    assert gained and len(gained) == 4 - shared["partitions"], (shared, whole)


async def test_a_group_the_worker_cannot_join_is_said_and_ends_in_an_exit_for_the_supervisor(
        database_url, broker, workers):
    topics = await make_topics(broker, partitions=2)
    foreign = ForeignMember(broker.bootstrap_servers, topics.group, topics.input, "cooperative-sticky")
    try:
        await until(lambda: bool(foreign.assigned), 30, "the foreign member's assignment")
        port = dev.free_port()
        env = worker_env(database_url, broker, topics, metrics_port=port, metrics_host="127.0.0.1",
                         watchdog_timeout_s=10, db_command_timeout_s=2)
        w = workers.start(env)

        async def said() -> bool:
            status, body = await asyncio.to_thread(http_get, port, "/readyz")
            return status == 503 and "group: InconsistentGroupProtocolError" in body
        await until(said, 60, "/readyz to name the group trouble")
        assert await workers.wait(w, timeout=60) == WATCHDOG_EXIT_CODE
    finally:
        foreign.leave()
    text = workers.log()
    errors = log_lines(text, "cannot join the consumer group: retrying, rating nothing meanwhile "
                             "(docs/operations.md, 'Consumer group trouble')")
    assert len(errors) == 1, "one ERROR line per kind of trouble, not one per retry"
    assert errors[0]["level"] == "error" and "cooperative-sticky" in errors[0]["reason"]
    assert any(e["level"] == "error" and e["exit_code"] == WATCHDOG_EXIT_CODE
               for e in log_lines(text, "watchdog: work is waiting but no batch completed, exiting for a restart"))
