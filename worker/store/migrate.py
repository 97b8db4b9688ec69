"""Schema migrations: `migrations/NNNN_name.sql`, applied in order, once, by whoever gets there first.

- Each pending file runs in its own transaction together with its row in `schema_migrations`
  (version, name, sha256 checksum): a failing migration leaves nothing behind.
- Idempotent: a second run applies nothing and returns [].
- Workers starting together are serialized by a session-level `pg_advisory_lock`; the second one
  waits, then finds nothing left to do.
- A database migrated by a newer worker (a recorded version above the newest file here) is refused
  with `SchemaTooNew`: an old worker must not write into a schema it does not know.
- A recorded migration whose file changed since is refused with `MigrationChecksumMismatch`: never
  edit a shipped migration, add the next one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources

import asyncpg

from worker.store.connection import connect
from worker.store.queries import QUERIES

# pg_advisory_lock key shared by every worker of every version: b"ratingmg" as a big-endian int64.
MIGRATION_LOCK_KEY = int.from_bytes(b"ratingmg", "big", signed=True)

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class MigrationError(RuntimeError):
    """The schema can not be brought to the version this code expects."""


class SchemaTooNew(MigrationError):
    """The database has migrations this code does not know: it was migrated by a newer worker."""


class SchemaOutOfDate(MigrationError):
    """The database lacks migrations this code needs (run `rating-worker migrate`)."""


class MigrationChecksumMismatch(MigrationError):
    """A migration recorded as applied differs from the file shipped with this code."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str  # "0001_initial"
    sql: str
    checksum: str  # sha256 hex of the file's bytes


def available_migrations() -> list[Migration]:
    """The migrations shipped with this code, by version."""
    folder = resources.files("worker.store") / "migrations"
    found: dict[int, Migration] = {}
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if not match:
            continue
        data = entry.read_bytes()
        version = int(match.group(1))
        if version in found:
            raise MigrationError(
                f"two migrations with version {version}: {found[version].name}, {entry.name}"
            )
        found[version] = Migration(
            version, entry.name.removesuffix(".sql"), data.decode("utf-8"), hashlib.sha256(data).hexdigest()
        )
    return [found[v] for v in sorted(found)]


def latest_version() -> int:
    """The newest schema version this code knows (0 if it ships no migration)."""
    migrations = available_migrations()
    return migrations[-1].version if migrations else 0


async def current_version(conn: asyncpg.Connection | asyncpg.Pool) -> int:
    """The newest migration applied to this database; 0 for an empty database."""
    if not await conn.fetchval(QUERIES["migrations_table_exists"]):
        return 0
    return int(await conn.fetchval(QUERIES["migrations_current"]))


async def check_schema(conn: asyncpg.Connection | asyncpg.Pool) -> int:
    """Refuse a database this code can not use as is; returns its version.

    For a worker started without `--migrate`: raises `SchemaOutOfDate` when migrations are pending,
    `SchemaTooNew` when the database is ahead of this code.
    """
    have, want = await current_version(conn), latest_version()
    if have > want:
        raise SchemaTooNew(_too_new_message(have, want))
    if have < want:
        raise SchemaOutOfDate(
            f"database schema is at version {have}, this worker needs {want}: "
            "run `rating-worker migrate` (or start the worker with --migrate)"
        )
    return have


async def migrate(conn_or_url: asyncpg.Connection | asyncpg.Pool | str) -> list[str]:
    """Apply the pending migrations in order; returns the names applied ([] when up to date)."""
    async with _connection(conn_or_url) as conn:
        await conn.execute(QUERIES["migrations_lock"], MIGRATION_LOCK_KEY)
        try:
            return await _migrate_locked(conn)
        finally:
            await conn.execute(QUERIES["migrations_unlock"], MIGRATION_LOCK_KEY)


async def _migrate_locked(conn: asyncpg.Connection) -> list[str]:
    await conn.execute(QUERIES["migrations_bootstrap"])
    applied = {r["version"]: r for r in await conn.fetch(QUERIES["migrations_applied"])}
    migrations = available_migrations()
    newest = migrations[-1].version if migrations else 0
    if applied and max(applied) > newest:
        raise SchemaTooNew(_too_new_message(max(applied), newest))
    for m in migrations:
        row = applied.get(m.version)
        if row is not None and row["checksum"] != m.checksum:
            raise MigrationChecksumMismatch(
                f"migration {m.name} was applied with checksum {row['checksum'][:12]}… but the file shipped "
                f"with this worker has {m.checksum[:12]}…: a shipped migration must never be edited, "
                "add a new one instead"
            )
    done: list[str] = []
    for m in migrations:
        if m.version in applied:
            continue
        async with conn.transaction():
            try:
                await conn.execute(m.sql)
            except asyncpg.PostgresError as exc:
                raise MigrationError(f"migration {m.name} failed: {exc.__class__.__name__}: {exc}") from exc
            await conn.execute(QUERIES["migrations_record"], m.version, m.name, m.checksum)
        done.append(m.name)
    return done


def _too_new_message(have: int, newest: int) -> str:
    return (
        f"database schema is at version {have}, newer than this worker knows (its newest migration is "
        f"{newest}): it was migrated by a newer rating-worker. Run that version (or newer), or restore "
        "a backup taken before the upgrade; this worker will not touch the database."
    )


@asynccontextmanager
async def _connection(
    conn_or_url: asyncpg.Connection | asyncpg.Pool | str,
) -> AsyncIterator[asyncpg.Connection]:
    if isinstance(conn_or_url, str):
        conn = await connect(conn_or_url)
        try:
            yield conn
        finally:
            await conn.close()
    elif isinstance(conn_or_url, asyncpg.Pool):
        # The advisory lock is per session: the whole run must stay on one connection.
        async with conn_or_url.acquire() as conn:
            yield conn
    else:
        yield conn_or_url
