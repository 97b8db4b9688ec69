"""`rating-worker backfill` against a real PostgreSQL: the worker's own rows, a crash resumed without
applying anything twice, the databases and files it refuses, and the worker going live after it.

The reference for "the worker's rows" is the worker's store itself (replay --database-url: the same engine
through PostgresStore, one transaction per batch); the tables are compared row by row, all of them."""

from __future__ import annotations

import asyncio
import io
import signal
import subprocess
import sys
import time

import asyncpg
import pytest

from tests.integration.harness import new_database, produce, wait_processed, worker_config
from tests.integration.test_worker_end_to_end import running_worker
from worker.commands.backfill import BackfillError, Interrupted, backfill
from worker.commands.replay import replay
from worker.dev.streams import every_type, games
from worker.store.postgres import PostgresStore, history_payloads

# Every table a batch writes, as comparable rows: what only the wall clock or the order of writes decides
# (ids, created_at, processed_at, updated_at) left out.
TABLES = {
    "players": "SELECT player_id, closed_at, closed_reason FROM players ORDER BY 1",
    "ratings": "SELECT player_id, system, category, rating, rd, volatility, games, peak, last_at, version, "
               "extra::text FROM ratings ORDER BY 1, 2, 3",
    "rating_changes": "SELECT event_id, player_id, system, category, version, rating, delta, cause_type, "
                      "cause_source, cause_id, cause_ref, changed_at, payload, before_rating, before_rd, "
                      "before_volatility, after_rating, after_rd, after_volatility, provisional, floor, games, "
                      "cause_time, inactive, parameters FROM rating_changes ORDER BY id",
    "processed_messages": "SELECT source, id, type, outcome, reason, ref, duplicates FROM processed_messages "
                          "ORDER BY 1, 2",
    "unrated_players": "SELECT player_id, source, id, system, reason, message_at FROM unrated_players "
                       "ORDER BY 1, 2, 3",
}


async def tables(url: str) -> dict[str, list[tuple]]:
    conn = await asyncpg.connect(url)
    try:
        return {name: [tuple(r) for r in await conn.fetch(sql)] for name, sql in TABLES.items()}
    finally:
        await conn.close()


def history() -> list[bytes]:
    """Every message type, a fair-play closure inside its window, bad lines, and duplicates: at once, a few
    hundred lines later, and one thousands of lines later (further than a chunk: the database answers)."""
    values = every_type()
    return values[:10] + [values[3], values[5]] + values[10:500] + [values[7]] + values[500:] + [values[4], values[9]]


def write(path, values: list[bytes]) -> str:
    path.write_bytes(b"".join(v + b"\n" for v in values))
    return str(path)


async def through_the_worker_store(postgres, template_db, values: list[bytes]) -> str:
    url = await new_database(postgres, template_db)
    store = await PostgresStore.connect(url)
    try:
        await replay(values, io.BytesIO(), store=store, errors=io.StringIO())
    finally:
        await store.close()
    return url


async def test_a_backfill_writes_the_rows_the_worker_writes(postgres, template_db, tmp_path):
    values = history()
    path = write(tmp_path / "history.jsonl", values)
    expected = await through_the_worker_store(postgres, template_db, values)
    url = await new_database(postgres, template_db)
    tally = await backfill(path, url, chunk=1000, quiet=True, errors=io.StringIO())
    assert tally.bad == 2 and tally.outcomes["duplicate"] == 5
    got, want = await tables(url), await tables(expected)
    for name in TABLES:
        assert len(got[name]) == len(want[name]), name
        assert got[name] == want[name], name
    assert sum(r[6] for r in got["processed_messages"]) == 5  # each repeat counted on its message's row
    conn = await asyncpg.connect(url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM outbox") == 0  # a history is not published
        run = await conn.fetchrow("SELECT * FROM backfill_progress")
        assert run["finished_at"] is not None and run["lines_done"] == len(values)
        assert run["processed"] == len(got["processed_messages"]) and run["changes"] == len(got["rating_changes"])
        # The bytes the relay would publish are the worker's, to the byte.
        expected_conn = await asyncpg.connect(expected)
        try:
            assert await history_payloads(conn) == await history_payloads(expected_conn)
        finally:
            await expected_conn.close()
    finally:
        await conn.close()


async def test_publish_puts_the_history_in_the_outbox(postgres, template_db, tmp_path):
    path = write(tmp_path / "h.jsonl", games(300, players=20, seed=4))
    url = await new_database(postgres, template_db)
    tally = await backfill(path, url, chunk=1000, publish=True, quiet=True)
    conn = await asyncpg.connect(url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM outbox") == tally.changes == 600
        assert await conn.fetchval("SELECT count(*) FROM outbox o JOIN rating_changes c ON c.id = o.change_id") == 600
    finally:
        await conn.close()


async def test_a_run_stopped_part_way_goes_on_after_its_last_chunk(postgres, template_db, tmp_path):
    values = history()
    path = write(tmp_path / "history.jsonl", values)
    expected = await through_the_worker_store(postgres, template_db, values)
    url = await new_database(postgres, template_db)
    with pytest.raises(Interrupted):
        await backfill(path, url, chunk=1000, quiet=True, stop_after=2)
    conn = await asyncpg.connect(url)
    try:
        done = await conn.fetchrow("SELECT lines_done, finished_at FROM backfill_progress")
    finally:
        await conn.close()
    assert 0 < done["lines_done"] < len(values) and done["finished_at"] is None
    tally = await backfill(path, url, chunk=1000, quiet=True)
    assert tally.read == len(values) - done["lines_done"]
    got = await tables(url)
    assert got == await tables(expected)
    conn = await asyncpg.connect(url)
    try:  # the file's row counts the rows of both runs
        run = await conn.fetchrow("SELECT processed, changes, finished_at FROM backfill_progress")
    finally:
        await conn.close()
    assert (run["processed"], run["changes"]) == (len(got["processed_messages"]), len(got["rating_changes"]))


async def test_a_killed_backfill_resumes_without_applying_anything_twice(postgres, template_db, tmp_path):
    values = games(30_000, players=2_000, seed=21)
    path = write(tmp_path / "games.jsonl", values)
    url = await new_database(postgres, template_db)
    command = [sys.executable, "-m", "worker", "backfill", path, "--database-url", url, "--chunk", "2000"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conn = await asyncpg.connect(url)
    try:
        deadline = time.monotonic() + 120
        while (await conn.fetchval("SELECT coalesce(max(lines_done), 0) FROM backfill_progress")) < 4000:
            assert proc.poll() is None and time.monotonic() < deadline, "the backfill ended before it was killed"
            await asyncio.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        killed_at = await conn.fetchval("SELECT lines_done FROM backfill_progress")
        assert killed_at < len(values), "the kill came too late to test anything"
    finally:
        await conn.close()
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"backfill games.jsonl: {len(values) - killed_at:,} lines" in resumed.stdout
    expected = await through_the_worker_store(postgres, template_db, values)
    assert await tables(url) == await tables(expected)


async def test_it_refuses_what_it_cannot_backfill_into(postgres, template_db, tmp_path):
    values = games(6000, players=50, seed=5)
    path = write(tmp_path / "one.jsonl", values)
    # a database a worker wrote to
    worked = await through_the_worker_store(postgres, template_db, values[:10])
    with pytest.raises(BackfillError, match="no backfill wrote"):
        await backfill(path, worked, quiet=True)
    # a file changed before its backfill resumed: in its first MiB (another file, by the name of the first),
    # or later, in what was backfilled (4,000 lines, more than a MiB)
    url = await new_database(postgres, template_db)
    with pytest.raises(Interrupted):
        await backfill(path, url, chunk=1000, quiet=True, stop_after=4)
    conn = await asyncpg.connect(url)
    try:
        assert await conn.fetchval("SELECT bytes_done FROM backfill_progress") > (1 << 20)
    finally:
        await conn.close()
    write(tmp_path / "one.jsonl", values[:500] + [values[501], values[500]] + values[502:])
    with pytest.raises(BackfillError, match="not the file whose backfill began"):
        await backfill(path, url, chunk=1000, quiet=True)
    write(tmp_path / "one.jsonl", values[:3900] + [values[3901], values[3900]] + values[3902:])
    with pytest.raises(BackfillError, match="not those backfilled before"):
        await backfill(path, url, chunk=1000, quiet=True)
    # another file while the first is part way
    other = write(tmp_path / "two.jsonl", games(100, players=50, seed=6, source="/two"))
    with pytest.raises(BackfillError, match="one.jsonl is backfilled only part way"):
        await backfill(other, url, quiet=True)
    # the first file (restored) finished, then backfilled again: nothing to do; then the next file
    write(tmp_path / "one.jsonl", values)
    assert (await backfill(path, url, quiet=True)).read == 6000 - 4000
    assert (await backfill(path, url, quiet=True)).read == 0
    grown = values + games(6010, players=50, seed=5)[6000:]
    write(tmp_path / "one.jsonl", grown)
    with pytest.raises(BackfillError, match="backfilled to its end"):
        await backfill(path, url, quiet=True)
    write(tmp_path / "one.jsonl", values[:5000] + [values[5001], values[5000]] + values[5002:])  # same size and MiB
    with pytest.raises(BackfillError, match="backfilled to its end"):
        await backfill(path, url, quiet=True)
    # renamed: the same file (by its first MiB); another file under the name of one done: refused too
    with pytest.raises(BackfillError, match="backfilled to its end"):
        await backfill(write(tmp_path / "renamed.jsonl", grown), url, quiet=True)
    with pytest.raises(BackfillError, match="has the name of one.jsonl"):
        await backfill(write(tmp_path / "one.jsonl", games(50, players=5, seed=9, source="/three")), url, quiet=True)
    two = games(100, players=50, seed=6, source="/two")
    assert (await backfill(other, url, quiet=True)).outcomes["applied"] == 100
    # a file of less than a MiB that grew is another file by its first MiB: it begins as one done, refused
    with pytest.raises(BackfillError, match="begins as it"):
        await backfill(write(tmp_path / "two-grown.jsonl", two + games(110, 50, 6, "/two")[100:]), url, quiet=True)


async def test_a_run_goes_on_as_it_began_with_or_without_publish(postgres, template_db, tmp_path):
    path = write(tmp_path / "h.jsonl", games(3000, players=30, seed=4))
    url = await new_database(postgres, template_db)
    with pytest.raises(Interrupted):
        await backfill(path, url, chunk=1000, publish=True, quiet=True, stop_after=1)
    with pytest.raises(BackfillError, match="began with --publish"):
        await backfill(path, url, chunk=1000, quiet=True)
    tally = await backfill(path, url, chunk=1000, publish=True, quiet=True)
    conn = await asyncpg.connect(url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM outbox") == await conn.fetchval(
            "SELECT count(*) FROM rating_changes") == 6000 and tally.read == 2000
    finally:
        await conn.close()


async def test_the_worker_goes_live_from_a_backfill(postgres, template_db, broker, tmp_path):
    from tests.integration.harness import make_topics

    values = games(2000, players=40, seed=8)
    path = write(tmp_path / "history.jsonl", values[:1500])
    url = await new_database(postgres, template_db)
    await backfill(path, url, quiet=True)
    topics = await make_topics(broker)
    # The live topic starts a little before the history's end: those messages are duplicates.
    await produce(broker.bootstrap_servers, topics.input, values[1400:])
    async with running_worker(worker_config(url, broker, topics)):
        assert await wait_processed(url, 2000) == 2000
        await asyncio.sleep(1.0)  # the duplicates are consumed too
    expected = await through_the_worker_store(postgres, template_db, values)
    got, want = await tables(url), await tables(expected)
    for name in ("ratings", "rating_changes", "players", "unrated_players"):
        assert got[name] == want[name], name
    assert {r[:6] for r in got["processed_messages"]} == {r[:6] for r in want["processed_messages"]}
    assert sum(r[6] for r in got["processed_messages"]) == 100  # the live topic's repeats of the history
