"""FIDE events and ChessKite attempts through the worker: the same states as replay."""

from __future__ import annotations

import io
import random

import asyncpg
import orjson
import pytest

from tests.integration.harness import produce, read_topic, wait_processed, worker_config
from tests.integration.test_worker_end_to_end import running_worker, stored_ratings
from worker.commands.replay import replay
from worker.dev.streams import fide_events, puzzle_attempts
from worker.ratings.state import RatingState, StateKey
from worker.store.memory import MemoryStore
from worker.store.postgres import history_payloads


def assert_same(stored: dict, memory: MemoryStore) -> None:
    assert len(stored) == len(memory.states)
    for key, st in memory.states.items():
        row = stored[tuple(key)]
        assert row["rating"] == pytest.approx(st.rating, abs=1e-9)
        assert (row["games"], row["version"]) == (st.games, st.version)


async def test_chesskite_rates_challenge_cards_only(database_url, broker, topics):
    values = puzzle_attempts(400, players=15, seed=51)
    challenges = sum(orjson.loads(v)["data"]["challenge"] for v in values)
    await produce(broker.bootstrap_servers, topics.input, values)
    async with running_worker(worker_config(database_url, broker, topics, batch_size=64)):
        assert await wait_processed(database_url, 400) == 400
        published = await read_topic(broker.bootstrap_servers, topics.output, at_least=challenges)
    assert len(published) == challenges  # one change per challenge attempt, none for the others
    conn = await asyncpg.connect(database_url)
    try:
        outcomes = dict(await conn.fetch("SELECT outcome, count(*) FROM processed_messages GROUP BY outcome"))
    finally:
        await conn.close()
    assert outcomes == {"applied": challenges, "unrated": 400 - challenges}
    assert all(orjson.loads(r.value)["data"]["after"]["rd"] is None for r in published)
    assert_same(await stored_ratings(database_url), await replay(values, io.BytesIO()))


async def test_fide_tournaments_over_months_equal_replay(database_url, broker, topics):
    rng = random.Random(52)
    names = [f"f{i:02d}" for i in range(16)]
    # Listed players, as an import would leave them (no rating.imported yet): a published rating, no period.
    before = {StateKey(p, "fide", "standard"): RatingState(float(rng.randint(1500, 2450)), None, None, 40,
                                                           None, None, 1, None) for p in names}
    conn = await asyncpg.connect(database_url)
    try:
        for key, st in before.items():
            await conn.execute("INSERT INTO players (player_id) VALUES ($1)", key.player_id)
            await conn.execute(
                "INSERT INTO ratings (player_id, system, category, rating, games, version) VALUES ($1, $2, $3, $4, $5,"
                " $6)", *key, st.rating, st.games, st.version)
    finally:
        await conn.close()
    values = fide_events(12, names, seed=53)
    await produce(broker.bootstrap_servers, topics.input, values)
    async with running_worker(worker_config(database_url, broker, topics, batch_size=3)):
        assert await wait_processed(database_url, 12) == 12
    memory = MemoryStore()
    memory.states.update(before)
    out = io.BytesIO()
    await replay(values, out, store=memory)
    stored = await stored_ratings(database_url)
    assert_same(stored, memory)
    assert max(r["version"] for r in stored.values()) > 2  # periods closed and events rated
    # The history's columns give back replay's rating.changed bytes (unlisted ratings as null included).
    conn = await asyncpg.connect(database_url)
    try:
        assert sorted(await history_payloads(conn)) == sorted(out.getvalue().splitlines())
    finally:
        await conn.close()
