"""`rating-worker import` run as a user runs it (a subprocess), against the real PostgreSQL and broker."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
import time

import asyncpg
import orjson
import pytest

from tests.integration.harness import (
    WorkerProcess,
    committed_offsets,
    empty_database,
    make_topics,
    new_database,
    produce,
    read_topic,
    wait_processed,
    worker_env,
)
from worker.commands.importer import build_event
from worker.commands.replay import replay
from worker.contract.decode import decode
from worker.contract.reasons import BadMessage
from worker.dev.streams import import_rows, write_csv, write_jsonl

T0 = "2026-11-01T00:00:00Z"


# ---------------------------------------------------------------------------------------------
# Data: imported ratings of every system (also used by bench/imports.py)


def import_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m worker import ...` as a separate process, the way a user runs it."""
    return subprocess.run([sys.executable, "-m", "worker", "import", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ})


async def fetch(database_url: str, sql: str):
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()


async def states(database_url: str) -> dict:
    rows = await fetch(database_url, "SELECT player_id, system, category, rating, rd, volatility, games, peak, "
                                     "last_at, version, extra FROM ratings")
    return {(r["player_id"], r["system"], r["category"]):
            (*tuple(r)[3:10], None if r["extra"] is None else orjson.loads(r["extra"])) for r in rows}


async def count(database_url: str, table: str) -> int:
    return (await fetch(database_url, f"SELECT count(*) AS n FROM {table}"))[0]["n"]


async def wait_for(predicate, timeout: float = 60.0, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(every)


def summary_count(stdout: str, label: str) -> int:
    """The number on the summary line that starts with `label` (e.g. 'applied')."""
    for line in stdout.splitlines():
        parts = line.split()
        if parts and parts[0] == label:
            return int(parts[1].replace(",", ""))
    raise AssertionError(f"no {label!r} line in the summary:\n{stdout}")


def assert_imported_as_given(stored: dict, rows: list[dict]) -> None:
    """Every row is a state, with the values the file gave, at version 1."""
    assert len(stored) == len(rows)
    for row in rows:
        rating, rd, volatility, games, peak, last_at, version, extra = stored[
            (row["player_id"], row["system"], row["category"])]
        assert rating == pytest.approx(row["rating"], abs=1e-9) and version == 1
        assert games == row.get("games", 0)
        for name, value in (("rd", rd), ("volatility", volatility), ("peak", peak)):
            if name in row:
                assert value == pytest.approx(row[name], abs=1e-9), (row, name)
        if row["system"] == "uscf" and "wins" in row:
            assert extra == {"wins": row["wins"], "draws": row["draws"], "losses": row["losses"],
                             "events3": row["events"]}
        if row["system"] == "fide" and "birth_year" in row:
            assert extra["birth_year"] == row["birth_year"]


# ---------------------------------------------------------------------------------------------
# (a) --database-url


async def test_database_mode_imports_once_and_a_worker_relay_publishes_the_changes(database_url, broker, topics,
                                                                                 tmp_path):
    rows = import_rows(400, seed=1)
    path = tmp_path / "ratings.csv"
    write_csv(path, rows)

    first = await asyncio.to_thread(import_cli, str(path), "--database-url", database_url)
    assert first.returncode == 0, first.stdout + first.stderr
    assert summary_count(first.stdout, "applied") == 400 and summary_count(first.stdout, "already") == 0
    assert summary_count(first.stdout, "rejected") == 0
    stored = await states(database_url)
    assert_imported_as_given(stored, rows)
    # The same states as the engine in memory gives for the same messages (omitted fields: start values).
    changes = io.BytesIO()
    memory = await replay([build_event(r) for r in rows], changes)
    assert stored == {tuple(k): (s.rating, s.rd, s.volatility, s.games, s.peak, s.last_at, s.version, s.extra)
                      for k, s in memory.states.items()}
    assert await count(database_url, "rating_changes") == 400 and await count(database_url, "outbox") == 400

    second = await asyncio.to_thread(import_cli, str(path), "--database-url", database_url)
    assert second.returncode == 0, second.stdout + second.stderr
    assert summary_count(second.stdout, "applied") == 0 and summary_count(second.stdout, "already") == 400
    assert "nothing new: every line had been imported before" in second.stdout
    assert await states(database_url) == stored
    assert await count(database_url, "rating_changes") == 400
    assert await count(database_url, "processed_messages") == 400

    # The command publishes nothing itself: a worker's outbox relay does, from the history rows.
    assert (await read_topic(broker.bootstrap_servers, topics.output, at_least=0, timeout=1)) == []
    worker = WorkerProcess(worker_env(database_url, broker, topics), tmp_path / "worker.log")
    try:
        published = await read_topic(broker.bootstrap_servers, topics.output, at_least=400, timeout=60)
        assert await wait_for(lambda: _outbox_empty(database_url), timeout=30)
    finally:
        worker.signal(signal.SIGTERM)
        assert worker.wait(60) == 0
    # Byte for byte the rating.changed that replay writes for the same messages.
    assert sorted(r.value for r in published) == sorted(changes.getvalue().splitlines())
    causes = {(d["cause"]["type"], d["cause"]["source"]) for d in (orjson.loads(r.value)["data"] for r in published)}
    assert causes == {("rating.imported", "/rating-worker/import")}
    assert all(r.key == orjson.loads(r.value)["data"]["player_id"].encode() for r in published)


async def _outbox_empty(database_url: str) -> bool:
    return await count(database_url, "outbox") == 0


async def test_database_mode_imports_the_good_lines_and_reports_the_bad_ones(database_url, tmp_path):
    rows = import_rows(20, seed=2)
    path = tmp_path / "ratings.jsonl"
    lines = [orjson.dumps(r) for r in rows]
    lines.insert(5, b'{"player_id": "low", "system": "fide", "category": "standard", "rating": 1200, '
                    b'"imported_at": "2026-11-01T00:00:00Z"}')
    lines.insert(9, b"{not json")
    path.write_bytes(b"\n".join(lines) + b"\n")
    rejects = tmp_path / "rejects.jsonl"
    result = await asyncio.to_thread(import_cli, str(path), "--database-url", database_url, "--rejects",
                                     str(rejects), "--batch-size", "7")
    assert result.returncode == 1, result.stdout + result.stderr
    assert summary_count(result.stdout, "applied") == 20 and summary_count(result.stdout, "rejected") == 2
    assert "line 6: invalid_rule: data.rating: 1200 is not a listed FIDE rating on the 2026-11 list" in result.stdout
    assert "line 10: invalid_json: line: invalid JSON" in result.stdout
    assert [orjson.loads(x)["line"] for x in rejects.read_bytes().splitlines()] == [6, 10]
    assert_imported_as_given(await states(database_url), rows)


async def test_database_mode_refuses_a_database_that_is_not_migrated(postgres, tmp_path):
    path = tmp_path / "ratings.csv"
    write_csv(path, import_rows(3))
    result = await asyncio.to_thread(import_cli, str(path), "--database-url", await empty_database(postgres))
    assert result.returncode == 3
    assert "rating-worker migrate" in result.stderr


# ---------------------------------------------------------------------------------------------
# (b) through the broker, with a worker running


async def test_broker_mode_with_a_worker_ends_with_the_same_states_as_database_mode(
        database_url, postgres, template_db, broker, tmp_path):
    rows = import_rows(500, seed=3)
    csv_path, jsonl_path = tmp_path / "ratings.csv", tmp_path / "ratings.jsonl"
    write_csv(csv_path, rows)
    write_jsonl(jsonl_path, rows)
    direct_url = await new_database(postgres, template_db)
    direct = await asyncio.to_thread(import_cli, str(csv_path), "--database-url", direct_url)
    assert direct.returncode == 0, direct.stdout + direct.stderr

    topics = await make_topics(broker, partitions=3)
    worker = WorkerProcess(worker_env(database_url, broker, topics), tmp_path / "worker.log")
    try:
        first = await asyncio.to_thread(import_cli, str(jsonl_path), "--topic", topics.input,
                                        "--bootstrap-servers", broker.bootstrap_servers, "--batch-size", "64")
        assert first.returncode == 0, first.stdout + first.stderr
        assert summary_count(first.stdout, "produced") == 500
        assert await wait_processed(database_url, 500) == 500
        published = await read_topic(broker.bootstrap_servers, topics.output, at_least=500)
        # Again: 500 more records on the topic, all skipped by the worker's dedupe (the same ids).
        again = await asyncio.to_thread(import_cli, str(csv_path), "--topic", topics.input,
                                        "--bootstrap-servers", broker.bootstrap_servers)
        assert again.returncode == 0, again.stdout + again.stderr
        assert summary_count(again.stdout, "produced") == 500

        async def all_consumed() -> bool:
            offsets = await committed_offsets(broker.bootstrap_servers, topics.input, topics.group, 3)
            return sum(o or 0 for o in offsets.values()) == 1000

        assert await wait_for(all_consumed, timeout=60, every=0.5)
    finally:
        worker.signal(signal.SIGTERM)
        assert worker.wait(60) == 0
    through_broker = await states(database_url)
    assert through_broker == await states(direct_url)
    assert_imported_as_given(through_broker, rows)
    assert await count(database_url, "rating_changes") == 500
    assert await count(database_url, "processed_messages") == 500
    # JSON lines through the worker publish the same rating.changed bytes (ids included) as replay
    # writes for the messages built from the rows: the ids do not depend on the file's format.
    changes = io.BytesIO()
    await replay([build_event(r) for r in rows], changes)
    assert sorted(r.value for r in published) == sorted(changes.getvalue().splitlines())
    assert all(r.key == orjson.loads(r.value)["data"]["player_id"].encode() for r in published)


async def test_broker_mode_reports_an_unreachable_broker_with_exit_3(tmp_path):
    path = tmp_path / "ratings.csv"
    write_csv(path, import_rows(3))
    from worker.dev import free_port

    result = await asyncio.to_thread(import_cli, str(path), "--bootstrap-servers", f"127.0.0.1:{free_port()}",
                                     timeout=120)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "cannot connect to the broker" in result.stderr


# ---------------------------------------------------------------------------------------------
# (c) bad rating.imported messages sent to the worker directly are dead-lettered with their reason


def _event(data: dict, ident: str) -> bytes:
    return build_event({"imported_at": T0, **data}, source="/platform/import", ident=ident)


async def test_bad_rating_imported_messages_are_dead_lettered_and_good_ones_applied(database_url, broker, topics,
                                                                                   tmp_path):
    good_rows = import_rows(6, seed=4, prefix="good")
    good = [_event(r, f"good-{i}") for i, r in enumerate(good_rows)]
    bad = [
        (_event({"player_id": "b1", "system": "fide", "category": "standard", "rating": 1350}, "bad-1"),
         "invalid_rule", "data.rating: 1350 is not a listed FIDE rating on the"),
        (_event({"player_id": "b2", "system": "fide", "category": "standard", "rating": 2000, "rd": 60}, "bad-2"),
         "invalid_data", "data.rd: fide is an Elo system: no RD"),
        (_event({"player_id": "b3", "system": "csr", "category": "turbo", "rating": 1500}, "bad-3"),
         "invalid_data", "data.category: must be one of"),
        (_event({"player_id": "b4", "system": "uscf", "category": "regular", "rating": 1500, "games": -2}, "bad-4"),
         "invalid_data", "data.games: must be >= 0 (got -2)"),
        (_event({"player_id": "b5", "system": "csr", "category": "blitz"}, "bad-5"),
         "invalid_data", "data.rating: is required"),
        (_event({"player_id": "b6", "system": "tsr", "category": "turbo", "rating": 1500, "peak": 1600}, "bad-6"),
         "invalid_data", "data.peak: tsr has no floor, so no peak"),
    ]
    stream = good[:2] + [b for b, _, _ in bad[:3]] + good[2:4] + [b for b, _, _ in bad[3:]] + good[4:]
    await produce(broker.bootstrap_servers, topics.input, stream)
    worker = WorkerProcess(worker_env(database_url, broker, topics), tmp_path / "worker.log")
    try:
        assert await wait_processed(database_url, len(good)) == len(good)
        dead = await read_topic(broker.bootstrap_servers, topics.dlq, at_least=len(bad))
    finally:
        worker.signal(signal.SIGTERM)
        assert worker.wait(60) == 0
    assert sorted(r.value for r in dead) == sorted(b for b, _, _ in bad)
    headers = {r.value: dict(r.headers) for r in dead}
    for value, error_class, reason in bad:
        h = headers[value]
        assert h["error.class"].decode() == error_class
        assert h["error.message"].decode().startswith(reason), h["error.message"]
        assert h["source.topic"].decode() == topics.input
        assert int(h["source.offset"]) == stream.index(value)
        with pytest.raises(BadMessage) as exc:  # the decoder's own reason, word for word
            decode(value)
        assert h["error.message"].decode() == exc.value.reason
    assert_imported_as_given(await states(database_url), good_rows)
    assert await count(database_url, "processed_messages") == len(good)
