"""deploy/postgres/read-only-role.sql against a real PostgreSQL, in the order Compose runs it.

psql runs the file in an empty database (PostgreSQL's first start), twice (it must be idempotent); then the
migrations run as the tables' owner, as the `migrate` service does. The role must then read every table and
view the migrations made (the default privileges, not a grant of the moment), write nothing, create
nothing, and `rating-worker serve` must work with it alone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from tests.deploy.paths import READ_ONLY_ROLE_SQL
from worker.dev import databases
from worker.dev.api import ApiServer
from worker.store.migrate import migrate

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

def psql() -> str:
    """Debian's psql, or the one beside the embedded server; the test skips without either."""
    if found := shutil.which("psql"):
        return found
    from worker.dev.postgres import _pg_bin_dir

    try:
        embedded = _pg_bin_dir() / "psql"
    except Exception:  # noqa: BLE001 - no embedded server either
        embedded = None
    if embedded is None or not embedded.is_file():
        pytest.skip("psql is not installed (apt-get install postgresql-client) and the embedded server has none")
    return str(embedded)


def as_role(url: str, role: str, password: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=f"{role}:{password}@{host}"))


def run_role_sql(url: str, **variables: str) -> subprocess.CompletedProcess:
    args = [psql(), url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(READ_ONLY_ROLE_SQL)]
    for name, value in variables.items():
        args += ["-v", f"{name}={value}"]
    env = {k: v for k, v in os.environ.items() if k != "RATING_READER_PASSWORD"}
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
async def reader_db(postgres):
    """(the owner's URL, the reader's name) of an empty database; the role and the database dropped after."""
    name = f"rw_role_{os.getpid()}"
    reader = f"rw_reader_{os.getpid()}"  # roles are the server's: not the shipped name, in case it is shared

    async def drop_role() -> None:
        conn = await asyncpg.connect(postgres.url)
        try:
            await conn.execute(f'DROP ROLE IF EXISTS "{reader}"')
        finally:
            await conn.close()

    await drop_role()
    url = await databases.new_database(postgres.url, name)
    yield url, reader
    await databases.drop_database(postgres.url, name, force=True)  # its grants and default privileges with it
    await drop_role()


async def test_the_role_reads_every_table_the_migrations_make_and_writes_nothing(reader_db, tmp_path):
    owner_url, reader = reader_db
    for _ in range(2):  # Compose's init runs it once; an operator may run it again
        r = run_role_sql(owner_url, reader=reader, reader_password="p@ss:w/rd")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "p@ss" not in r.stdout + r.stderr
    await migrate(owner_url)  # after the role, as the `migrate` service does: default privileges at work
    reader_url = as_role(owner_url, reader, "p%40ss%3Aw%2Frd")

    conn = await asyncpg.connect(reader_url)
    try:
        # pg_class lists every relation (information_schema only those the role may already use)
        relations = [r["name"] for r in await conn.fetch(
            "SELECT quote_ident(c.relname) AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm', 'p') ORDER BY 1")]
        assert {"players", "ratings", "rating_changes", "schema_migrations", "leaderboard"} <= set(relations)
        for relation in relations:
            await conn.fetch(f"SELECT * FROM {relation} LIMIT 1")  # raises InsufficientPrivilegeError if not
        assert await conn.fetchval("SHOW default_transaction_read_only") == "on"
        # even a session that turns read-only off may not write: the role has SELECT only
        await conn.execute("SET default_transaction_read_only = off")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("INSERT INTO players (player_id) VALUES ('x')")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("DELETE FROM processed_messages")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("CREATE TABLE public.mine (x int)")
    finally:
        await conn.close()

    # the API with that role alone: ready (it reads schema_migrations), and its reads answer
    with ApiServer(reader_url, tmp_path / "api.log") as api:
        assert get(api.url + "/readyz") == (200, {"status": "ready"})
        status, board = get(api.url + "/v1/leaderboards/csr/blitz")
        assert status == 200 and board["items"] == []
        status, problem = get(api.url + "/v1/players/nobody")
        assert status == 404, problem


async def test_without_the_script_the_role_reads_nothing(reader_db):
    """The check above can fail: a role with LOGIN alone is refused the tables."""
    owner_url, reader = reader_db
    await migrate(owner_url)
    conn = await asyncpg.connect(owner_url)
    try:
        await conn.execute(f"CREATE ROLE \"{reader}\" LOGIN PASSWORD 'x'")
    finally:
        await conn.close()
    conn = await asyncpg.connect(as_role(owner_url, reader, "x"))
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetch("SELECT * FROM ratings LIMIT 1")
    finally:
        await conn.close()
