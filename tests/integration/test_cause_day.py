"""A month's index of causes by day (migration 0014) against a real PostgreSQL: change_day is the UTC day,
every statement that finds changes by their cause is answered by the months' (day, ref) index (fair play
by both, a lookup by ref by a skip scan over the days), and migrating converts the months there are while
the partition of a history from before 0012 keeps its index by ref.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from tests.integration.harness import empty_database, history_indexes, migrations_from, schema_before
from worker.store.migrate import MigrationError, migrate
from worker.store.queries import QUERIES

pytestmark = pytest.mark.timeout(120)
NOW = datetime.now(UTC)
INSERT = ("INSERT INTO rating_changes (event_id, player_id, system, category, version, rating, delta, cause_type, "
          "cause_source, cause_id, cause_ref, changed_at) "
          "VALUES ($1, $2, 'csr', 'blitz', $3, 1500, 0, 'game.finished', '/gs', $4, $5, $6)")


async def _history(conn, games: int, first: datetime) -> None:
    """Two sides a game, one game an hour from `first`, each player's versions in order."""
    await conn.execute("SELECT rating_changes_ensure_months($1, $2)", first, first + timedelta(hours=games))
    rows = []
    for g in range(games):
        at = first + timedelta(hours=g)
        for side in ("w", "b"):
            rows.append((f"e{g}{side}", f"{side}{g % 50}", g // 50 + 1, f"m{g}", f"game-{g}", at))
    await conn.executemany(INSERT, rows)


async def test_change_day_is_the_utc_day(database_url):
    conn = await asyncpg.connect(database_url)
    try:
        for text, day in (("2026-12-04 23:59:59.999+00", "2026-12-04"), ("2026-12-04 20:00-05", "2026-12-05"),
                          ("2026-12-05 00:30+01", "2026-12-04")):
            assert str(await conn.fetchval("SELECT change_day($1::text::timestamptz)", text)) == day
        await conn.execute("SET TimeZone = 'Asia/Tokyo'")  # the session's zone changes nothing
        assert str(await conn.fetchval("SELECT change_day('2026-12-04 20:00-05'::timestamptz)")) == "2026-12-05"
    finally:
        await conn.close()


@pytest.mark.parametrize("name", ["games_with", "message_changes_by_ref", "message_records_by_ref",
                                  "messages_with_ref", "fide_list_applied"])
async def test_statements_by_cause_use_the_months_index_of_causes(database_url, name):
    """With sequential scans off, a statement the index could not answer would still show one."""
    first = NOW.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    args = {"games_with": ["w1", "csr", "game.finished", first.timestamp(), (first + timedelta(days=9)).timestamp()],
            "message_changes_by_ref": ["/gs", "m1", "game-1"], "message_records_by_ref": ["/gs", "m1", "game-1"],
            "messages_with_ref": ["game-1"], "fide_list_applied": ["2026-12"]}[name]
    conn = await asyncpg.connect(database_url)
    try:
        await _history(conn, 200, first)
        await conn.execute("ANALYZE rating_changes")
        await conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN {QUERIES[name]}", *args))
        month = f"rating_changes_{first:%Y_%m}"
        assert f"{month}_cause_day" in plan and "Seq Scan" not in plan, plan
        if name == "games_with":  # the other sides: found by day and ref, the rows of both players of game 1
            found = await conn.fetch(QUERIES[name], *args)
            assert {(r["player_id"], r["cause_id"]) for r in found} >= {("w1", "m1"), ("b1", "m1")}
    finally:
        await conn.close()


async def test_migrating_converts_the_months_and_keeps_the_old_historys_index(postgres):
    url = await empty_database(postgres)
    await schema_before(url, 12)
    conn = await asyncpg.connect(url)
    try:
        await conn.executemany(INSERT, [
            (f"old{g}", "w1", g + 1, f"old{g}", f"old-game-{g}", NOW - timedelta(days=400 - g)) for g in range(3)])
    finally:
        await conn.close()
    await schema_before(url, 14)  # 0012 made the old history its first partition
    conn = await asyncpg.connect(url)
    try:  # months made by 0012's function, with their index by ref
        await conn.execute("SELECT rating_changes_ensure_months($1, $2)", NOW + timedelta(days=40),
                           NOW + timedelta(days=70))
    finally:
        await conn.close()
    assert await migrate(url) == migrations_from(14)
    conn = await asyncpg.connect(url)
    try:
        indexes = await history_indexes(conn)
        before = next(m for m in indexes if m.startswith("rating_changes_before_"))
        assert f"{before}_unreferenced" in indexes[before]  # 0015's, the old history's too
        assert f"{before}_cause_ref" in indexes.pop(before)
        assert indexes and all(names == [f"{m}_cause_day", f"{m}_key_version", f"{m}_pkey", f"{m}_unreferenced"]
                               for m, names in indexes.items()), indexes  # and 0015's index
        assert await conn.fetchval(QUERIES["messages_with_ref"], "old-game-1") is not None
        # A month made from now on has the same three.
        await conn.execute("SELECT rating_changes_add_month('2031-05-01')")
        assert (await history_indexes(conn))["rating_changes_2031_05"] == [
            "rating_changes_2031_05_cause_day", "rating_changes_2031_05_key_version", "rating_changes_2031_05_pkey",
            "rating_changes_2031_05_unreferenced"]
    finally:
        await conn.close()


async def test_an_index_built_beforehand_is_kept_and_a_failed_one_stops_the_migration(postgres):
    """docs/operations.md "Migrating (0014)": each month's index built CONCURRENTLY before migrating."""
    for good in (True, False):
        url = await empty_database(postgres)
        await schema_before(url, 14)
        month = f"rating_changes_{NOW:%Y_%m}"
        conn = await asyncpg.connect(url)
        try:
            await _history(conn, 30, NOW.replace(day=1, hour=0))
            await conn.execute("CREATE FUNCTION change_day(changed_at timestamptz) RETURNS date LANGUAGE sql "
                               "IMMUTABLE PARALLEL SAFE RETURN (changed_at AT TIME ZONE 'UTC')::date")
            on = "(change_day(changed_at), cause_ref) WHERE cause_ref IS NOT NULL" if good else "(cause_id)"
            with contextlib.suppress(asyncpg.UniqueViolationError):  # a unique build on duplicates fails
                await conn.execute(f"CREATE {'' if good else 'UNIQUE '}INDEX CONCURRENTLY {month}_cause_day "
                                   f"ON {month} {on}")
            oid = await conn.fetchval(f"SELECT '{month}_cause_day'::regclass::oid")
        finally:
            await conn.close()
        if good:
            assert await migrate(url) == migrations_from(14)
            conn = await asyncpg.connect(url)
            try:
                assert await conn.fetchval(f"SELECT '{month}_cause_day'::regclass::oid") == oid  # not built again
                assert f"{month}_cause_ref" not in (await history_indexes(conn))[month]
            finally:
                await conn.close()
        else:
            with pytest.raises(MigrationError, match="DROP INDEX it, then migrate"):
                await migrate(url)
            conn = await asyncpg.connect(url)
            try:
                assert f"{month}_cause_ref" in (await history_indexes(conn))[month]  # nothing dropped
            finally:
                await conn.close()
