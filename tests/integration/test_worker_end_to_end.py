"""The worker against the real broker and PostgreSQL: same numbers as replay, once and only once."""

from __future__ import annotations

import asyncio
import contextlib
import io
import urllib.request

import asyncpg
import orjson
import pytest

from tests.integration.harness import (
    make_topics,
    produce,
    read_topic,
    wait_processed,
    worker_config,
)
from worker.commands.replay import replay
from worker.commands.run import run_service
from worker.dev.streams import games, player_of
from worker.observability import Metrics
from worker.store.postgres import history_payloads


@contextlib.asynccontextmanager
async def running_worker(cfg, metrics: Metrics | None = None):
    started, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run_service(cfg, started=started, stop_event=stop, metrics=metrics,
                                           install_signals=False))
    waiter = asyncio.create_task(started.wait())
    await asyncio.wait([task, waiter], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()  # raises the start-up error
    try:
        yield task
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 60) == 0


async def stored_ratings(database_url: str) -> dict:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch("SELECT player_id, system, category, rating, rd, volatility, games, version FROM ratings")
    finally:
        await conn.close()
    return {(r["player_id"], r["system"], r["category"]): r for r in rows}


async def test_ratings_equal_replay_for_2000_games_on_one_partition(database_url, broker, topics):
    values = games(2000, players=50, seed=11)
    await produce(broker.bootstrap_servers, topics.input, values, key_of=player_of)
    async with running_worker(worker_config(database_url, broker, topics, batch_size=500)):
        assert await wait_processed(database_url, 2000) == 2000
        published = await read_topic(broker.bootstrap_servers, topics.output, at_least=4000)
    out = io.BytesIO()
    memory = await replay(values, out)
    stored = await stored_ratings(database_url)
    assert len(stored) == len(memory.states)
    for key, state in memory.states.items():
        row = stored[tuple(key)]
        assert row["rating"] == pytest.approx(state.rating, abs=1e-9)
        assert row["rd"] == pytest.approx(state.rd, abs=1e-9)
        assert row["volatility"] == pytest.approx(state.volatility, abs=1e-9)
        assert (row["games"], row["version"]) == (state.games, state.version)
    # The published changes are exactly replay's output, byte for byte (as a set: partitions interleave).
    assert {r.value for r in published} == set(out.getvalue().splitlines())
    assert all(r.key == orjson.loads(r.value)["data"]["player_id"].encode() for r in published)
    # What the relay would publish again, rebuilt from the history's columns, is the same bytes.
    conn = await asyncpg.connect(database_url)
    try:
        assert sorted(await history_payloads(conn)) == sorted(out.getvalue().splitlines())
    finally:
        await conn.close()


async def test_every_message_delivered_twice_is_applied_once(database_url, broker, topics):
    values = games(300, players=20, seed=12)
    twice = [v for v in values for _ in range(2)]
    await produce(broker.bootstrap_servers, topics.input, twice[:300])
    async with running_worker(worker_config(database_url, broker, topics, batch_size=50)):
        assert await wait_processed(database_url, 150) == 150
        await produce(broker.bootstrap_servers, topics.input, twice[300:] + values[:10])
        assert await wait_processed(database_url, 300) == 300
        await asyncio.sleep(1.0)  # the last duplicates are consumed too
    out = io.BytesIO()
    memory = await replay(values, out)
    stored = await stored_ratings(database_url)
    assert {k: (r["rating"], r["version"]) for k, r in stored.items()} == {
        tuple(k): (s.rating, s.version) for k, s in memory.states.items()
    }
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM rating_changes") == 600
    finally:
        await conn.close()


def _bad_messages() -> list[tuple[bytes, str]]:
    good = orjson.loads(games(1, 2, seed=3)[0])
    wrong_result = {**good, "id": "bad-1", "data": {**good["data"], "result": "2-0"}}
    return [
        (b"\xff\xfe not utf-8", "invalid_utf8"),
        (b'{"specversion": "1.0", "id": "x"', "invalid_json"),
        (orjson.dumps(wrong_result), "invalid_data"),
    ]


async def test_bad_messages_go_to_the_dlq_with_their_reason_and_the_rest_is_applied(database_url, broker, topics):
    values = games(17, players=6, seed=13)
    bad = _bad_messages()
    stream = values[:5] + [bad[0][0]] + values[5:11] + [bad[1][0]] + values[11:] + [bad[2][0]]
    await produce(broker.bootstrap_servers, topics.input, stream)
    metrics = Metrics()
    cfg = worker_config(database_url, broker, topics, metrics_port=0)
    async with running_worker(cfg, metrics) as task:
        assert await wait_processed(database_url, 17) == 17
        dead = await read_topic(broker.bootstrap_servers, topics.dlq, at_least=3)
        assert not task.done()  # still running
        # and still working: one more game is applied after the bad ones
        await produce(broker.bootstrap_servers, topics.input, games(18, players=6, seed=13)[17:])
        assert await wait_processed(database_url, 18) == 18
    assert sorted(r.value for r in dead) == sorted(b for b, _ in bad)
    by_value = {r.value: dict(r.headers) for r in dead}
    for value, error_class in bad:
        headers = by_value[value]
        assert headers["error.class"].decode() == error_class
        assert headers["error.message"]
        assert headers["source.topic"].decode() == topics.input
        assert int(headers["source.offset"]) == stream.index(value)


async def test_health_endpoints_and_metrics(database_url, broker, topics):
    from worker import dev

    port = dev.free_port()
    cfg = worker_config(database_url, broker, topics, metrics_port=port, metrics_host="127.0.0.1")
    await produce(broker.bootstrap_servers, topics.input, games(20, players=5, seed=14))
    async with running_worker(cfg):
        await wait_processed(database_url, 20)

        def get(path):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
                return resp.status, resp.read().decode()

        status, body = await asyncio.to_thread(get, "/readyz")
        assert status == 200
        status, body = await asyncio.to_thread(get, "/metrics")
        assert 'rating_worker_messages_total{outcome="applied",reason="",type="game.finished"} 20.0' in body
        assert 'rating_worker_rating_changes_total{category=' in body


async def test_three_partitions_are_all_consumed(database_url, broker):
    topics = await make_topics(broker, partitions=3)
    values = games(600, players=30, seed=15)
    await produce(broker.bootstrap_servers, topics.input, values, key_of=player_of)
    async with running_worker(worker_config(database_url, broker, topics)):
        assert await wait_processed(database_url, 600) == 600


async def test_a_rating_error_dead_letters_that_message_only(database_url, broker, topics, monkeypatch):
    from tests.unit.test_rating_errors import make_csr_fail_on

    make_csr_fail_on(monkeypatch, "g-5")
    values = games(12, players=4, seed=6)
    await produce(broker.bootstrap_servers, topics.input, values)
    async with running_worker(worker_config(database_url, broker, topics)) as task:
        assert await wait_processed(database_url, 11) == 11
        dead = await read_topic(broker.bootstrap_servers, topics.dlq, at_least=1)
        assert not task.done()
    assert [r.value for r in dead] == [values[5]]
    headers = dict(dead[0].headers)
    assert headers["error.class"] == b"rating_error" and b"ZeroDivisionError" in headers["error.message"]
    assert int(headers["source.offset"]) == 5
