"""A fresh database on a PostgreSQL server, the one way the tests and bench/ make one: empty, migrated, or
a copy of a template (a migrated one: the tests' per-test database), and dropped once done.

`server_url` names any database of the server (the maintenance connection); the new one has the same
server and credentials. Names are the callers' (unique per test or benchmark) and are quoted here.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import asyncpg

from worker.store.migrate import migrate

__all__ = ["database_url", "drop_database", "new_database"]


def database_url(server_url: str, name: str) -> str:
    """The URL of database `name` on the server of `server_url` (its other parts kept)."""
    return urlunsplit(urlsplit(server_url)._replace(path="/" + name))


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def new_database(server_url: str, name: str, *, template: str | None = None, migrated: bool = False,
                       file_copy: bool = False) -> str:
    """Create database `name` (dropped first if it exists) and return its URL: empty, or a copy of
    `template`; then brought to the schema when `migrated`.

    `file_copy`: copy the template by its files (STRATEGY FILE_COPY, PostgreSQL 15+) rather than through
    the WAL (the default since 15), which writes the whole copy to it: bench/ copies a million players
    that way, and starts each run right after the checkpoints FILE_COPY takes before and after."""
    conn = await asyncpg.connect(server_url)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {_quoted(name)}")
        copy = f" TEMPLATE {_quoted(template)}" if template else ""
        if template and file_copy and conn.get_server_version().major >= 15:
            copy += " STRATEGY FILE_COPY"
        await conn.execute(f"CREATE DATABASE {_quoted(name)}{copy}")
    finally:
        await conn.close()
    url = database_url(server_url, name)
    if migrated:
        await migrate(url)
    return url


async def drop_database(server_url: str, name: str, *, force: bool = False) -> None:
    """Drop database `name` if it exists; `force`: its connections are ended first (WITH (FORCE))."""
    conn = await asyncpg.connect(server_url)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {_quoted(name)}{' WITH (FORCE)' if force else ''}")
    finally:
        await conn.close()
