"""The history by month (migration 0012, worker.store.months, `rating-worker history`) on a real PostgreSQL.

- A player's history across a month boundary: versions without gaps, the read API's history route, fair
  play's 30-day refund reaching into the month before, and the same states as the in-memory store.
- Months are created as rows need them: an old history (backfill, imports), a change dated years ahead.
- Migrating an existing database: the table becomes a partition; counts and histories unchanged.
- The command: list, archive to a file (its rows compared), detach, drop, and its refusals.
"""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import urllib.request
from datetime import UTC, datetime, timedelta

import asyncpg
import orjson

from tests.integration.harness import empty_database, message_key_function, migrations_from, schema_before
from worker.commands.backfill import backfill
from worker.contract.decode import decode
from worker.dev.api import ApiServer
from worker.dev.streams import TCS, game_event
from worker.engine import apply_batch
from worker.ratings.state import StateKey
from worker.store.memory import MemoryStore
from worker.store.migrate import migrate
from worker.store.postgres import PostgresStore, history_payloads

BOUNDARY = datetime(2026, 11, 1, tzinfo=UTC)  # between the months 2026-10 and 2026-11
CHEATED = (9, 15)  # the games V loses to X: 45 minutes before the boundary, and 45 after


def game(i: int, white: str, black: str, result: str, at: datetime, source: str = "/test/months") -> bytes:
    return orjson.dumps(game_event(i, white, black, result, at, TCS[2], source))  # blitz


def closure(player: str, at: datetime) -> bytes:
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return orjson.dumps({"specversion": "1.0", "id": f"close-{player}", "source": "/test/months",
                         "type": "account.closed", "time": stamp,
                         "data": {"player_id": player, "reason": "fair_play", "closed_at": stamp}})


def boundary_stream() -> list[bytes]:
    """V plays others, and loses to the cheater X on both sides of the boundary (games 9 and 15: by then his
    losses are small, below fair play's cap of 150 together); X is then closed for fair play: the refund
    reaches back into October."""
    start = BOUNDARY - timedelta(hours=3)
    lines = []
    for i in range(24):
        at = start + timedelta(minutes=15 * i)
        if i in CHEATED:
            lines.append(game(i, "X", "V", "1-0", at))
        else:
            lines.append(game(i, "V", f"o{i % 4}", ["1-0", "0-1", "1/2-1/2"][i % 3], at))
    lines.append(closure("X", start + timedelta(hours=7)))
    return lines


async def apply_in_batches(store, lines: list[bytes], size: int = 5) -> None:
    messages = [decode(line) for line in lines]
    for i in range(0, len(messages), size):
        await apply_batch(store, messages[i:i + size])


async def fetch(url: str, sql: str, *args):
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def months(url: str) -> dict[str, int]:
    """Attached month -> its rows."""
    rows = await fetch(url, "SELECT tableoid::regclass::text AS m, count(*) AS n FROM rating_changes GROUP BY 1")
    return {r["m"]: r["n"] for r in rows}


async def test_a_players_history_across_a_month_boundary(database_url, tmp_path):
    lines = boundary_stream()
    store = await PostgresStore.connect(database_url)
    try:
        await apply_in_batches(store, lines)
        async with store.transaction() as tx:
            stored = await tx.load_states([StateKey(p, "csr", "blitz") for p in ("V", "X", "o1", "o2")])
    finally:
        await store.close()
    memory = MemoryStore()
    await apply_in_batches(memory, lines)
    async with memory.transaction() as tx:
        assert stored == await tx.load_states([StateKey(p, "csr", "blitz") for p in ("V", "X", "o1", "o2")])

    held = await months(database_url)
    assert held.get("rating_changes_2026_10") and held.get("rating_changes_2026_11"), held
    rows = await fetch(database_url, "SELECT version, delta, cause_type, changed_at, tableoid::regclass::text AS m "
                                     "FROM rating_changes WHERE player_id = 'V' ORDER BY version")
    assert [r["version"] for r in rows] == list(range(1, len(rows) + 1))
    assert {r["m"] for r in rows} == {"rating_changes_2026_10", "rating_changes_2026_11"}
    # Fair play: the refund is his losses to X in the 30 days before the closure, in both months.
    lost = [r for r in rows if r["changed_at"] in {BOUNDARY - timedelta(minutes=180 - 15 * i) for i in CHEATED}]
    assert len(lost) == 2 and lost[0]["changed_at"] < BOUNDARY <= lost[1]["changed_at"]
    assert all(r["delta"] < 0 for r in lost) and -sum(r["delta"] for r in lost) < 150  # under the cap: both count
    refund = [r for r in rows if r["cause_type"] == "account.closed"]
    assert len(refund) == 1 and abs(refund[0]["delta"] + sum(r["delta"] for r in lost)) < 1e-9

    # The read API's history route: every version, in order, as rating.changed published it.
    conn = await asyncpg.connect(database_url)
    try:
        published = [orjson.loads(p)["data"] for p in await history_payloads(conn)]
    finally:
        await conn.close()
    want = [r for r in published if r["player_id"] == "V"]
    with ApiServer(database_url, tmp_path / "serve.log") as api:
        with urllib.request.urlopen(f"{api.url}/v1/players/V/history/csr/blitz?limit=1000", timeout=10) as response:
            got = orjson.loads(response.read())["items"]
    assert got == want and [r["version"] for r in got] == list(range(1, len(rows) + 1))


async def test_an_old_history_and_a_change_dated_ahead_get_their_months(database_url, tmp_path):
    old = datetime(2015, 12, 31, 23, 0, tzinfo=UTC)
    path = tmp_path / "old.jsonl"
    path.write_bytes(b"\n".join(game(i, "A", "B", "1-0", old + timedelta(minutes=30 * i), "/old") for i in range(4))
                     + b"\n")
    await backfill(str(path), database_url, chunk=2, quiet=True, errors=io.StringIO())
    held = await months(database_url)
    assert held["rating_changes_2015_12"] == 4 and held["rating_changes_2016_01"] == 4, held

    ahead = datetime(2031, 7, 4, tzinfo=UTC)  # a producer's clock years ahead
    store = await PostgresStore.connect(database_url)
    try:
        await apply_in_batches(store, [game(100, "A", "C", "0-1", ahead)])
        assert store.months.created == 1
    finally:
        await store.close()
    held = await months(database_url)
    assert held["rating_changes_2031_07"] == 2
    names = {r[0] for r in await fetch(database_url, "SELECT partition FROM rating_changes_months()")}
    assert "rating_changes_2031_06" not in names and "rating_changes_2016_02" not in names  # only months with rows
    rows = await fetch(database_url, "SELECT version FROM rating_changes WHERE player_id = 'A' ORDER BY version")
    assert [r[0] for r in rows] == [1, 2, 3, 4, 5]


HISTORY = ("SELECT id, event_id, player_id, system, category, version, rating, delta, changed_at, after_rating "
           "FROM rating_changes ORDER BY id")


async def test_migrating_an_existing_history_keeps_it_as_its_first_partition(postgres):
    for ahead in (False, True):
        url = await empty_database(postgres)
        await schema_before(url, 12)
        await fetch(url, message_key_function())
        store = await PostgresStore.connect(url)
        store.months = None  # the worker of before 0012, which had no months to make
        try:
            await apply_in_batches(store, [game(i, "A", "B", "1-0", datetime(2025, 3, 1, tzinfo=UTC)
                                                + timedelta(days=20 * i)) for i in range(10)])
            if ahead:  # a producer's clock ahead: past the next month boundary
                await apply_in_batches(store, [game(50, "A", "B", "0-1", datetime(2027, 3, 15, tzinfo=UTC))])
        finally:
            await store.close()
        before = await fetch(url, HISTORY)
        views = await fetch(url, "SELECT * FROM published_changes ORDER BY id")
        if not ahead:  # the command of the new version on the old schema: one line that says what to do
            old = history(url)
            assert old.returncode == 3 and "rating-worker migrate" in old.stderr and old.stderr.count("\n") == 1, old
        # Grants on the history follow it to the new parent: a role's, and PUBLIC's.
        await fetch(url, "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'history reader') "
                         "THEN CREATE ROLE \"history reader\"; END IF; END $$")
        await fetch(url, 'GRANT SELECT, UPDATE ON rating_changes TO "history reader"')
        await fetch(url, "GRANT SELECT ON rating_changes TO PUBLIC")
        assert await migrate(url) == migrations_from(12)
        grants = await fetch(url, "SELECT a.grantee = 0 AS public, a.privilege_type FROM pg_class AS c, "
                                  "aclexplode(c.relacl) AS a WHERE c.oid = 'rating_changes'::regclass "
                                  "AND a.grantee <> c.relowner AND (a.grantee = 0 OR "
                                  "pg_get_userbyid(a.grantee) = 'history reader') ORDER BY 1, 2")
        assert [tuple(g) for g in grants] == [(False, "SELECT"), (False, "UPDATE"), (True, "SELECT")]
        assert await fetch(url, HISTORY) == before and await fetch(url, "SELECT * FROM published_changes "
                                                                         "ORDER BY id") == views
        bound = "2027_04" if ahead else (datetime.now(UTC).replace(day=1) + timedelta(days=32)).strftime("%Y_%m")
        assert await months(url) == {f"rating_changes_before_{bound}": len(before)}
        # The worker goes on: the ids continue, a new month is made for a new change.
        store = await PostgresStore.connect(url)
        try:
            await apply_in_batches(store, [game(99, "A", "B", "1-0", datetime(2028, 1, 5, tzinfo=UTC))])
        finally:
            await store.close()
        after = await fetch(url, HISTORY)
        assert after[:len(before)] == before and after[-1]["id"] > before[-1]["id"]
        assert [r["version"] for r in after if r["player_id"] == "A"] == list(range(1, len(after) // 2 + 1))
        assert (await months(url))["rating_changes_2028_01"] == 2


def history(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "worker", "history", *args], capture_output=True, text=True,
                          env={**os.environ, "DATABASE_URL": url}, timeout=120)


def refused(result: subprocess.CompletedProcess, words: str) -> None:
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1 and words in result.stderr and "Traceback" not in result.stderr, result.stderr


async def test_the_history_command(database_url, tmp_path):
    now = datetime.now(UTC)
    this_month = now.strftime("%Y-%m")
    store = await PostgresStore.connect(database_url)
    try:
        await apply_in_batches(store, [game(i, "A", "B", "1-0", datetime(2026, 2, 3, tzinfo=UTC) + timedelta(hours=i))
                                       for i in range(6)] + [game(10, "A", "B", "0-1", now - timedelta(minutes=5))])
    finally:
        await store.close()
    listed = orjson.loads(history(database_url, "list", "--count", "--json").stdout)
    by_month = {m["month"]: m for m in listed}
    assert by_month["2026-02"]["rows"] == 12 and by_month["2026-02"]["state"] == "attached"
    assert by_month["2026-02"]["from"] == "2026-02-01" and by_month["2026-02"]["to"] == "2026-03-01"
    assert by_month[this_month]["rows"] == 2
    assert "2026-02" in history(database_url).stdout  # the list, as a table

    refused(history(database_url, "detach", this_month), "fair play")
    refused(history(database_url, "detach", "1999-01"), "no month")
    refused(history(database_url, "drop", "2026-02"), "detach it first")
    refused(history(database_url, "detach", "2026-02"), "not published")  # the worker's changes wait in the outbox
    bad = history("postgresql://127.0.0.1:1/nothing", "list")
    assert bad.returncode == 3 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr, bad.stderr
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("DELETE FROM outbox")  # the relay published them
        want = await conn.fetch("SELECT * FROM rating_changes_2026_02 ORDER BY id")
    finally:
        await conn.close()

    first = history(database_url, "archive", "2026-02", "--to", str(tmp_path / "attached.csv"))
    assert first.returncode == 0 and "12 rows" in first.stdout, first
    assert history(database_url, "detach", "2026-02").returncode == 0
    assert "rating_changes_2026_02" not in await months(database_url)
    refused(history(database_url, "drop", "2026-02"), "no archive made since it was detached")
    refused(history(database_url, "archive", "2026-02", "--to", str(tmp_path / "attached.csv")), "exists")
    archived = history(database_url, "archive", "2026-02", "--to", str(tmp_path / "month.csv.gz"), "--json")
    assert archived.returncode == 0 and orjson.loads(archived.stdout)["rows"] == 12
    listed = {m["month"]: m for m in orjson.loads(history(database_url, "--json").stdout)}
    assert listed["2026-02"]["state"] == "detached"
    assert (listed["2026-02"]["from"], listed["2026-02"]["to"]) == ("2026-02-01", "2026-03-01")
    assert listed["2026-02"]["archived_to"] == str(tmp_path / "month.csv.gz")

    # The archive loads back (COPY ... FORMAT csv, HEADER match) to the very rows.
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("CREATE TABLE loaded (LIKE rating_changes)")
        with gzip.open(tmp_path / "month.csv.gz", "rb") as f:
            await conn.copy_to_table("loaded", source=f, format="csv", header=True)
        assert await conn.fetch("SELECT * FROM loaded ORDER BY id") == want
    finally:
        await conn.close()

    dropped = history(database_url, "drop", "2026-02")
    assert dropped.returncode == 0, dropped
    assert "2026-02" not in {m["month"] for m in orjson.loads(history(database_url, "--json").stdout)}
    rows = await fetch(database_url, "SELECT version FROM rating_changes WHERE player_id = 'A'")
    assert [r[0] for r in rows] == [7]  # the rest of the history stays


async def test_a_month_locked_or_detached_under_the_worker_fails_the_batch_transiently(database_url):
    """The worker's batch is never failed for good by a month: a parent locked by someone else (a month being
    detached) gives up after the lock_timeout with a transient error, and a month detached after the store read
    the months too; the batch's next attempt writes (into a month made again, under a new name)."""
    from worker.pipeline.retry import is_transient

    store = await PostgresStore.connect(database_url)
    blocker = await asyncpg.connect(database_url)
    try:
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute("LOCK TABLE rating_changes IN SHARE UPDATE EXCLUSIVE MODE")
        try:
            await apply_in_batches(store, [game(1, "A", "B", "1-0", datetime(2024, 5, 1, tzinfo=UTC))])
            raise AssertionError("the month was made under another's lock")
        except asyncpg.LockNotAvailableError as exc:
            assert is_transient(exc)
        finally:
            await tx.rollback()
        await apply_in_batches(store, [game(1, "A", "B", "1-0", datetime(2024, 5, 1, tzinfo=UTC))])
        await blocker.execute("ALTER TABLE rating_changes DETACH PARTITION rating_changes_2024_05")
        try:  # the store still counts May 2024 among its months
            await apply_in_batches(store, [game(2, "A", "B", "1-0", datetime(2024, 5, 2, tzinfo=UTC))])
            raise AssertionError("a write into a detached month went through")
        except asyncpg.PostgresError as exc:
            assert is_transient(exc) and "not attached" in str(exc)
        await apply_in_batches(store, [game(2, "A", "B", "1-0", datetime(2024, 5, 2, tzinfo=UTC))])
    finally:
        await blocker.close()
        await store.close()
    assert (await months(database_url))["rating_changes_2024_05_2"] == 2
