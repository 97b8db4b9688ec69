"""FIDE's monthly list through the worker (issue 20, item 6): real broker and PostgreSQL, the list sent by
`rating-worker fide close-period`, applied in chunks equal to replay, resumed after a SIGKILL between
chunks with nothing applied twice, and inactive players off the leaderboard."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import asyncpg
import orjson
import pytest

from tests.integration.harness import produce, read_topic, wait_processed, worker_config, worker_env
from tests.integration.test_worker_end_to_end import running_worker, stored_ratings
from tests.unit.test_fide_lists import stream
from worker.commands.fide import period_closed_event
from worker.commands.replay import replay
from worker.contract.changed import validate_output
from worker.store.postgres import PostgresStore, history_payloads


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "worker", *args], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120)


def without_list(lines: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """The stream before the list, and after it (the list itself is sent by the command)."""
    at = next(i for i, x in enumerate(lines) if b'"rating.period_closed"' in x)
    return lines[:at], [x for x in lines[at:] if b'"rating.period_closed"' not in x]


def same_as(stored: dict, memory) -> None:
    assert len(stored) == len(memory.states)
    for key, st in memory.states.items():
        row = stored[tuple(key)]
        assert (row["rating"], row["version"], row["games"]) == (pytest.approx(st.rating), st.version, st.games)


async def test_the_list_sent_by_the_command_is_applied_in_chunks_as_replay_applies_it(database_url, broker, topics):
    lines = stream(40)
    before, after = without_list(lines)
    await produce(broker.bootstrap_servers, topics.input, before)
    env = {"KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers}
    async with running_worker(worker_config(database_url, broker, topics, batch_size=7, sweep_chunk=4)):
        assert await wait_processed(database_url, len(before)) == len(before)
        for _ in range(2):  # sent twice: applied once
            sent = cli("fide", "close-period", "2026-12", "--topic", topics.input, env=env)
            assert sent.returncode == 0, sent.stderr
            assert "sent the FIDE December 2026 list" in sent.stdout
        await produce(broker.bootstrap_servers, topics.input, after)
        assert await wait_processed(database_url, len(before) + 1 + len(after)) == len(before) + 1 + len(after)
        expected = io.BytesIO()
        memory = await replay(before + [period_closed_event("2026-12", "2026-12-01T00:00:00Z")] + after, expected)
        published = await read_topic(broker.bootstrap_servers, topics.output,
                                     at_least=len(expected.getvalue().splitlines()))
    same_as(await stored_ratings(database_url), memory)
    # Every record as replay writes it, each once (the relay may publish one twice: consumers drop it by id).
    got = {r.value for r in published}
    assert got == set(expected.getvalue().splitlines())
    # each player's changes in version order on the topic, the list's chunks and the batch around them alike
    seen: dict[str, int] = {}
    for r in sorted(published, key=lambda r: (r.partition, r.offset)):
        data = orjson.loads(r.value)["data"]
        assert data["version"] >= seen.get(data["player_id"], 0), data  # (>=: the relay may repeat one)
        seen[data["player_id"]] = data["version"]
    for value in got:
        validate_output(orjson.loads(value))
    conn = await asyncpg.connect(database_url)
    try:
        assert sorted(await history_payloads(conn)) == sorted(expected.getvalue().splitlines())
        row = await conn.fetchrow("SELECT outcome, duplicates, ref FROM processed_messages WHERE id = 'fide-list-2026-12'")
    finally:
        await conn.close()
    assert (row["outcome"], row["duplicates"], row["ref"]) == ("applied", 1, "2026-12")
    shown = cli("message", "/rating-worker/fide", "fide-list-2026-12", "--json", env={"DATABASE_URL": database_url})
    data = orjson.loads(shown.stdout)
    assert data["status"] == "applied" and len(data["changes"]) == sum(
        1 for x in expected.getvalue().splitlines() if b'"rating.period_closed"' in x)
    board = orjson.loads(cli("leaderboard", "fide", "standard", "--top", "100", "--json",
                             env={"DATABASE_URL": database_url}).stdout)["entries"]
    inactive = {k.player_id for k, st in memory.states.items() if (st.extra or {}).get("inactive")}
    assert inactive and not inactive & {e["player_id"] for e in board}  # inactive players are left out
    assert {"p00"} - inactive  # p00 played again in December: active, back on the board


async def test_a_worker_killed_between_chunks_resumes_the_list_and_applies_nothing_twice(database_url, broker,
                                                                                         topics, workers):
    lines = stream(40)
    await produce(broker.bootstrap_servers, topics.input, lines)
    env = worker_env(database_url, broker, topics, batch_size=500, sweep_chunk=3,
                     RATING_WORKER_FAULT="kill_after_sweep_chunk:3")
    killed = workers.start(env, "killed")
    assert await workers.wait(killed, timeout=120) == -9  # SIGKILL after the third chunk
    again = workers.start({k: v for k, v in env.items() if k != "RATING_WORKER_FAULT"}, "again")
    assert await wait_processed(database_url, len(lines) - 1) == len(lines) - 1  # the list delivered twice
    assert await workers.stop(again) == 0
    expected = io.BytesIO()
    memory = await replay(lines, expected)
    same_as(await stored_ratings(database_url), memory)
    conn = await asyncpg.connect(database_url)
    try:
        # every change once, with its version: nothing of the first run applied again
        assert sorted(await history_payloads(conn)) == sorted(expected.getvalue().splitlines())
    finally:
        await conn.close()
    assert '"sweep applied"' in workers.log("again")


@pytest.mark.parametrize("chunk", [2, 1000])
async def test_postgres_and_memory_apply_the_list_alike(database_url, chunk):
    from worker.engine import sweep

    lines = stream(20)
    memory = await replay(lines, io.BytesIO())
    store = await PostgresStore.connect(database_url)
    original = sweep.CHUNK
    sweep.CHUNK = chunk
    try:
        await replay(lines, io.BytesIO(), store=store)
    finally:
        sweep.CHUNK = original
        await store.close()
    same_as(await stored_ratings(database_url), memory)
