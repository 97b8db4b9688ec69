"""The pipeline's ordering chain and halting, with the in-memory store (no broker needed)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
from aiokafka import TopicPartition

from worker.config import load
from worker.dev.streams import games
from worker.observability import Metrics
from worker.pipeline import Pipeline, Stopping
from worker.store.memory import MemoryStore

TP = TopicPartition("games", 0)
CFG = load(env={"DATABASE_URL": "postgresql://x/y", "KAFKA_BOOTSTRAP_SERVERS": "k:9092"})


def records(values: list[bytes], first_offset: int) -> dict:
    return {TP: [SimpleNamespace(value=v, key=None, headers=(), topic=TP.topic, partition=0, offset=first_offset + i,
                                 timestamp=int(time.time() * 1000))
                 for i, v in enumerate(values)]}


async def test_a_batch_of_only_bad_messages_is_not_part_of_the_ordering_chain():
    """Else it "commits" at once and lets the batch after it overtake the batch before it (review finding)."""
    pipeline = Pipeline(CFG, MemoryStore(), Metrics())
    values = games(4, players=2, seed=1)
    a = await pipeline.launch(records(values[:2], 0))
    b = await pipeline.launch(records([b"not json"], 2))
    c = await pipeline.launch(records(values[2:], 3))
    assert b.prev is None and c.prev is a
    await asyncio.gather(a.task, b.task, c.task)


async def test_after_a_halt_nothing_more_is_committed():
    pipeline = Pipeline(CFG, MemoryStore(), Metrics())
    pipeline.halt(RuntimeError("drain failed during a rebalance"))
    with pytest.raises(Stopping):
        await pipeline.completion.commit_offsets({TP: 10})
    assert isinstance(pipeline.broken, RuntimeError) and pipeline.stopping


@pytest.mark.parametrize(
    "exc,transient",
    [
        ("SerializationError", True), ("DeadlockDetectedError", True), ("AdminShutdownError", True),
        ("QueryCanceledError", True), ("TooManyConnectionsError", True), ("ConnectionDoesNotExistError", True),
        ("NumericValueOutOfRangeError", False), ("UniqueViolationError", False), ("UndefinedTableError", False),
    ],
)
def test_only_database_errors_a_retry_can_get_past_are_retried(exc, transient):
    import asyncpg

    from worker.pipeline import is_transient

    assert is_transient(getattr(asyncpg.exceptions, exc)("x")) is transient


def test_connection_level_errors_are_transient():
    from worker.pipeline import is_transient

    assert is_transient(ConnectionResetError()) and is_transient(TimeoutError()) and not is_transient(ValueError())
