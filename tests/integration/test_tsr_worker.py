"""TSR through replay and through the worker: the seed's five-account table, and CSR and TSR interleaved."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import asyncpg
import orjson
import pytest

from tests.integration.harness import make_topics, produce, read_topic, wait_processed, worker_config
from tests.integration.test_worker_end_to_end import running_worker, stored_ratings
from worker.commands.replay import replay
from worker.contract.times import parse_time
from worker.dev.streams import games, turbo_event, turbo_events
from worker.ratings.state import RatingState, StateKey
from worker.store.memory import MemoryStore

AT = datetime(2026, 11, 30, 12, 10, tzinfo=UTC)
DAY = 86400.0
SEED_EVENT = orjson.dumps(turbo_event(991, [
    ("anna", 0.72, 31, (2, 0, 1)), ("ben", 0.65, 28, (1, 0, 2)), ("cleo", 0.645, 25, (2, 0, 1)),
    ("dev", 0.50, 12, (1, 0, 2)), ("eve", 0.80, 9, (2, 0, 1))], AT))
# docs/rules.md#tsr: Anna new; Ben, Cleo and Dev stored at the table's "TSR before", last rated 3, 10 and 1 days before.
BEFORE = {"ben": (1620.0, 90.0, 3), "cleo": (1480.0, 120.0, 10), "dev": (1550.0, 70.0, 1)}
SEED_AFTER = {"anna": (1809, 150, 309), "ben": (1600, 83, -20), "cleo": (1530, 103, 50), "dev": (1501, 67, -49)}


def _before_states() -> dict[StateKey, RatingState]:
    at = parse_time("2026-11-30T12:10:00Z")
    return {StateKey(p, "tsr", "turbo"): RatingState(r, rd, 0.06, 5, None, at - days * DAY, 5)
            for p, (r, rd, days) in BEFORE.items()}


def _table(changes: list[dict]) -> dict[str, tuple[int, int, int]]:
    return {d["player_id"]: (round(d["after"]["rating"]), round(d["after"]["rd"]), round(d["delta"]))
            for d in changes}


async def test_seed_table_through_replay():
    store = MemoryStore()
    store.states.update(_before_states())
    out = io.BytesIO()
    await replay([SEED_EVENT], out, store=store)
    assert _table([orjson.loads(line)["data"] for line in out.getvalue().splitlines()]) == SEED_AFTER


async def test_seed_table_through_the_worker(database_url, broker, topics):
    conn = await asyncpg.connect(database_url)
    try:
        for key, st in _before_states().items():
            await conn.execute("INSERT INTO players (player_id) VALUES ($1)", key.player_id)
            await conn.execute(
                "INSERT INTO ratings (player_id, system, category, rating, rd, volatility, games, peak, last_at,"
                " version) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, $8, $9)",
                *key, st.rating, st.rd, st.volatility, st.games, st.last_at, st.version)
    finally:
        await conn.close()
    await produce(broker.bootstrap_servers, topics.input, [SEED_EVENT])
    async with running_worker(worker_config(database_url, broker, topics)):
        assert await wait_processed(database_url, 1) == 1
        published = await read_topic(broker.bootstrap_servers, topics.output, at_least=4)
    assert _table([orjson.loads(r.value)["data"] for r in published]) == SEED_AFTER
    stored = await stored_ratings(database_url)
    assert ("eve", "tsr", "turbo") not in stored  # fewer than 10 votes: not rated, nothing stored


async def test_csr_and_tsr_interleaved_on_several_partitions(database_url, broker):
    """Games and events for the same players, on three partitions: each stream's order is its partition's,
    and the two systems' states are independent, so the result equals replaying each stream."""
    topics = await make_topics(broker, partitions=3)
    csr_games = games(1500, players=40, seed=31)
    tsr_a = turbo_events(150, players=40, seed=32, source="/turbo/a")
    tsr_b = turbo_events(150, players=40, seed=33, source="/turbo/b", prefix="q")  # a second pool
    await produce(broker.bootstrap_servers, topics.input, csr_games, partition=0)
    await produce(broker.bootstrap_servers, topics.input, tsr_a, partition=1)
    await produce(broker.bootstrap_servers, topics.input, tsr_b, partition=2)
    async with running_worker(worker_config(database_url, broker, topics, batch_size=200)):
        assert await wait_processed(database_url, 1800) == 1800
    expected = MemoryStore()
    for stream in (csr_games, tsr_a, tsr_b):
        await replay(stream, io.BytesIO(), store=expected)
    stored = await stored_ratings(database_url)
    assert {k for k in stored if k[1] == "tsr"} and {k for k in stored if k[1] == "csr"}
    assert len(stored) == len(expected.states)
    for key, st in expected.states.items():
        row = stored[tuple(key)]
        assert row["rating"] == pytest.approx(st.rating, abs=1e-9) and row["version"] == st.version
