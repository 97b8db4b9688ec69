"""The delivery guarantees under crashes, outages, several workers and shutdown."""

from __future__ import annotations

import asyncio
import random
import signal
import urllib.error
import urllib.request
from collections import Counter

import asyncpg
import orjson

from tests.integration.harness import (
    WorkerProcess,
    committed_offsets,
    make_topics,
    produce,
    read_topic,
    wait_processed,
    worker_config,
    worker_env,
)
from tests.integration.test_worker_end_to_end import running_worker
from worker import dev
from worker.dev.proxy import TcpProxy
from worker.dev.streams import games, player_of


async def fetch_all(database_url: str, query: str):
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetch(query)
    finally:
        await conn.close()


async def assert_exactly_once(database_url: str, values: list[bytes], published) -> None:
    """Every game applied once: 2 history rows per game, versions 1..n per rating, all published."""
    history = await fetch_all(
        database_url, "SELECT event_id, player_id, system, category, version FROM rating_changes")
    assert len(history) == 2 * len(values)
    per_game = Counter(r["event_id"] for r in history)
    assert set(per_game.values()) == {1}
    versions: dict = {}
    for r in history:
        versions.setdefault((r["player_id"], r["system"], r["category"]), []).append(r["version"])
    for key, vs in versions.items():
        assert sorted(vs) == list(range(1, len(vs) + 1)), key
    ratings = await fetch_all(database_url, "SELECT player_id, system, category, games, version FROM ratings")
    for r in ratings:
        key = (r["player_id"], r["system"], r["category"])
        assert r["games"] == r["version"] == len(versions[key])
    expected_games = Counter()
    for v in values:
        d = orjson.loads(v)["data"]
        expected_games[d["white"]["player_id"]] += 1
        expected_games[d["black"]["player_id"]] += 1
    per_player = Counter()
    for r in ratings:
        per_player[r["player_id"]] += r["games"]
    assert per_player == expected_games
    published_ids = {orjson.loads(r.value)["id"] for r in published}
    history_ids = {r["event_id"] for r in history}
    assert history_ids <= published_ids, "a committed change was never published"
    assert published_ids <= history_ids, "something was published that was never committed"


async def test_sigkill_at_random_points_applies_every_game_exactly_once(database_url, broker, tmp_path):
    topics = await make_topics(broker, partitions=3)
    values = games(5000, players=100, seed=21)
    env = worker_env(database_url, broker, topics, batch_size=200)
    rng = random.Random(5)
    producer = asyncio.create_task(_produce_slowly(broker.bootstrap_servers, topics.input, values, per_second=2500))
    for _ in range(4):
        worker = WorkerProcess(env, tmp_path / "worker.log")
        await asyncio.sleep(rng.uniform(2.5, 5.0))
        worker.signal(signal.SIGKILL)
        worker.wait()
    await producer
    worker = WorkerProcess(env, tmp_path / "worker.log")
    try:
        assert await wait_processed(database_url, 5000, timeout=180) == 5000
        published = await read_topic(broker.bootstrap_servers, topics.output, at_least=10000, timeout=120)
        await assert_exactly_once(database_url, values, published)
    finally:
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0


async def _produce_slowly(bootstrap: str, topic: str, values: list[bytes], per_second: int) -> None:
    chunk = per_second // 10
    for i in range(0, len(values), chunk):
        await produce(bootstrap, topic, values[i:i + chunk], key_of=player_of)
        await asyncio.sleep(0.1)


def _readyz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


async def test_postgres_unreachable_midstream_pauses_and_resumes(postgres, database_url, broker, topics):
    host_port = database_url.split("@", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    proxy = await TcpProxy(host, int(port)).start()
    proxied = database_url.replace(host_port, f"127.0.0.1:{proxy.port}")
    metrics_port = dev.free_port()
    cfg = worker_config(proxied, broker, topics, metrics_port=metrics_port, metrics_host="127.0.0.1",
                        batch_size=100, retry_backoff_max_s=1)
    values = games(1500, players=40, seed=22)
    try:
        async with running_worker(cfg):
            await produce(broker.bootstrap_servers, topics.input, values[:500])
            assert await wait_processed(database_url, 500) == 500
            proxy.cut()
            await produce(broker.bootstrap_servers, topics.input, values[500:])
            saw_not_ready = False
            for _ in range(50):
                await asyncio.sleep(0.2)
                if await asyncio.to_thread(_readyz, metrics_port) == 503:
                    saw_not_ready = True
                    break
            assert saw_not_ready, "/readyz kept answering 200 while the database was unreachable"
            await asyncio.sleep(3)
            proxy.restore()
            assert await wait_processed(database_url, 1500) == 1500
            assert await asyncio.to_thread(_readyz, metrics_port) == 200
            published = await read_topic(broker.bootstrap_servers, topics.output, at_least=3000)
    finally:
        await proxy.stop()
    await assert_exactly_once(database_url, values, published)


async def test_three_workers_on_six_partitions(database_url, broker, tmp_path):
    topics = await make_topics(broker, partitions=6)
    values = games(5000, players=20, seed=23)
    env = worker_env(database_url, broker, topics, batch_size=200)
    workers = [WorkerProcess(env, tmp_path / f"worker{i}.log") for i in range(3)]
    try:
        await produce(broker.bootstrap_servers, topics.input, values, key_of=player_of)
        assert await wait_processed(database_url, 5000, timeout=240) == 5000
        published = await read_topic(broker.bootstrap_servers, topics.output, at_least=10000, timeout=120)
    finally:
        for w in workers:
            w.signal(signal.SIGTERM)
        codes = [w.wait() for w in workers]
    logs = "".join((tmp_path / f"worker{i}.log").read_text() for i in range(3))
    assert "deadlock" not in logs.lower() and "could not serialize" not in logs.lower()
    assert codes == [0, 0, 0]
    await assert_exactly_once(database_url, values, published)


async def test_sigterm_exits_0_with_offsets_committed(database_url, broker, topics, tmp_path):
    values = games(400, players=10, seed=24)
    await produce(broker.bootstrap_servers, topics.input, values)
    worker = WorkerProcess(worker_env(database_url, broker, topics), tmp_path / "worker.log")
    assert await wait_processed(database_url, 400) == 400
    await asyncio.sleep(0.5)
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    assert await committed_offsets(broker.bootstrap_servers, topics.input, topics.group, 1) == {0: 400}
