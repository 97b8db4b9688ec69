"""Retention (issue 42, item 1) against a real PostgreSQL: processed ids and unrated rows removed by their
windows in chunks, never an id the window still needs, never waiting for a batch, one worker at a time; the
unrated rows still shown after the ids of applied messages of their age went; the metrics an operator watches.

Rows are aged by moving their `processed_at` back (what the task reads), not by waiting.
"""

from __future__ import annotations

import asyncio
import io
import logging
import uuid
from dataclasses import replace

import asyncpg
import pytest

from tests.integration.harness import captured_logs, http_get, metric_samples, worker_config, worker_env
from tests.unit.test_unrated_reasons import scenario
from worker.commands.replay import replay
from worker.commands.run import run_service
from worker.config import Config, ConfigError
from worker.dev.api import ApiServer
from worker.dev.processes import free_port
from worker.observability import Metrics, Readiness
from worker.pipeline.retention import Retention, check_topic_retention
from worker.pipeline.retry import Retrier
from worker.store import retention as store
from worker.store.postgres import PostgresStore
from worker.store.reads import OperatorReads

pytestmark = pytest.mark.timeout(180)
DAY = 86400.0


_made: list[Retention] = []


def task(url: str, **settings) -> Retention:
    """A worker's retention task with these settings (its connection closed at the test's end)."""
    config = Config(database_url=url, **settings)
    metrics = Metrics()
    _made.append(Retention(config, metrics, Retrier(config, metrics, Readiness(metrics), asyncio.Event())))
    return _made[-1]


@pytest.fixture(autouse=True)
async def _close_tasks():
    yield
    while _made:
        await _made.pop().close()


async def add_ids(conn, prefix: str, n: int, days_ago: float, outcome: str = "applied") -> None:
    await conn.execute(
        "INSERT INTO processed_messages (source, id, type, outcome, processed_at) "
        "SELECT '/t', $1 || g, 'game.finished', $2, now() - make_interval(secs => $3::float8) "
        "FROM generate_series(1, $4) AS g", prefix, outcome, days_ago * DAY, n)


async def ids(conn) -> set[str]:
    return {r[0] for r in await conn.fetch("SELECT id FROM processed_messages WHERE source = '/t'")}


async def age(conn, days: float, where: str = "true") -> None:
    """Every matching row (both tables) stored `days` ago."""
    for table in ("processed_messages", "unrated_players"):
        await conn.execute(f"UPDATE {table} SET processed_at = now() - make_interval(secs => $1::float8) "
                           f"WHERE {where}", days * DAY)


async def rate(url: str, lines: list[bytes]) -> None:
    """The worker's engine and `save`, through replay against PostgreSQL."""
    pg = await PostgresStore.connect(url)
    try:
        errors = io.StringIO()
        await replay(lines, io.BytesIO(), store=pg, chunk=7, errors=errors)
        assert errors.getvalue() == ""
    finally:
        await pg.close()


async def test_expired_ids_go_in_chunks_and_the_window_stays(database_url):
    conn = await asyncpg.connect(database_url)
    try:
        await add_ids(conn, "old-", 12, 8.5)
        await add_ids(conn, "new-", 5, 7.5)
        chunks = []
        while (done := await store.remove_processed(conn, "applied", 8 * DAY, 5)).ids:
            chunks.append(done.ids)
        assert chunks == [5, 5, 2]  # oldest first, at most a chunk a statement
        assert await ids(conn) == {f"new-{i}" for i in range(1, 6)}
    finally:
        await conn.close()


async def test_a_redelivery_within_the_window_is_a_duplicate_and_an_expired_id_is_gone(database_url):
    lines = scenario()
    await rate(database_url, lines)
    conn = await asyncpg.connect(database_url)
    try:
        before = {(r["source"], r["id"]): r["duplicates"] for r in await conn.fetch(
            "SELECT source, id, duplicates FROM processed_messages")}
        await age(conn, 7.9)
        await age(conn, 9, "id LIKE 'imp-%'")  # the imports' ids expired (applied, left nobody out)
        r = task(database_url, dedupe_window_days=8, unrated_window_days=30, retention_chunk=2)
        assert await r.pass_once()
        kept = {(s, i) for s, i in await conn.fetch("SELECT source, id FROM processed_messages")}
        assert kept == {k for k in before if not k[1].startswith("imp-")}
        assert r.metrics.retention_removed.labels("processed_messages")._value.get() == 5
        await rate(database_url, lines)  # everything delivered again
        after = {(r["source"], r["id"]): r["duplicates"] for r in await conn.fetch(
            "SELECT source, id, duplicates FROM processed_messages")}
        # every id kept: a duplicate, counted on its row; the expired imports applied again, as new
        assert all(after[k] > before[k] for k in kept)
        assert {k: after[k] for k in before if k not in kept} == {k: 0 for k in before if k not in kept}
    finally:
        await conn.close()


async def test_unrated_rows_outlive_applied_ids_of_their_age_and_go_with_their_window(database_url, tmp_path):
    await rate(database_url, scenario())
    conn = await asyncpg.connect(database_url)
    reads = OperatorReads(conn)
    try:
        shown = [dict(r) for r in await reads.player_unrated("a", 100, None)]
        assert {r["reason"] for r in shown} >= {"casual", "guest", "variant"}
        await age(conn, 10)
        r = task(database_url, dedupe_window_days=8, unrated_window_days=30)
        await r.pass_once()
        outcomes = {o for (o,) in await conn.fetch("SELECT DISTINCT outcome FROM processed_messages")}
        assert outcomes == {"unrated"}  # every applied id went, with the players they left out (TSR's 'c')
        assert await reads.player_unrated("c", 100, None) == []
        assert [dict(x) for x in await reads.player_unrated("a", 100, None)] == shown
        with ApiServer(database_url, tmp_path / "serve.log") as api:
            status, body = http_get(int(api.url.rsplit(":", 1)[1]), "/v1/players/a/unrated")
        assert status == 200 and body.count('"casual"') == 1, body
        await age(conn, 31)
        await r.pass_once()
        assert await conn.fetchval("SELECT count(*) FROM unrated_players") == 0
        assert await conn.fetchval("SELECT count(*) FROM processed_messages") == 0
        assert await reads.player_unrated("a", 100, None) == []
    finally:
        await conn.close()


async def test_unrated_rows_go_at_their_window_when_it_is_the_shorter(database_url):
    await rate(database_url, scenario())
    conn = await asyncpg.connect(database_url)
    try:
        unrated_ids = await conn.fetchval("SELECT count(*) FROM processed_messages WHERE outcome = 'unrated'")
        await age(conn, 4)
        await task(database_url, dedupe_window_days=8, unrated_window_days=3).pass_once()
        assert await conn.fetchval("SELECT count(*) FROM unrated_players") == 0
        # the ids (and the reasons on them) stay for the dedupe window
        assert await conn.fetchval("SELECT count(*) FROM processed_messages WHERE outcome = 'unrated'") == unrated_ids
    finally:
        await conn.close()


async def test_windows_of_zero_keep_everything(database_url):
    await rate(database_url, scenario())
    conn = await asyncpg.connect(database_url)
    try:
        counts = [await conn.fetchval(f"SELECT count(*) FROM {t}") for t in ("processed_messages", "unrated_players")]
        await age(conn, 400)
        await task(database_url, dedupe_window_days=0, unrated_window_days=0).pass_once()
        assert [await conn.fetchval(f"SELECT count(*) FROM {t}")
                for t in ("processed_messages", "unrated_players")] == counts
    finally:
        await conn.close()


async def test_one_worker_removes_at_a_time(database_url):
    holder = await asyncpg.connect(database_url)
    conn = await asyncpg.connect(database_url)
    try:
        await add_ids(conn, "old-", 30, 9)
        async with holder.transaction():  # another worker's chunk in progress
            await holder.execute("SELECT pg_advisory_xact_lock(hashtext('rating-worker retention'))")
            assert await store.remove_processed(conn, "applied", 8 * DAY, 5) is None
            r = task(database_url, retention_chunk=5)
            assert await r.pass_once()  # skipped: the other one has the pass
            assert len(await ids(conn)) == 30
        # two workers at once: each chunk by one of them, all removed, no error
        a, b = task(database_url, retention_chunk=3), task(database_url, retention_chunk=3)
        for _ in range(2):
            await asyncio.gather(a.pass_once(), b.pass_once())
        assert await ids(conn) == set()
        removed = [x.metrics.retention_removed.labels("processed_messages")._value.get() for x in (a, b)]
        assert sum(removed) == 30
    finally:
        await conn.close()
        await holder.close()


async def test_a_pass_never_waits_for_a_batch(database_url):
    batch = await asyncpg.connect(database_url)
    conn = await asyncpg.connect(database_url)
    try:
        await add_ids(conn, "old-", 10, 9)
        r = task(database_url, retention_chunk=4)
        async with batch.transaction():
            # a batch counting a duplicate of an old id (save's `repeats`) holds that row until it commits
            await batch.execute("UPDATE processed_messages SET duplicates = duplicates + 1 "
                                "WHERE source = '/t' AND id = 'old-3'")
            assert await asyncio.wait_for(r.pass_once(), 60)
            assert await ids(conn) == {"old-3"}  # left for a later pass, not waited for
        await r.pass_once()
        assert await ids(conn) == set()
        await add_ids(conn, "old-", 3, 9)
        async with batch.transaction():  # a table lock (a migration, a detach): the chunk gives up at lock_timeout
            await batch.execute("LOCK TABLE processed_messages IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(asyncpg.LockNotAvailableError):
                await asyncio.wait_for(r.pass_once(), 60)
        await r.pass_once()  # the next pass, on a new connection if need be
        assert await ids(conn) == set()
    finally:
        await conn.close()
        await batch.close()


async def test_the_metrics_say_what_was_removed_what_is_kept_and_whether_removal_falls_behind(database_url):
    await rate(database_url, scenario())
    conn = await asyncpg.connect(database_url)
    holder = await asyncpg.connect(database_url)
    try:
        await add_ids(conn, "old-", 7, 9)
        await add_ids(conn, "kept-", 2, 5)
        await age(conn, 2, "source <> '/t'")
        r = task(database_url)
        async with holder.transaction():  # removal held up (another worker's lock): the oldest is overdue
            await holder.execute("SELECT pg_advisory_xact_lock(hashtext('rating-worker retention'))")
            await r.pass_once()
        samples = metric_samples(metrics_text(r), "rating_worker_retention_overdue_seconds")
        assert 0.9 * DAY < samples[(("table", "processed_messages"),)] < 1.1 * DAY
        assert samples[(("table", "unrated_players"),)] == 0
        await r.pass_once()
        text = metrics_text(r)
        assert metric_samples(text, "rating_worker_retention_removed_total")[(("table", "processed_messages"),)] == 7
        assert metric_samples(text, "rating_worker_retention_overdue_seconds")[(("table", "processed_messages"),)] == 0
        oldest = metric_samples(text, "rating_worker_retention_oldest_seconds")
        assert 4.9 * DAY < oldest[(("table", "processed_messages"),)] < 5.1 * DAY
        assert 1.9 * DAY < oldest[(("table", "unrated_players"),)] < 2.1 * DAY
        sizes = metric_samples(text, "rating_worker_table_bytes")
        for table in store.BIG_TABLES:  # the outbox is empty: every change was published
            assert sizes[(("part", "rows"), ("table", table))] > 0 or table == "outbox", table
            assert sizes[(("part", "indexes"), ("table", table))] > 0, table  # a btree's metapage at least
    finally:
        await conn.close()
        await holder.close()


def metrics_text(r: Retention) -> str:
    from prometheus_client import generate_latest

    return generate_latest(r.metrics.registry).decode()


async def test_sizes_are_summed_over_partitions(database_url):
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("CREATE TABLE sized (at date NOT NULL, note text) PARTITION BY RANGE (at)")
        for month in (1, 2):
            await conn.execute(f"CREATE TABLE sized_{month} PARTITION OF sized "
                               f"FOR VALUES FROM ('2026-0{month}-01') TO ('2026-0{month + 1}-01')")
            await conn.execute(f"CREATE INDEX ON sized_{month} (at)")
            await conn.execute(f"INSERT INTO sized SELECT '2026-0{month}-01'::date + g % 28, repeat('x', 100) "
                               f"FROM generate_series(1, {month * 2000}) AS g")
        leaves = await conn.fetchrow("SELECT sum(pg_table_size(c)) AS t, sum(pg_indexes_size(c)) AS i "
                                     "FROM unnest(ARRAY['sized_1'::regclass, 'sized_2'::regclass]) AS c")
        sizes = await store.table_sizes(conn, ("sized", "outbox", "no_such_table"))
        assert sizes["sized"] == (leaves["t"], leaves["i"]) and leaves["t"] > 0 and leaves["i"] > 0
        assert sizes["outbox"][1] > 0 and sizes["no_such_table"] == (0, 0)
    finally:
        await conn.close()


async def make_topic(broker, retention_ms: int | None) -> str:
    from aiokafka.admin import NewTopic

    from worker.kafka_clients import admin

    name = f"games-{uuid.uuid4().hex[:8]}"
    client = admin(Config(kafka_bootstrap_servers=broker.bootstrap_servers))
    await client.start()
    try:
        configs = {} if retention_ms is None else {"retention.ms": str(retention_ms)}
        await client.create_topics([NewTopic(name, 1, 1, topic_configs=configs)])
    finally:
        await client.close()
    return name


async def test_the_worker_as_run_removes_expired_ids(database_url, broker, topics):
    # The task above, as `rating-worker run` starts it (a side task of the pipeline): ids past the
    # default window go, those within it stay, and the metric counts them.
    conn = await asyncpg.connect(database_url)
    try:
        await add_ids(conn, "old-", 3, Config.dedupe_window_days + 1)
        await add_ids(conn, "kept-", 2, Config.dedupe_window_days - 1)
        metrics, stop = Metrics(), asyncio.Event()
        cfg = worker_config(database_url, broker, topics, retention_interval_s=1)
        worker = asyncio.create_task(run_service(cfg, stop_event=stop, metrics=metrics, install_signals=False))
        try:
            deadline = asyncio.get_running_loop().time() + 60
            while await ids(conn) != {"kept-1", "kept-2"}:
                assert not worker.done(), worker
                assert asyncio.get_running_loop().time() < deadline, await ids(conn)
                await asyncio.sleep(0.2)
        finally:
            stop.set()
            assert await asyncio.wait_for(worker, 60) == 0
        assert metrics.retention_removed.labels("processed_messages")._value.get() == 3
    finally:
        await conn.close()


async def test_a_window_shorter_than_the_topics_retention_is_refused_at_start(broker, database_url, topics, workers):
    fortnight = await make_topic(broker, 14 * 86_400_000)
    week = await make_topic(broker, 7 * 86_400_000)
    said = await make_topic(broker, None)  # the embedded broker reports only what was set
    config = Config(kafka_bootstrap_servers=broker.bootstrap_servers, kafka_input_topics=(week, fortnight, said))
    with pytest.raises(ConfigError) as refused:
        await check_topic_retention(config)
    assert str(refused.value) == (f"DEDUPE_WINDOW_DAYS=8 is shorter than topic {fortnight}'s retention.ms=1209600000 "
                                  f"(14 days) plus a day's margin: set it to at least 15 (or 0 to keep every id)")
    for enough in (15, 0):
        await check_topic_retention(replace(config, dedupe_window_days=enough))
    await check_topic_retention(replace(config, kafka_input_topics=(week, said)))
    # the worker itself: one line, exit code 2, as every setting it refuses
    env = worker_env(database_url, broker, topics, kafka_input_topics=fortnight)
    w = workers.start(env)
    assert await workers.wait(w) == 2
    lines = [x for x in workers.log().splitlines() if "configuration error" in x]
    assert lines == [f"rating-worker: configuration error: {refused.value}"], workers.log()[-2000:]


async def test_a_broker_that_does_not_answer_is_logged_and_the_worker_goes_on():
    config = Config(kafka_bootstrap_servers=f"127.0.0.1:{free_port()}")
    with captured_logs(logging.WARNING) as logs:
        await check_topic_retention(config)
    assert "DEDUPE_WINDOW_DAYS not checked" in logs.getvalue()
