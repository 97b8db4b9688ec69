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


async def through_worker_and_replay(values, database_url, broker, topics, batch_size: int, at_least: int):
    """The values through a worker (real broker and PostgreSQL) and through replay: the states must be the
    same; returns (the changes published, the changes replay wrote, replay's store)."""
    await produce(broker.bootstrap_servers, topics.input, values)
    async with running_worker(worker_config(database_url, broker, topics, batch_size=batch_size)):
        assert await wait_processed(database_url, len(values)) == len(values)
        published = await read_topic(broker.bootstrap_servers, topics.output, at_least=at_least)
    out = io.BytesIO()
    memory = await replay(values, out)
    assert_same(await stored_ratings(database_url), memory)
    return ([orjson.loads(r.value)["data"] for r in published],
            [orjson.loads(x)["data"] for x in out.getvalue().splitlines()], memory)


def _imported(player: str, category: str, rating: int, imported_at: str = "2026-11-01T00:00:00Z") -> bytes:
    data = {"player_id": player, "system": "fide", "category": category, "rating": rating, "games": 60,
            "imported_at": imported_at}
    return orjson.dumps({"specversion": "1.0", "id": f"imp-{player}-{category}-{imported_at[:7]}",
                         "source": "/fide-list",
                         "type": "rating.imported", "time": data["imported_at"], "data": data})


def _fide_event(ident: str, pairs: list[tuple[str, str, str]], finished: str, rating_type: str = "standard",
                started: str | None = None) -> bytes:
    ids = sorted({p for w, b, _ in pairs for p in (w, b)})
    data = {"competition_id": ident, "kind": "fide", "rated": True, "finished_at": finished,
            "rating_type": rating_type, "players": [{"player_id": p} for p in ids],
            "games": [{"round": n + 1, "white": w, "black": b, "result": r} for n, (w, b, r) in enumerate(pairs)]}
    if started is not None:
        data["started_at"] = started
    return orjson.dumps({"specversion": "1.0", "id": f"{ident}-end", "source": "/fide", "type": "event.finished",
                         "time": finished, "data": data})


def _rapid_event(i: int, pairs: list[tuple[str, str, str]], day: int) -> bytes:
    return _fide_event(f"r{i}", pairs, f"2026-11-{day:02d}T18:00:00Z", "rapid")


@pytest.mark.parametrize("batch_size", [1, 50])
async def test_rapid_newcomers_with_a_standard_rating_are_rated_through_the_worker(database_url, broker, topics,
                                                                                  batch_size):
    """Issue 20, item 3 (FIDE Rapid and Blitz Rating Regulations, unrated players): s1 and s2 hold only
    standard ratings; their rapid games are rated for them and for their rapid-rated opponents, exactly
    as replay rates them, and s1's first rapid record is not provisional and has no rating before."""
    values = [_imported("s1", "standard", 2000), _imported("s2", "standard", 1700),
              _imported("r1", "rapid", 1800), _imported("r2", "rapid", 1900),
              _rapid_event(1, [("s1", "r1", "1-0"), ("r2", "s2", "1/2-1/2"), ("s1", "s2", "1-0")], 10),
              _rapid_event(2, [("r1", "s2", "0-1"), ("u", "r2", "1-0")], 20)]
    changes, expected, _ = await through_worker_and_replay(values, database_url, broker, topics, batch_size, 11)
    assert sorted(orjson.dumps(c, option=orjson.OPT_SORT_KEYS) for c in changes) == sorted(
        orjson.dumps(c, option=orjson.OPT_SORT_KEYS) for c in expected)
    rapid = [c for c in changes if c["category"] == "rapid" and c["cause"]["type"] == "event.finished"]
    s1 = next(c for c in rapid if c["player_id"] == "s1")
    assert (s1["before"]["rating"], s1["delta"], s1["provisional"]) == (None, None, False)
    assert s1["after"]["rating"] > 2000
    # r1's game against s1 counted (rated against s1's standard 2000), and r2's against s2
    assert {c["player_id"] for c in rapid if c["cause"]["ref"] == "r1"} == {"s1", "s2", "r1", "r2"}
    # u holds no rating at all: pooled, and r2's game against him is not rated
    assert sorted(c["player_id"] for c in rapid if c["cause"]["ref"] == "r2") == ["r1", "s2", "u"]


@pytest.mark.parametrize("batch_size", [1, 50])
async def test_an_event_across_a_list_date_is_rated_with_the_list_in_force_at_its_start(database_url, broker,
                                                                                      topics, batch_size):
    """Issue 20, item 5 (section 7.1.3): the December list is imported while a tournament that started in
    November is under way; it is rated with the November ratings, one that started in December with the
    December ones, and both go to the January list (they end after 28 November). Worker = replay."""
    values = [_imported("a", "standard", 2000), _imported("b", "standard", 2000),
              _imported("a", "standard", 2100, "2026-12-01T00:00:00Z"),
              _fide_event("open-nov", [("a", "b", "1-0")], "2026-12-04T18:00:00Z", started="2026-11-27T10:00:00Z"),
              _fide_event("open-dec", [("b", "a", "1-0")], "2026-12-12T18:00:00Z", started="2026-12-05T10:00:00Z")]
    changes, expected, memory = await through_worker_and_replay(values, database_url, broker, topics, batch_size, 7)
    assert len(changes) == len(expected) == 7
    a = [c for c in changes if c["player_id"] == "a" and c["cause"]["type"] == "event.finished"]
    # November list: 2000 v 2000, a win: +20 x 0.5 on the 2100 now published. December list: a 2100 v b
    # 2000, D 100 -> PD .64, a loss: 20 x -0.64 more.
    assert [c["after"]["rating"] for c in a] == [pytest.approx(2110.0), pytest.approx(2110.0 - 12.8)]
    assert memory.states[StateKey("a", "fide", "standard")].extra["period"] == "2027-01"
