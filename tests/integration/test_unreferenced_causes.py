"""Each month's index of the causes without a ref (migration 0015) against a real PostgreSQL: the changes of
an import or a fair-play closure are found through it, not by reading every month; a message processed
before migration 0005 (no ref kept) is still found by a scan; migrating gives every month the index, keeps
one built beforehand and stops at a failed one.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from tests.integration.harness import empty_database, history_indexes, migrations_from, schema_before
from worker.store.migrate import MigrationError, migrate
from worker.store.queries import QUERIES
from worker.store.reads import OperatorReads

pytestmark = pytest.mark.timeout(120)
NOW = datetime.now(UTC)
FIRST = NOW.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
MONTH = f"rating_changes_{FIRST:%Y_%m}"
INSERT = ("INSERT INTO rating_changes (event_id, player_id, system, category, version, rating, delta, cause_type, "
          "cause_source, cause_id, cause_ref, changed_at) "
          "VALUES ($1, $2, 'csr', 'blitz', $3, 1500, 0, $4, $5, $6, $7, $8)")
PROCESSED = "INSERT INTO processed_messages (source, id, type, outcome, ref) VALUES ($1, $2, $3, 'applied', $4)"


async def _history(conn) -> None:
    """200 games (a ref each), then an import of every player of them (no ref), in this month; and two
    months more, empty."""
    await conn.execute("SELECT rating_changes_ensure_months($1, $2)", FIRST, FIRST + timedelta(days=70))
    rows = []
    for g in range(200):
        for side in ("w", "b"):
            rows.append((f"e{g}{side}", f"{side}{g % 50}", g // 50 + 1, "game.finished", "/gs", f"m{g}", f"game-{g}",
                         FIRST + timedelta(minutes=g)))
    for p in range(50):
        for side in ("w", "b"):
            rows.append((f"i{p}{side}", f"{side}{p}", 5, "rating.imported", "/import", f"imp-{side}{p}", None,
                         FIRST + timedelta(days=1)))
    await conn.executemany(INSERT, rows)


@pytest.mark.parametrize("name", ["message_changes_without_ref", "message_records_without_ref"])
async def test_a_message_without_a_ref_is_found_through_the_months_index(database_url, name):
    """With sequential scans off, a statement the index could not answer would still show one."""
    conn = await asyncpg.connect(database_url)
    try:
        await _history(conn)
        await conn.execute("ANALYZE rating_changes")
        await conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN {QUERIES[name]}", "/import", "imp-w7"))
        assert f"{MONTH}_unreferenced" in plan and "Seq Scan" not in plan, plan
        assert [r["player_id"] for r in await conn.fetch(QUERIES[name], "/import", "imp-w7")] == ["w7"]
    finally:
        await conn.close()


async def test_each_kind_of_message_finds_its_changes(database_url):
    """A game by its ref, an import by its source and id, and a game processed before migration 0005 (its
    processed row has no ref) by a scan: the same rows as the history holds for each."""
    conn = await asyncpg.connect(database_url)
    try:
        await _history(conn)
        await conn.executemany(PROCESSED, [("/gs", "m3", "game.finished", "game-3"),
                                           ("/import", "imp-b9", "rating.imported", None),
                                           ("/gs", "m4", "game.finished", None)])  # as before 0005
        reads = OperatorReads(conn)
        for source, message_id, players in (("/gs", "m3", ["b3", "w3"]), ("/import", "imp-b9", ["b9"]),
                                            ("/gs", "m4", ["b4", "w4"])):
            row = await reads.message_processed(source, message_id)
            for found in (await reads.message_changes(source, message_id, row["ref"], row["type"]),
                          await reads.message_records(source, message_id, row["ref"], row["type"])):
                assert [r["player_id"] for r in found] == players, (source, message_id)
    finally:
        await conn.close()


async def test_migrating_gives_every_month_the_index(postgres):
    url = await empty_database(postgres)
    await schema_before(url, 15)
    conn = await asyncpg.connect(url)
    try:
        await _history(conn)
    finally:
        await conn.close()
    assert await migrate(url) == migrations_from(15)
    conn = await asyncpg.connect(url)
    try:
        indexes = await history_indexes(conn)
        assert len(indexes) >= 3 and all(f"{m}_unreferenced" in names for m, names in indexes.items()), indexes
        assert [r["player_id"] for r in await conn.fetch(QUERIES["message_changes_without_ref"], "/import", "imp-w7")
                ] == ["w7"]
        # A month made from now on has it too.
        await conn.execute("SELECT rating_changes_add_month('2031-05-01')")
        assert "rating_changes_2031_05_unreferenced" in (await history_indexes(conn))["rating_changes_2031_05"]
    finally:
        await conn.close()


async def test_an_index_built_beforehand_is_kept_and_a_failed_one_stops_the_migration(postgres):
    """docs/operations.md "Migrating (0015)": each month's index built CONCURRENTLY before migrating."""
    for good in (True, False):
        url = await empty_database(postgres)
        await schema_before(url, 15)
        conn = await asyncpg.connect(url)
        try:
            await _history(conn)
            on = "(cause_source, cause_id) WHERE cause_ref IS NULL" if good else "(player_id)"
            with contextlib.suppress(asyncpg.UniqueViolationError):  # a unique build on duplicates fails
                await conn.execute(f"CREATE {'' if good else 'UNIQUE '}INDEX CONCURRENTLY {MONTH}_unreferenced "
                                   f"ON {MONTH} {on}")
            oid = await conn.fetchval(f"SELECT '{MONTH}_unreferenced'::regclass::oid")
        finally:
            await conn.close()
        if good:
            assert await migrate(url) == migrations_from(15)
            conn = await asyncpg.connect(url)
            try:
                assert await conn.fetchval(f"SELECT '{MONTH}_unreferenced'::regclass::oid") == oid  # not built again
            finally:
                await conn.close()
        else:
            with pytest.raises(MigrationError, match="DROP INDEX it, then migrate"):
                await migrate(url)
            conn = await asyncpg.connect(url)
            try:  # nothing built: not this month's, nor any other's
                assert not any(i.endswith("_unreferenced") and not i.startswith(MONTH)
                               for names in (await history_indexes(conn)).values() for i in names)
            finally:
                await conn.close()
