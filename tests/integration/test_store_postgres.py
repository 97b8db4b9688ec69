"""The PostgreSQL store against a real server: migrations, one batch transaction, locks, the outbox.

Server: the suite's `postgres` fixture (tests/integration/conftest.py) when there is one; otherwise
`worker.dev.start_postgres()`, or `DATABASE_URL`. Each test gets its own database, copied
from a template migrated once per session (or an empty one, for the migration tests).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import itertools
import math
import os
import random
import time
import uuid

import asyncpg
import orjson
import pytest

from worker.contract.changed import encode_change
from worker.dev.databases import drop_database, new_database
from worker.ratings.state import RatingState, StateKey
from worker.store.base import ChangeRecord, ProcessedMessage
from worker.store.migrate import (
    MigrationChecksumMismatch,
    SchemaOutOfDate,
    SchemaTooNew,
    available_migrations,
    check_schema,
    current_version,
    latest_version,
    migrate,
)
from worker.store.postgres import PostgresStore, history_payloads

_names = itertools.count()


async def _maybe_await(value):
    return await value if inspect.isawaitable(value) else value


@pytest.fixture(scope="session")
async def store_server_url(request) -> str:
    """URL of a server (any database on it) we may create databases on."""
    try:
        server = request.getfixturevalue("postgres")  # the suite's shared server, if the conftest has it
    except pytest.FixtureLookupError:
        server = None
    if server is None:
        try:
            from worker.dev import start_postgres
        except ImportError:
            start_postgres = None
        if start_postgres is not None:
            server = await _maybe_await(start_postgres())
            request.addfinalizer(server.stop)
        elif os.environ.get("DATABASE_URL"):
            return os.environ["DATABASE_URL"]
        else:
            pytest.skip("no PostgreSQL: worker.dev is missing and DATABASE_URL is not set")
    return server.url


def _name() -> str:
    return f"rw_store_{os.getpid()}_{next(_names)}_{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="session")
async def store_template(store_server_url):
    name = _name()
    await new_database(store_server_url, name, migrated=True)
    yield name
    await drop_database(store_server_url, name, force=True)


@pytest.fixture
async def empty_db_url(store_server_url):
    name = _name()
    yield await new_database(store_server_url, name)
    await drop_database(store_server_url, name, force=True)


@pytest.fixture
async def db_url(store_server_url, store_template):
    name = _name()
    yield await new_database(store_server_url, name, template=store_template)
    await drop_database(store_server_url, name, force=True)


@pytest.fixture
async def store(db_url):
    s = await PostgresStore.connect(db_url, min_size=1, max_size=8)
    yield s
    await s.close()


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _record(
    key: StateKey, version: int, rating: float | None, delta: float, cause_id: str, at: float
) -> ChangeRecord:
    event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{cause_id}/{key.player_id}/{key.system}/{key.category}"))
    record = ChangeRecord(
        event_id=event_id,
        key=key,
        version=version,
        rating=rating,
        delta=delta,
        cause_type="game.finished",
        cause_source="/game-server/eu-1",
        cause_id=cause_id,
        cause_ref=f"ref-{cause_id}",
        changed_at=at,
        payload=b"",
        before=(None if rating is None else rating - delta, 60.0, 0.06),
        after=(rating, 58.5, 0.06),
        provisional=False,
        floor=100.0,
        games=version,
        time="2026-11-30T12:00:00Z",
    )
    return record._replace(payload=encode_change(record))


async def _count(url: str, table: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(f"SELECT count(*) FROM {table}")
    finally:
        await conn.close()


# ---------------------------------------------------------------------------------------------
# migrations
# ---------------------------------------------------------------------------------------------


async def test_migrate_twice_applies_nothing_the_second_time(empty_db_url):
    assert await migrate(empty_db_url) == [m.name for m in available_migrations()]
    assert await migrate(empty_db_url) == []
    conn = await asyncpg.connect(empty_db_url)
    try:
        assert await current_version(conn) == latest_version() >= 1
        assert await check_schema(conn) == latest_version()
        rows = await conn.fetch("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
    finally:
        await conn.close()
    shipped = {m.version: m for m in available_migrations()}
    assert [(r["version"], r["name"], r["checksum"]) for r in rows] == [
        (v, m.name, hashlib.sha256(m.sql.encode()).hexdigest()) for v, m in sorted(shipped.items())
    ]


async def test_workers_starting_together_migrate_once(empty_db_url):
    results = await asyncio.gather(*(migrate(empty_db_url) for _ in range(5)))
    applied = [r for r in results if r]
    assert applied == [[m.name for m in available_migrations()]]
    assert await _count(empty_db_url, "schema_migrations") == len(available_migrations())


async def test_empty_database_is_out_of_date_until_migrated(empty_db_url):
    conn = await asyncpg.connect(empty_db_url)
    try:
        assert await current_version(conn) == 0
        with pytest.raises(SchemaOutOfDate, match="rating-worker migrate"):
            await check_schema(conn)
        await migrate(conn)  # a connection works as well as a URL
        assert await check_schema(conn) == latest_version()
    finally:
        await conn.close()


async def test_schema_newer_than_the_code_is_refused(db_url):
    newer = latest_version() + 7
    conn = await asyncpg.connect(db_url)
    try:
        await conn.execute(
            "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, 'from_the_future', 'x')",
            newer,
        )
        with pytest.raises(SchemaTooNew, match=rf"version {newer}.*newer than this worker"):
            await migrate(conn)
        with pytest.raises(SchemaTooNew):
            await check_schema(conn)
        # Refusing released the advisory lock: another session can take it at once.
        other = await asyncpg.connect(db_url)
        try:
            from worker.store.migrate import MIGRATION_LOCK_KEY

            assert await other.fetchval("SELECT pg_try_advisory_lock($1)", MIGRATION_LOCK_KEY)
        finally:
            await other.close()
    finally:
        await conn.close()


async def test_an_edited_shipped_migration_is_refused(db_url):
    conn = await asyncpg.connect(db_url)
    try:
        await conn.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1")
        with pytest.raises(MigrationChecksumMismatch, match="0001_initial"):
            await migrate(conn)
    finally:
        await conn.close()


# ---------------------------------------------------------------------------------------------
# one batch transaction
# ---------------------------------------------------------------------------------------------


async def test_batch_round_trip_then_outbox(store, db_url):
    anna, ben, cheat = StateKey("anna", "csr", "blitz"), StateKey("ben", "csr", "blitz"), "cheat99"
    fide = StateKey("anna", "fide", "standard")
    players = sorted(["anna", "ben", cheat])
    at = 1_795_996_800.123456  # 2026-11-30T12:00:00.123456Z

    async with store.transaction() as tx:
        await tx.lock_players(players)
        assert await tx.processed([("/gs", "m1"), ("/gs", "m2")]) == set()
        assert await tx.closed_accounts(players) == {}
        assert await tx.load_states([anna, ben, fide]) == {}
        states = {
            anna: RatingState(
                1651.6, 290.5, 0.059999, 1, None, at, 1, {"w": 1, "d": 0, "l": 0, "f": 0.1 + 0.2}
            ),
            ben: RatingState(1348.4, 290.5, 0.06, 1, None, at, 1, None),
            fide: RatingState(2012.0, None, None, 57, 2080.0, None, 1, None),
        }
        records = [
            _record(anna, 1, 1651.6, 151.6, "m1", at),
            _record(ben, 1, 1348.4, -151.6, "m1", at),
            _record(fide, 1, None, 0.0, "m2", at + 1),
        ]
        processed = [
            ProcessedMessage("/gs", "m1", "game.finished", "applied"),
            ProcessedMessage("/gs", "m2", "rating.imported", "applied"),
            ProcessedMessage("/gs", "m3", "game.finished", "unrated"),
        ]
        row_ids = await tx.save(states, records, processed, {cheat: at + 2})
    assert len(row_ids) == 3 and row_ids == sorted(row_ids)

    async with store.transaction() as tx:
        await tx.lock_players(players)
        assert await tx.processed([("/gs", "m1"), ("/gs", "m3"), ("/gs", "m4"), ("/other", "m1")]) == {
            ("/gs", "m1"),
            ("/gs", "m3"),
        }
        assert await tx.closed_accounts(players) == {cheat: pytest.approx(at + 2, abs=1e-6)}
        assert await tx.closed_accounts(["nobody"]) == {}  # not locked: answered by a query
        loaded = await tx.load_states([anna, ben, fide, StateKey("ben", "csr", "bullet")])
        assert loaded == states  # floats, None and the jsonb `extra` come back exactly
        assert all(type(k) is StateKey for k in loaded)
        # Second change: upsert over the existing rows.
        nxt = {anna: RatingState(1660.25, 280.0, 0.0599, 2, None, at + 10, 2, {"w": 2})}
        [row4] = await tx.save(nxt, [_record(anna, 2, 1660.25, 8.65, "m5", at + 10)], [], {})
    assert row4 > row_ids[-1]

    async with store.transaction() as tx:
        await tx.lock_players(["anna"])
        assert (await tx.load_states([anna]))[anna] == nxt[anna]

    pending = await store.unpublished(100, 0)
    assert [u.row_id for u in pending] == [*row_ids, row4]
    assert [u.player_id for u in pending] == ["anna", "ben", "anna", "anna"]
    assert [u.payload for u in pending[:3]] == [r.payload for r in records]
    assert await store.unpublished(2, 0) == pending[:2]
    assert await store.unpublished(100, 3600) == []  # too young for the relay

    await store.mark_published(row_ids[:2])
    assert [u.row_id for u in await store.unpublished(100, 0)] == [row_ids[2], row4]
    await store.mark_published([row_ids[2], row4, row_ids[0]])  # marking twice is harmless
    assert await store.unpublished(100, 0) == []

    conn = await asyncpg.connect(db_url)
    try:
        row = await conn.fetchrow(
            "SELECT extract(epoch FROM changed_at)::float8 AS at, cause_ref, rating, version"
            " FROM rating_changes WHERE id = $1",
            row_ids[2],
        )
        assert row["at"] == pytest.approx(at + 1, abs=1e-6)
        assert (row["cause_ref"], row["rating"], row["version"]) == ("ref-m2", None, 1)
        assert (
            await conn.fetchval("SELECT closed_reason FROM players WHERE player_id = $1", cheat)
            == "fair_play"
        )
        # Stored as a JSON object, not as a JSON string holding JSON (no double encoding).
        extra = "SELECT jsonb_typeof(extra) || ' ' || extra::text FROM ratings WHERE player_id = 'anna' AND system = 'csr'"
        assert await conn.fetchval(extra) == 'object {"w": 2}'
    finally:
        await conn.close()


async def test_an_exception_rolls_back_everything(store, db_url):
    key = StateKey("zoe", "csr", "rapid")
    with pytest.raises(RuntimeError, match="boom"):
        async with store.transaction() as tx:
            await tx.lock_players(["yan", "zoe"])
            await tx.save(
                {key: RatingState(1500.0, 350.0, 0.06, 1, None, 1.0, 1, None)},
                [_record(key, 1, 1500.0, 0.0, "m1", 1.0)],
                [ProcessedMessage("/gs", "m1", "game.finished", "applied")],
                {"yan": 5.0},
            )
            raise RuntimeError("boom")
    for table in ("players", "ratings", "rating_changes", "outbox", "processed_messages"):
        assert await _count(db_url, table) == 0, table
    assert await store.unpublished(10, 0) == []
    assert await store.outbox_backlog() == 0


async def _save_changes(store, key: StateKey, versions: range, cause: str) -> list[int]:
    async with store.transaction() as tx:
        await tx.lock_players([key.player_id])
        records = [_record(key, v, 1500.0 + v, 1.0, f"{cause}-{v}", 1.7e9 + v) for v in versions]
        return await tx.save({}, records, [], {})


async def test_outbox_backlog_counts_the_rows_not_yet_published(store, db_url):
    assert await store.outbox_backlog() == 0
    ids = await _save_changes(store, StateKey("anna", "csr", "blitz"), range(1, 6), "m")
    ids += await _save_changes(store, StateKey("ben", "csr", "blitz"), range(1, 3), "m")
    assert await store.outbox_backlog() == 7
    await store.mark_published(ids[:4])
    assert await store.outbox_backlog() == 3
    await store.mark_published(ids[:4])  # again: nothing left to remove
    assert await store.outbox_backlog() == 3
    await store.mark_published(ids)
    assert await store.outbox_backlog() == 0
    assert await _count(db_url, "rating_changes") == 7  # the history stays


async def test_mark_published_takes_rows_out_of_unpublished(store, db_url):
    anna, ben = StateKey("anna", "csr", "blitz"), StateKey("ben", "csr", "blitz")
    a_ids = await _save_changes(store, anna, range(1, 4), "a")
    b_ids = await _save_changes(store, ben, range(1, 4), "b")
    assert [u.row_id for u in await store.unpublished(100, 0)] == a_ids + b_ids
    await store.mark_published([b_ids[1], a_ids[0], a_ids[2]])  # any order, across batches
    pending = await store.unpublished(100, 0)
    assert [(u.row_id, u.player_id) for u in pending] == [
        (a_ids[1], "anna"),
        (b_ids[0], "ben"),
        (b_ids[2], "ben"),
    ]
    assert await store.unpublished(1, 0) == pending[:1]  # still oldest first
    await store.mark_published([])  # nothing to do, no round trip
    await store.mark_published([u.row_id for u in pending] + [10**12])  # an unknown id is ignored
    assert await store.unpublished(100, 0) == []
    assert await store.outbox_backlog() == 0
    conn = await asyncpg.connect(db_url)
    try:
        # The history rows are untouched: still there, their rating.changed rebuilt from them.
        ids = await conn.fetch("SELECT id FROM rating_changes ORDER BY id")
        assert [r["id"] for r in ids] == a_ids + b_ids
        payloads = await history_payloads(conn)
        assert all(orjson.loads(p)["subject"] in ("anna", "ben") for p in payloads)
    finally:
        await conn.close()


async def test_unpublished_only_returns_rows_older_than_the_minimum_age(store, db_url):
    key = StateKey("anna", "csr", "blitz")
    old_ids = await _save_changes(store, key, range(1, 3), "old")
    conn = await asyncpg.connect(db_url)
    try:
        # Age the first batch: as if it had been written (and not published) a minute ago.
        await conn.execute(
            "UPDATE outbox SET created_at = created_at - interval '60 seconds' WHERE change_id = ANY($1::int8[])",
            old_ids,
        )
    finally:
        await conn.close()
    new_ids = await _save_changes(store, key, range(3, 5), "new")
    assert [u.row_id for u in await store.unpublished(100, 30)] == old_ids
    assert [u.row_id for u in await store.unpublished(100, 0)] == old_ids + new_ids
    assert await store.outbox_backlog() == 4


async def test_writes_for_players_not_locked_are_refused(store):
    key = StateKey("anna", "csr", "blitz")
    async with store.transaction() as tx:
        await tx.lock_players(["ben"])
        with pytest.raises(ValueError, match="not locked"):
            await tx.save({key: RatingState(1500.0)}, [], [], {})
        with pytest.raises(ValueError, match="not locked"):
            await tx.save({}, [], [], {"anna": 1.0})


async def test_non_finite_numbers_are_refused_not_stored_as_null(store):
    key = StateKey("anna", "csr", "blitz")
    async with store.transaction() as tx:
        await tx.lock_players(["anna"])
        with pytest.raises(ValueError, match="rd=nan"):
            await tx.save({key: RatingState(1500.0, math.nan, 0.06, 1, None, None, 1)}, [], [], {})


async def test_a_duplicate_version_fails_the_batch(store):
    key = StateKey("anna", "csr", "blitz")
    async with store.transaction() as tx:
        await tx.lock_players(["anna"])
        await tx.save({}, [_record(key, 1, 1500.0, 0.0, "m1", 1.0)], [], {})
    with pytest.raises(asyncpg.UniqueViolationError):
        async with store.transaction() as tx:
            await tx.lock_players(["anna"])
            await tx.save({}, [_record(key, 1, 1500.0, 0.0, "m2", 1.0)], [], {})


# ---------------------------------------------------------------------------------------------
# locks
# ---------------------------------------------------------------------------------------------


async def test_overlapping_player_sets_in_sorted_order_do_not_deadlock(store):
    """Two batches: overlapping players, some new to both (created by the lock), some existing."""
    async with store.transaction() as tx:
        await tx.lock_players(["b", "d"])  # existing rows; a, c, e, f are new
    order: list[str] = []

    async def batch(name: str, players: list[str]) -> None:
        async with store.transaction() as tx:
            await tx.lock_players(players)
            order.append(name)
            await asyncio.sleep(0.05)

    await asyncio.wait_for(
        asyncio.gather(batch("one", ["a", "b", "c", "d", "e"]), batch("two", ["b", "c", "d", "e", "f"])),
        timeout=20,
    )
    assert sorted(order) == ["one", "two"]


async def test_many_batches_with_random_overlaps_never_deadlock(store):
    """8 concurrent workers, 25 batches each, random sorted subsets of 40 players (new and existing
    mixed): any deadlock would surface as DeadlockDetectedError (deadlock_timeout, 1 s by default)."""
    pool_ids = [f"p{i:03d}" for i in range(40)]
    done = 0

    async def worker(seed: int) -> None:
        nonlocal done
        rnd = random.Random(seed)
        for _ in range(25):
            players = sorted(rnd.sample(pool_ids, rnd.randint(2, 12)))
            async with store.transaction() as tx:
                await tx.lock_players(players)
                await asyncio.sleep(rnd.random() * 0.003)
            done += 1

    await asyncio.wait_for(asyncio.gather(*(worker(s) for s in range(8))), timeout=120)
    assert done == 200


async def test_a_batch_waits_for_the_lock_then_sees_what_the_holder_processed(store):
    """The guarantee `apply_batch` relies on (lock first, then dedupe): a message applied by a batch
    that held our players' locks is visible as processed once our locks are granted."""
    first_holds = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with store.transaction() as tx:
            await tx.lock_players(["anna", "ben"])
            await tx.save({}, [], [ProcessedMessage("/gs", "g-1", "game.finished", "applied")], {})
            first_holds.set()
            await release.wait()

    async def second() -> set:
        await first_holds.wait()
        async with store.transaction() as tx:
            await tx.lock_players(["ben", "carl"])
            return await tx.processed([("/gs", "g-1")])

    t1 = asyncio.create_task(first())
    t2 = asyncio.create_task(second())
    await first_holds.wait()
    await asyncio.sleep(0.3)
    assert not t2.done()  # blocked on ben's row lock
    release.set()
    await asyncio.wait_for(t1, 10)
    assert await asyncio.wait_for(t2, 10) == {("/gs", "g-1")}


# ---------------------------------------------------------------------------------------------
# size: a batch of 500 games
# ---------------------------------------------------------------------------------------------


async def test_a_batch_of_500_games_is_written_in_a_few_round_trips(store, db_url):
    """Realistic batch sizes (1,000 locks, 1,000 states, 1,000 history rows, 500 processed ids), the
    history ids drawn in the records' order (the relay publishes by id: a player's versions in order).
    Prints the timings (pytest -s); the bound is loose, only a gross regression fails."""
    rnd = random.Random(5)
    population = [f"player-{i:06d}" for i in range(3000)]
    timings: list[dict[str, float]] = []
    for b in range(4):
        games = [(f"g-{b}-{i}", *rnd.sample(population, 2)) for i in range(500)]
        players = sorted({p for _, w, k in games for p in (w, k)})
        keys = {StateKey(p, "csr", "blitz") for p in players}
        t0 = time.perf_counter()
        async with store.transaction() as tx:
            t1 = time.perf_counter()
            await tx.lock_players(players)
            t2 = time.perf_counter()
            await tx.processed([("/gs", g) for g, _, _ in games])
            await tx.closed_accounts(players)
            t3 = time.perf_counter()
            states = await tx.load_states(keys)
            t4 = time.perf_counter()
            changed: dict[StateKey, RatingState] = {}
            records = []
            for g, white, black in games:
                for p, d in ((white, 7.5), (black, -7.5)):
                    k = StateKey(p, "csr", "blitz")
                    s = changed.get(k) or states.get(k) or RatingState(1500.0, 350.0, 0.06)
                    n = RatingState(
                        s.rating + d, max(45.0, (s.rd or 350.0) - 3), 0.06, s.games + 1, None, 1.7e9 + b,
                        s.version + 1, {"w": s.games},
                    )  # fmt: skip
                    changed[k] = n
                    records.append(_record(k, n.version, n.rating, d, g, 1.7e9 + b))
            processed = [ProcessedMessage("/gs", g, "game.finished", "applied") for g, _, _ in games]
            t5 = time.perf_counter()
            ids = await tx.save(changed, records, processed, {})
            t6 = time.perf_counter()
        t7 = time.perf_counter()
        assert len(ids) == 1000 and len(set(ids)) == 1000
        assert ids == sorted(ids)
        timings.append(
            {
                "lock": t2 - t1,
                "processed": t3 - t2,
                "load": t4 - t3,
                "save": t6 - t5,
                "commit": t7 - t6,
                "store_total": (t7 - t0) - (t5 - t4),
            }
        )
    assert await _count(db_url, "rating_changes") == 4000
    assert await _count(db_url, "outbox") == 4000  # written with the history, in the same statement
    assert await _count(db_url, "processed_messages") == 2000
    last = timings[-1]
    print("\n500-game batch (ms): " + ", ".join(f"{k} {v * 1000:.1f}" for k, v in last.items()))
    assert last["store_total"] < 5.0
