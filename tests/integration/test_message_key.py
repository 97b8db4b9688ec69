"""Processed ids unique by message_key(source, id) (migration 0013) against a real PostgreSQL: the digest is
the one the migration documents, pairs that read alike when joined stay apart, texts with backslashes and
non-ASCII survive it, and every statement that finds a processed id by (source, id) is answered by the
digest's index (the planner matches it only when the statement's expression is the index's own).
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid

import asyncpg
import orjson
import pytest

from tests.integration.harness import empty_database, message_key_function, migrations_from, schema_before
from worker.store.migrate import MigrationError, migrate
from worker.store.queries import QUERIES

pytestmark = pytest.mark.timeout(60)

# (source, id) pairs that a careless digest would mix up: the same bytes joined, escapes, non-ASCII.
PAIRS = [("/a", "bc"), ("/ab", "c"), ("/a\\", "bc"), ("/a", "\\bc"), ("/s\\000", "id\\\\x"), ("/é", "ü-1"),
         ("/gs/1", "0b1f6c1e-0000-4000-8000-000000000001")]


def documented_key(source: str, id_: str) -> uuid.UUID:
    """The first 16 bytes of SHA-256 over source, a zero byte, id (UTF-8), as migration 0013 says."""
    return uuid.UUID(bytes=hashlib.sha256(source.encode() + b"\0" + id_.encode()).digest()[:16])


async def _store(conn, pairs) -> None:
    await conn.executemany("INSERT INTO processed_messages (source, id, type, outcome) "
                           "VALUES ($1, $2, 'game.finished', 'applied')", pairs)


async def test_the_key_is_the_documented_digest_and_keeps_every_pair_apart(database_url):
    conn = await asyncpg.connect(database_url)
    try:
        for source, id_ in PAIRS:
            assert await conn.fetchval("SELECT message_key($1, $2)", source, id_) == documented_key(source, id_)
        await _store(conn, PAIRS)  # the unique index refuses none of them
        for source, id_ in PAIRS:
            found = await conn.fetch(QUERIES["processed"], orjson.dumps([[source, id_], [source + "x", id_]]).decode())
            assert [tuple(r) for r in found] == [(source, id_)]
            assert (await conn.fetchrow(QUERIES["message_processed"], source, id_))["outcome"] == "applied"
        with pytest.raises(asyncpg.UniqueViolationError):
            await _store(conn, PAIRS[:1])
    finally:
        await conn.close()


@pytest.mark.parametrize("name", ["processed", "message_processed", "player_unrated", "save"])
async def test_statements_that_find_a_processed_id_use_the_digest_index(database_url, name):
    """With sequential scans off, a statement whose expression is not the index's would still show one."""
    args = {"processed": ['[["/gs/1", "x"]]'], "message_processed": ["/gs/1", "x"],
            "player_unrated": ["p1", 10, None], "save": ["[]", "[]", True]}[name]
    conn = await asyncpg.connect(database_url)
    try:
        await _store(conn, [(f"/gs/{i % 8}", str(uuid.uuid4())) for i in range(2000)])
        await conn.execute("ANALYZE processed_messages")
        await conn.execute(QUERIES["create_staging"])
        await conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN {QUERIES[name]}", *args))
        part = plan if name != "save" else plan[plan.index("Update on processed_messages"):]  # its `repeats`
        assert "processed_messages_key" in part, plan
        assert "Seq Scan on processed_messages" not in plan, plan
    finally:
        await conn.close()


async def _old_database(postgres) -> str:
    """A database of the worker before 0013 (primary key (source, id)) holding PAIRS as processed."""
    url = await empty_database(postgres)
    await schema_before(url, 13)
    conn = await asyncpg.connect(url)
    try:
        await _store(conn, PAIRS)
    finally:
        await conn.close()
    return url


async def _indexes(url: str) -> list[tuple[str, bool]]:
    conn = await asyncpg.connect(url)
    try:
        return [tuple(r) for r in await conn.fetch(
            "SELECT indexrelid::regclass::text, indisunique FROM pg_index "
            "WHERE indrelid = 'processed_messages'::regclass ORDER BY 1")]
    finally:
        await conn.close()


async def test_migrating_keeps_every_processed_id_found(postgres):
    url = await _old_database(postgres)
    assert await migrate(url) == migrations_from(13)
    assert await _indexes(url) == [("processed_messages_expiry", False), ("processed_messages_key", True)]
    conn = await asyncpg.connect(url)
    try:
        found = await conn.fetch(QUERIES["processed"], orjson.dumps(PAIRS).decode())
        assert sorted(tuple(r) for r in found) == sorted(PAIRS)
    finally:
        await conn.close()


async def test_an_index_built_beforehand_is_used_and_a_failed_one_stops_the_migration(postgres):
    """The operator's way to a migration that waits for no index build (docs/operations.md): function and
    index made CONCURRENTLY while the workers run. A build that failed leaves an invalid index, which must
    not stand in for the primary key."""
    prebuild = f"{message_key_function()}; CREATE UNIQUE INDEX CONCURRENTLY processed_messages_key " \
               "ON processed_messages (message_key(source, id))"
    url = await _old_database(postgres)
    conn = await asyncpg.connect(url)
    try:
        for statement in prebuild.split("; "):
            await conn.execute(statement)
        oid = await conn.fetchval("SELECT 'processed_messages_key'::regclass::oid")
    finally:
        await conn.close()
    assert await migrate(url) == migrations_from(13)
    assert await _indexes(url) == [("processed_messages_expiry", False), ("processed_messages_key", True)]
    conn = await asyncpg.connect(url)
    try:
        assert await conn.fetchval("SELECT 'processed_messages_key'::regclass::oid") == oid  # not built again
    finally:
        await conn.close()

    # A unique build CONCURRENTLY that fails (here on duplicates) leaves an index of that name, invalid; a
    # plain index of that name is not unique. Either way the migration stops, and the primary key stays.
    for build in ("CREATE UNIQUE INDEX CONCURRENTLY processed_messages_key ON processed_messages (type)",
                  "CREATE INDEX processed_messages_key ON processed_messages (message_key(source, id))"):
        url = await _old_database(postgres)
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(prebuild.split("; ")[0])
            with contextlib.suppress(asyncpg.UniqueViolationError):
                await conn.execute(build)
        finally:
            await conn.close()
        with pytest.raises(MigrationError, match="DROP INDEX processed_messages_key, then migrate"):
            await migrate(url)
        assert ("processed_messages_pkey", True) in await _indexes(url)
