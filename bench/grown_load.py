"""Loading bench/grown.py's rows into a migrated database as a platform's after N days (`./dev bench
lifecycle`): the indexes the migrations define are dropped, the rows COPYed in (binary, asyncpg), the
indexes built again from their own definitions, then VACUUM (FREEZE, ANALYZE) and a CHECKPOINT. Also the sizes
of tables and indexes, which the benchmark reports.

FREEZE: a settled platform's autovacuum has frozen its past pages long since (PostgreSQL 18 freezes
all-visible pages eagerly, a share in every vacuum). Left unfrozen, the build's 2,000,000 players' ratings
were frozen by the runs' own autovacuum of `ratings` (dead rows of the active players set it off): a
backlog of eight days, hundreds of thousands of pages read and written at once, measured as the worker's.

Indexes are read from the catalogue, not written here: whatever the migrations define (a partitioned
history included) is what is built. If the schema has `rating_changes_ensure_months(timestamptz,
timestamptz)` (history partitioned by month), the months of the rows are created before loading.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg

from bench.grown import CHANGE_COLUMNS, DAY, PROCESSED_COLUMNS, RATING_COLUMNS, Builder, Plan, player_name

TABLES = ("processed_messages", "rating_changes", "players", "ratings")
CHUNK = 50_000  # games a COPY
PLAYER_CHUNK = 200_000

# Sizes of the schema's tables (heap and TOAST) and indexes, each under its table; a partitioned one's
# partitions added up (and its partitions' own indexes by their name).
SIZES = """
SELECT coalesce(pg_partition_root(t.oid), t.oid)::regclass::text AS "table",
       coalesce(pg_partition_root(c.oid), c.oid)::regclass::text AS name,
       c.relkind IN ('i', 'I') AS is_index,
       sum(CASE WHEN c.relkind IN ('r', 'p') THEN pg_table_size(c.oid) ELSE pg_relation_size(c.oid) END)::int8 AS bytes
FROM pg_class AS c
JOIN pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_index AS i ON i.indexrelid = c.oid
JOIN pg_class AS t ON t.oid = coalesce(i.indrelid, c.oid)
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'i', 'I')
GROUP BY 1, 2, 3 ORDER BY 1, 3, 2
"""
# The whole size of a table (heap, TOAST and indexes), a partitioned one's partitions added up.
TOTAL_SIZE = """
SELECT pg_total_relation_size($1::regclass) + coalesce((SELECT sum(pg_total_relation_size(relid))::int8
                                                        FROM pg_partition_tree($1::regclass) WHERE relid <> $1::regclass), 0)
"""
# A table and its partitions (pg_partition_tree lists nothing for a table that is not partitioned).
RELATIONS = """
SELECT $1::regclass::text AS relid
UNION ALL (SELECT relid::text FROM pg_partition_tree($1::regclass) WHERE relid <> $1::regclass ORDER BY level)
"""


async def sizes(conn) -> dict[str, list[tuple[str, int]]]:
    """table -> [(the table or one of its indexes, bytes)], the table first, largest tables first."""
    found: dict[str, list[tuple[str, int]]] = {}
    for r in await conn.fetch(SIZES):
        found.setdefault(r["table"], []).append((r["name"], r["bytes"]))
    return dict(sorted(found.items(), key=lambda item: -sum(b for _, b in item[1])))


async def _indexes(conn, table: str) -> list[tuple[str, str]]:
    """(drop, create) statements of the unique constraints and other indexes of the table and of each of its
    partitions (a partition's own: one attached to the parent's index goes and comes back with it)."""
    found = []
    relations = [r["relid"] for r in await conn.fetch(RELATIONS, table)]
    for relation in relations:
        for r in await conn.fetch("SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint "
                                  "WHERE conrelid = $1::regclass AND contype IN ('p', 'u') AND conparentid = 0",
                                  relation):
            found.append((f'ALTER TABLE {relation} DROP CONSTRAINT "{r["conname"]}"',
                          f'ALTER TABLE {relation} ADD CONSTRAINT "{r["conname"]}" {r["def"]}'))
        for r in await conn.fetch(
                "SELECT indexrelid::regclass::text AS name, pg_get_indexdef(indexrelid) AS def FROM pg_index AS i "
                "WHERE indrelid = $1::regclass "
                "AND NOT EXISTS (SELECT 1 FROM pg_constraint AS c WHERE c.conindid = i.indexrelid) "
                "AND NOT EXISTS (SELECT 1 FROM pg_inherits AS h WHERE h.inhrelid = i.indexrelid)", relation):
            found.append((f"DROP INDEX {r['name']}", r["def"]))
    return found


def _eta(done: int, total: int, seconds: float) -> str:
    """Games done, and rows a second (3 a game: a processed id, two history rows)."""
    rate = done / seconds if seconds else 0.0
    left = (total - done) / rate if rate else 0.0
    return f"{done:,}/{total:,} ({3 * rate:,.0f} rows/s, ETA of the rows {left / 60:.0f} min)"


async def load(url: str, plan: Plan, say) -> None:
    """Write the plan's rows into the migrated, empty database at `url`, printing progress with `say`."""
    conns = [await asyncpg.connect(url) for _ in range(2)]
    main = conns[0]
    try:
        if await main.fetchval("SELECT to_regprocedure('rating_changes_ensure_months(timestamptz, timestamptz)')"):
            await main.execute("SELECT rating_changes_ensure_months(to_timestamp($1), to_timestamp($2))",
                               plan.start, plan.end + 31 * DAY)
            say("history months created (rating_changes_ensure_months)")
        indexes = {table: await _indexes(main, table) for table in TABLES}
        for table in TABLES:
            for drop, _ in indexes[table]:
                await main.execute(drop)
        builder = Builder(plan)
        started = last = time.perf_counter()
        loop = asyncio.get_running_loop()
        pending = loop.run_in_executor(None, builder.next_chunk, CHUNK)  # the next chunk is made while one loads
        while (chunk := await pending) is not None:
            pending = loop.run_in_executor(None, builder.next_chunk, CHUNK)
            await asyncio.gather(
                conns[0].copy_records_to_table("processed_messages", records=chunk.processed,
                                               columns=PROCESSED_COLUMNS),
                conns[1].copy_records_to_table("rating_changes", records=chunk.changes, columns=CHANGE_COLUMNS))
            if time.perf_counter() - last > 10 or builder.done == plan.games:
                last = time.perf_counter()
                say(f"games {_eta(builder.done, plan.games, last - started)}")
        await main.execute("SELECT setval(pg_get_serial_sequence('rating_changes', 'id'), $1)", builder.next_id - 1)
        say(f"{plan.games:,} processed ids and {builder.next_id - 1:,} history rows in "
            f"{time.perf_counter() - started:.0f} s; players and ratings")
        for first in range(0, plan.players, PLAYER_CHUNK):
            last_player = min(plan.players, first + PLAYER_CHUNK)
            await main.copy_records_to_table("players", records=[(player_name(i),) for i in range(first, last_player)],
                                             columns=("player_id",))
            await main.copy_records_to_table("ratings", records=list(builder.histories.rating_rows(first, last_player)),
                                             columns=RATING_COLUMNS)
        await main.execute("SET maintenance_work_mem = '1GB'")
        for table in TABLES:
            for _, create in indexes[table]:
                began = time.perf_counter()
                await main.execute(create)
                say(f"{create[:110]}: {time.perf_counter() - began:.0f} s")
        for table in TABLES:
            began = time.perf_counter()
            await main.execute(f"VACUUM (FREEZE, ANALYZE) {table}")
            say(f"VACUUM (FREEZE, ANALYZE) {table}: {time.perf_counter() - began:.0f} s")
        await main.execute("CHECKPOINT")
    finally:
        for conn in conns:
            await conn.close()
