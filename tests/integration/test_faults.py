"""Faults (issue 9): the worker against a database that is cut, reset at its COMMIT or slow, a broker
that is cut, paused or restarted empty, kills between its commits, rebalances in the middle of batches
and a consumer that cannot make progress.

Every test ends with the same check (`assert_invariants`): nothing lost (every message processed once:
`processed_messages` holds exactly the stream's ids), nothing applied twice (two history rows per game,
each rating's versions 1..n without gaps, its `games` and `version` equal to n, each player's number of
games as in the stream), and every change published (each `rating_changes.event_id` seen on the output
topic at least once, nothing on it that is not in `rating_changes`, the outbox empty).

The database faults go through our TcpProxy (worker/dev/proxy.py). The broker cut goes through it too: the
proxy only sees the clients' traffic if the broker advertises the proxy's address in its metadata, so
those tests start their own Tansu with `--advertised-listener-url` pointing at the proxy. The broker
pause and restart tests start their own broker as well (they stop or empty it).

`FAULTS_BROKER_PAUSE_S` sets how long the broker stays paused: a minute by default (issue 9's case);
`FAULTS_BROKER_PAUSE_S=20` shortens it locally.

Readiness: a database cut, a broker cut (idle or mid-stream) and a paused broker each turn /readyz to 503
within a bound (the broker probe: a metadata request every 5 s, given 5 s), naming the failing side only,
and back to 200 afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import signal
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import asyncpg
import orjson
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient

from tests.integration.harness import (
    Topics,
    committed_offsets,
    make_topics,
    produce,
    wait_processed,
    worker_config,
    worker_env,
)
from tests.integration.test_worker_end_to_end import running_worker, stored_ratings
from worker import dev
from worker.commands.replay import replay
from worker.commands.run import WATCHDOG_EXIT_CODE
from worker.config import ConfigError
from worker.config import load as load_config
from worker.dev.proxy import PG_COMMIT, TcpProxy
from worker.dev.streams import games, player_of
from worker.observability import Metrics

BROKER_PAUSE_S = float(os.environ.get("FAULTS_BROKER_PAUSE_S", "60"))
# How long /readyz may take to notice the broker gone: the probe runs every 5 s and waits 5 s for an
# answer (a refused connection fails at once). Well below the 30 s after which a publish gives up, so
# these bounds fail if readiness only followed failed operations.
BROKER_NOT_READY_WITHIN_S = 20.0


# ---- the invariants ---------------------------------------------------------------------------------


async def fetch(database_url: str, query: str):
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetch(query)
    finally:
        await conn.close()


async def history_ids(database_url: str) -> set[str]:
    return {r["event_id"] for r in await fetch(database_url, "SELECT event_id FROM rating_changes")}


async def published_ids(bootstrap: str, topic: str, expect: set[str], timeout: float = 90.0) -> set[str]:
    """The ids of every rating.changed on `topic`, read from the start until `expect` are all there
    (the relay may publish some late) or `timeout`; then what else is there right now."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                seen.update(orjson.loads(r.value)["id"] for r in records)
            if (expect <= seen and not any(batch.values())) or time.monotonic() > deadline:
                return seen
    finally:
        await consumer.stop()


async def assert_invariants(database_url: str, values: list[bytes], published: set[str],
                            in_order: bool = False) -> None:
    """Each message applied once, versions without gaps, every change published and nothing else. With
    `in_order` (one input partition: the worker applied the messages in the order sent), the ratings also
    equal a replay's: a retried batch that used a stale plan would keep the counts right and the values not."""
    ids = [orjson.loads(v)["id"] for v in values]
    processed = await fetch(database_url, "SELECT id FROM processed_messages")
    assert len(processed) == len(set(ids)), "processed_messages does not hold each message exactly once"
    assert {r["id"] for r in processed} == set(ids), "a message was lost"

    history = await fetch(database_url,
                          "SELECT event_id, player_id, system, category, version, cause_id FROM rating_changes")
    per_game = Counter(r["cause_id"] for r in history)
    assert set(per_game) == set(ids) and set(per_game.values()) == {2}, "a game applied twice, or not at all"
    versions: dict = {}
    for r in history:
        versions.setdefault((r["player_id"], r["system"], r["category"]), []).append(r["version"])
    for key, vs in versions.items():
        assert sorted(vs) == list(range(1, len(vs) + 1)), f"versions of {key} have gaps or repeats"
    ratings = await fetch(database_url, "SELECT player_id, system, category, games, version FROM ratings")
    assert len(ratings) == len(versions)
    for r in ratings:
        n = len(versions[(r["player_id"], r["system"], r["category"])])
        assert r["games"] == r["version"] == n, (r, n)
    expected_games, stored_games = Counter(), Counter()
    for v in values:
        d = orjson.loads(v)["data"]
        expected_games[d["white"]["player_id"]] += 1
        expected_games[d["black"]["player_id"]] += 1
    for r in ratings:
        stored_games[r["player_id"]] += r["games"]
    assert stored_games == expected_games

    committed = {r["event_id"] for r in history}
    assert committed - published == set(), f"{len(committed - published)} committed changes never published"
    assert published - committed == set(), "something was published that was never committed"
    deadline = time.monotonic() + 30
    while (n := (await fetch(database_url, "SELECT count(*) AS n FROM outbox"))[0]["n"]) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert n == 0, f"{n} changes still in the outbox although all were seen on the topic"
    if in_order:
        await assert_equal_to_replay(database_url, values)


async def assert_equal_to_replay(database_url: str, values: list[bytes]) -> None:
    memory = await replay(values, io.BytesIO())
    stored = await stored_ratings(database_url)
    assert len(stored) == len(memory.states)
    for key, state in memory.states.items():
        row = stored[tuple(key)]
        assert (row["rating"], row["rd"], row["volatility"]) == pytest.approx(
            (state.rating, state.rd, state.volatility), abs=1e-9), key
        assert (row["games"], row["version"]) == (state.games, state.version), key


# ---- helpers ----------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def database_proxy(database_url: str):
    """A TcpProxy in front of the test's PostgreSQL, and the database URL through it."""
    host_port = database_url.split("@", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    proxy = await TcpProxy(host, int(port)).start()
    try:
        yield proxy, database_url.replace(host_port, proxy.address)
    finally:
        await proxy.stop()


class _AdvertisedBroker(dev.EmbeddedBroker):
    """A memory-only Tansu broker that advertises another address (our proxy) in its metadata, so that
    every client connection, not only the bootstrap one, goes through the proxy. (dev.start_broker
    advertises the listener itself; the command is EmbeddedBroker._spawn's with that one flag changed.)"""

    def __init__(self, advertised_port: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.advertised = f"tcp://127.0.0.1:{advertised_port}"

    def _spawn(self, timeout: float) -> None:
        cmd = [dev.tansu_binary(), "broker", "--listener-url", f"tcp://{self.host}:{self.port}",
               "--advertised-listener-url", self.advertised, "--storage-engine", "memory://tansu/",
               "--cluster-id", "rating-faults"]
        drop = {"CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "SCHEMA_REGISTRY",
                "OTEL_EXPORTER_OTLP_ENDPOINT"}
        env = {k: v for k, v in os.environ.items() if k not in drop} | {"NO_COLOR": "1"}
        self._proc = dev.processes.spawn_child(cmd, self.log_path, env, self.base_dir)
        with dev.processes.live_lock:
            dev.processes.live.add(self)  # stopped at exit, whatever happens to the test
        self._stopped = False
        self._wait_ready(timeout)


@contextlib.asynccontextmanager
async def proxied_broker():
    """A broker of its own whose every client connection goes through a TcpProxy: (proxy, broker), where
    `proxy.address` is the bootstrap address to give clients."""
    port = dev.free_port()
    proxy = await TcpProxy("127.0.0.1", port).start()
    base = Path(dev.processes.new_base_dir("kafka-proxied"))
    broker = _AdvertisedBroker(proxy.port, base_dir=base, port=port, keep=False)
    try:
        # From a thread: its readiness probe goes through the proxy, which runs on this event loop.
        await asyncio.to_thread(broker._spawn, 30.0)
        yield proxy, broker
    finally:
        await proxy.stop()
        broker.stop()


def _http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def readyz(port: int) -> int:
    return (await asyncio.to_thread(_http_get, port, "/readyz"))[0]


async def wait_readyz(port: int, status: int, within: float, what: str) -> str:
    """Poll /readyz until it answers `status` (at most `within` seconds); its body then."""
    deadline = time.monotonic() + within
    while True:
        code, body = await asyncio.to_thread(_http_get, port, "/readyz")
        if code == status:
            return body
        assert time.monotonic() < deadline, f"/readyz still {code} {body.strip()!r} {within:.0f} s after {what}"
        await asyncio.sleep(0.25)


def sample(metrics: Metrics, name: str, **labels) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await asyncio.sleep(0.05)


async def produce_steadily(bootstrap: str, topic: str, values: list[bytes], per_second: int) -> None:
    chunk = max(1, per_second // 10)
    for i in range(0, len(values), chunk):
        await produce(bootstrap, topic, values[i:i + chunk], key_of=player_of)
        await asyncio.sleep(0.1)


# ---- PostgreSQL ---------------------------------------------------------------------------------------


async def test_database_cut_for_30s_mid_batch(database_url, broker, topics):
    """The proxy drops a batch's COMMIT (the batch has locked, rated and written everything) and then
    refuses every connection for 30 s: the batch is rolled back by the server, /readyz answers 503,
    and after the cut the batches are redone behind each other, once."""
    values = games(2000, players=60, seed=91)
    metrics_port = dev.free_port()
    metrics = Metrics()
    async with database_proxy(database_url) as (proxy, proxied):
        cfg = worker_config(proxied, broker, topics, batch_size=100, retry_backoff_max_s=1,
                            metrics_port=metrics_port, metrics_host="127.0.0.1")
        async with running_worker(cfg, metrics):
            await produce(broker.bootstrap_servers, topics.input, values[:300])
            assert await wait_processed(database_url, 300) == 300
            proxy.reset_on(PG_COMMIT, deliver=False, cut=True)
            await produce(broker.bootstrap_servers, topics.input, values[300:])
            await wait_until(lambda: proxy.traps_fired == 1, 60, "a batch's COMMIT")
            cut_at = time.monotonic()
            body = await wait_readyz(metrics_port, 503, 10, "the database cut")
            assert sample(metrics, "rating_worker_ready") == 0
            bodies = {body}
            while time.monotonic() - cut_at < 30:
                bodies.add((await asyncio.to_thread(_http_get, metrics_port, "/readyz"))[1])
                await asyncio.sleep(0.5)
            assert all("database: batch" in b for b in bodies), f"/readyz became ready during the cut: {bodies}"
            assert not any("broker" in b for b in bodies), f"the broker is fine, /readyz blames it: {bodies}"
            assert proxy.refused > 0, "nobody tried to reconnect during the cut"
            applied_during_cut = await wait_processed(database_url, 0)
            proxy.restore()
            await wait_readyz(metrics_port, 200, 30, "the database came back")
            assert await wait_processed(database_url, 2000, timeout=180) == 2000
            assert await readyz(metrics_port) == 200 and sample(metrics, "rating_worker_ready") == 1
            assert applied_during_cut < 2000
    assert sample(metrics, "rating_worker_db_retries_total") >= 1
    expect = await history_ids(database_url)
    await assert_invariants(database_url, values, await published_ids(broker.bootstrap_servers, topics.output, expect),
                            in_order=True)


@pytest.mark.parametrize("deliver", [False, True], ids=["commit-lost", "commit-answer-lost"])
async def test_connection_reset_during_commit(database_url, broker, topics, deliver):
    """Every connection is reset at a batch's COMMIT. commit-lost: the COMMIT never reaches PostgreSQL,
    which rolls the batch back; it is applied by the retry (no message is seen twice). commit-answer-lost:
    PostgreSQL commits but the worker never hears of it; the retry finds the batch's ids already
    processed and skips them (counted as duplicates), and the outbox relay publishes the first
    attempt's changes. How precisely the proxy hits the COMMIT: see worker/dev/proxy.py."""
    values = games(800, players=40, seed=92)
    metrics = Metrics()
    async with database_proxy(database_url) as (proxy, proxied):
        cfg = worker_config(proxied, broker, topics, batch_size=100, retry_backoff_max_s=1)
        async with running_worker(cfg, metrics):
            await produce(broker.bootstrap_servers, topics.input, values[:200])
            assert await wait_processed(database_url, 200) == 200
            proxy.reset_on(PG_COMMIT, deliver=deliver)
            await produce(broker.bootstrap_servers, topics.input, values[200:])
            await wait_until(lambda: proxy.traps_fired == 1, 60, "a batch's COMMIT")
            assert await wait_processed(database_url, 800) == 800
            expect = await history_ids(database_url)
            published = await published_ids(broker.bootstrap_servers, topics.output, expect)
    assert sample(metrics, "rating_worker_db_retries_total") >= 1
    duplicates = sample(metrics, "rating_worker_messages_total", type="game.finished", outcome="duplicate", reason="")
    if deliver:
        assert duplicates >= 1, "the COMMIT whose answer was lost did not commit"
    else:
        assert duplicates == 0, "the COMMIT that never arrived committed"
    await assert_invariants(database_url, values, published, in_order=True)


async def test_slow_database_every_query_200ms(database_url, broker, topics):
    """Every chunk the worker sends PostgreSQL (each query) waits 200 ms in the proxy: slower, same result."""
    values = games(300, players=30, seed=93)
    async with database_proxy(database_url) as (proxy, proxied):
        proxy.upstream_delay = 0.2
        cfg = worker_config(proxied, broker, topics, batch_size=100)
        async with running_worker(cfg):
            await produce(broker.bootstrap_servers, topics.input, values)
            assert await wait_processed(database_url, 300, timeout=180) == 300
            expect = await history_ids(database_url)
            published = await published_ids(broker.bootstrap_servers, topics.output, expect)
    assert proxy.delayed_chunks >= 20, "the delay was not in the worker's path"
    await assert_invariants(database_url, values, published, in_order=True)


# ---- the broker -----------------------------------------------------------------------------------------


async def test_broker_cut_for_30s_through_a_proxy(database_url):
    """Every broker connection (the broker advertises the proxy) is reset and refused for 30 s while
    batches are in flight: fetching, publishing and offset commits wait or retry, /readyz answers 503
    (the broker probe, well before a publish gives up); afterwards the worker carries on, /readyz is 200
    again, and everything committed is published once the broker is back."""
    values = games(4000, players=60, seed=94)
    metrics_port = dev.free_port()
    metrics = Metrics()
    async with proxied_broker() as (proxy, broker):
        bootstrap = proxy.address
        topics = await _own_topics(bootstrap, partitions=3)
        cfg = load_config(env=worker_env(database_url, _Bootstrap(bootstrap), topics, batch_size=100,
                                         retry_backoff_max_s=1, metrics_port=metrics_port,
                                         metrics_host="127.0.0.1"))
        await produce(bootstrap, topics.input, values, key_of=player_of)
        async with running_worker(cfg, metrics):
            assert await wait_processed(database_url, 400) >= 400
            proxy.cut()
            cut_at = time.monotonic()
            body = await wait_readyz(metrics_port, 503, BROKER_NOT_READY_WITHIN_S, "the broker cut")
            assert "broker: probe" in body and sample(metrics, "rating_worker_ready") == 0
            await asyncio.sleep(max(0.0, 30 - (time.monotonic() - cut_at)))
            assert await readyz(metrics_port) == 503, "ready again with the broker still cut"
            during = await wait_processed(database_url, 0)
            refused = proxy.refused
            proxy.restore()
            assert refused > 0, "nobody tried to reconnect during the cut"
            assert during < 4000, "the stream was over before the cut: nothing was in flight"
            await wait_readyz(metrics_port, 200, 60, "the broker came back")
            assert await wait_processed(database_url, 4000, timeout=180) == 4000
            expect = await history_ids(database_url)
            published = await published_ids(bootstrap, topics.output, expect)
            assert await readyz(metrics_port) == 200 and sample(metrics, "rating_worker_ready") == 1
    await assert_invariants(database_url, values, published)


async def test_readyz_follows_the_broker_of_an_idle_worker(database_url):
    """A worker with nothing to do sends the broker no request that could fail, only fetches that aiokafka
    keeps to itself: the broker probe is what turns /readyz to 503 during a cut, and back to 200 after."""
    values = games(200, players=20, seed=90)
    metrics_port = dev.free_port()
    metrics = Metrics()
    async with proxied_broker() as (proxy, broker):
        bootstrap = proxy.address
        topics = await _own_topics(bootstrap, partitions=1)
        cfg = load_config(env=worker_env(database_url, _Bootstrap(bootstrap), topics, retry_backoff_max_s=1,
                                         metrics_port=metrics_port, metrics_host="127.0.0.1"))
        await produce(bootstrap, topics.input, values, key_of=player_of)
        async with running_worker(cfg, metrics):
            assert await wait_processed(database_url, 200) == 200
            expect = await history_ids(database_url)
            published = await published_ids(bootstrap, topics.output, expect)
            await wait_readyz(metrics_port, 200, 30, "the stream was applied")
            proxy.cut()
            body = await wait_readyz(metrics_port, 503, BROKER_NOT_READY_WITHIN_S, "the broker cut of an idle worker")
            assert body == "not ready: broker: probe\n" and sample(metrics, "rating_worker_ready") == 0
            proxy.restore()
            await wait_readyz(metrics_port, 200, 30, "the broker came back")
            assert sample(metrics, "rating_worker_ready") == 1
    await assert_invariants(database_url, values, published)


class _Bootstrap:
    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers


async def _own_topics(bootstrap: str, partitions: int) -> Topics:
    return await make_topics(_Bootstrap(bootstrap), partitions=partitions)


async def test_broker_paused(database_url, own_broker, workers):
    """The broker process is stopped (SIGSTOP: connections stay open, nothing answers) for
    FAULTS_BROKER_PAUSE_S seconds (a minute) in the middle of a stream, then resumed. The broker probe's
    unanswered request turns /readyz to 503; it is 200 again once the broker answers."""
    topics = await make_topics(own_broker, partitions=3)
    values = games(4000, players=60, seed=95)
    await produce(own_broker.bootstrap_servers, topics.input, values, key_of=player_of)
    metrics_port = dev.free_port()
    w = workers.start(worker_env(database_url, own_broker, topics, batch_size=100, retry_backoff_max_s=1,
                                 metrics_port=metrics_port, metrics_host="127.0.0.1"))
    assert await wait_processed(database_url, 400) >= 400
    own_broker.pause()
    paused_at = time.monotonic()
    try:
        body = await wait_readyz(metrics_port, 503, min(BROKER_NOT_READY_WITHIN_S, BROKER_PAUSE_S),
                                 "the broker was paused")
        assert "broker: probe" in body
        await asyncio.sleep(max(0.0, BROKER_PAUSE_S - (time.monotonic() - paused_at)))
        during = await wait_processed(database_url, 0)
        assert await readyz(metrics_port) == 503, "ready again with the broker still paused"
    finally:
        own_broker.resume()
    assert during < 4000, "the stream was over before the pause"
    await wait_readyz(metrics_port, 200, 90, "the broker was resumed")
    assert await wait_processed(database_url, 4000, timeout=180) == 4000
    expect = await history_ids(database_url)
    published = await published_ids(own_broker.bootstrap_servers, topics.output, expect)
    assert await workers.stop(w) == 0
    await assert_invariants(database_url, values, published)


async def test_broker_restarted_empty(database_url, own_broker, workers):
    """The memory-only broker restarts: topics, messages, the group's offsets and every rating.changed are
    gone. The worker reports it (an ERROR line per partition, rating_worker_offsets_went_back_total) and
    applies nothing twice: the processed ids in PostgreSQL skip what the producers send again. The
    operator's steps of docs/operations.md are followed: topics recreated, the worker rejoined, the lost
    rating.changed put back in the outbox for the relay, the producers' messages sent again."""
    port = own_broker.port
    topics = await make_topics(own_broker, partitions=3)
    values = games(1200, players=50, seed=96)
    metrics_port = dev.free_port()
    env = worker_env(database_url, own_broker, topics, batch_size=100, retry_backoff_max_s=1,
                     metrics_port=metrics_port, metrics_host="127.0.0.1")
    w = workers.start(env)
    await produce(own_broker.bootstrap_servers, topics.input, values[:600], key_of=player_of)
    assert await wait_processed(database_url, 600) == 600
    await published_ids(own_broker.bootstrap_servers, topics.output, await history_ids(database_url))
    offsets = await wait_committed(own_broker.bootstrap_servers, topics, 3, total=600)
    assert all(offsets.values()), f"a partition without a committed offset: {offsets}"
    own_broker.stop()
    second = dev.start_broker(port)
    try:
        await dev.create_topics(second.bootstrap_servers, {topics.input: 3, topics.output: 3, topics.dlq: 1})
        await wait_for_group_member(second.bootstrap_servers, topics.group)
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute("INSERT INTO outbox (change_id) SELECT id FROM rating_changes ON CONFLICT DO NOTHING")
        finally:
            await conn.close()
        await produce(second.bootstrap_servers, topics.input, values, key_of=player_of)
        assert await wait_processed(database_url, 1200) == 1200
        published = await published_ids(second.bootstrap_servers, topics.output, await history_ids(database_url))
        status, body = await asyncio.to_thread(_http_get, metrics_port, "/metrics")
        assert await workers.stop(w) == 0
    finally:
        second.stop()
    assert f'rating_worker_offsets_went_back_total{{topic="{topics.input}"}} 3.0' in body
    went_back = [orjson.loads(line) for line in workers.log().splitlines() if "partition went back" in line]
    assert sorted(e["partition"] for e in went_back) == [0, 1, 2]
    assert all(e["level"] == "error" and e["committed"] == offsets[e["partition"]] for e in went_back)
    await assert_invariants(database_url, values, published)


async def wait_committed(bootstrap: str, topics: Topics, partitions: int, total: int, timeout: float = 60) -> dict:
    """The group's committed offsets, once they add up to `total` (every record's offset committed)."""
    deadline = time.monotonic() + timeout
    while True:
        offsets = await committed_offsets(bootstrap, topics.input, topics.group, partitions)
        if sum(o or 0 for o in offsets.values()) >= total:
            return offsets
        assert time.monotonic() < deadline, f"offsets not all committed: {offsets}"
        await asyncio.sleep(0.2)


async def wait_for_group_member(bootstrap: str, group: str, timeout: float = 60) -> None:
    """Until the group has a member again (the worker noticed the new broker and rejoined)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        deadline = time.monotonic() + timeout
        while True:
            described = (await admin.describe_consumer_groups([group]))[0].groups[0]
            if described[2] == "Stable" and described[5]:
                return
            assert time.monotonic() < deadline, f"the worker did not rejoin {group}: {described}"
            await asyncio.sleep(0.2)
    finally:
        await admin.close()


# ---- the worker killed between its commits ------------------------------------------------------------


@pytest.mark.parametrize("point", ["kill_after_commit", "kill_after_publish"])
async def test_sigkill_between_the_database_commit_and_the_offset_commit(database_url, broker, workers, point):
    """RATING_WORKER_FAULT makes the worker SIGKILL itself in its 3rd batch: after the database commit
    (nothing published: the relay of the next worker publishes it) or after publishing (offsets not
    committed: the next worker gets the batch again and skips it)."""
    topics = await make_topics(broker, partitions=3)
    values = games(1500, players=50, seed=97)
    await produce(broker.bootstrap_servers, topics.input, values, key_of=player_of)
    env = worker_env(database_url, broker, topics, batch_size=100)
    first = workers.start({**env, "RATING_WORKER_FAULT": f"{point}:3"}, "first")
    assert await workers.wait(first) == -signal.SIGKILL
    assert f'"point":"{point}"' in workers.log("first") and '"batch":3' in workers.log("first")
    processed = await wait_processed(database_url, 0)
    offsets = await committed_offsets(broker.bootstrap_servers, topics.input, topics.group, 3)
    assert 0 < sum(o or 0 for o in offsets.values()) < processed, "the database should be ahead of the offsets"
    outbox = (await fetch(database_url, "SELECT count(*) AS n FROM outbox"))[0]["n"]
    if point == "kill_after_commit":
        assert outbox > 0, "the killed batch's changes should be waiting in the outbox"

    second = workers.start(env, "second")
    assert await wait_processed(database_url, 1500) == 1500
    expect = await history_ids(database_url)
    published = await published_ids(broker.bootstrap_servers, topics.output, expect)
    assert await workers.stop(second) == 0
    if point == "kill_after_commit":
        assert "relay published changes left unpublished" in workers.log("second")
    await assert_invariants(database_url, values, published)


# ---- rebalances -----------------------------------------------------------------------------------------


async def test_a_second_worker_joins_and_leaves_during_a_stream(database_url, broker, workers):
    """One worker consumes 6 partitions while games stream in; a second one joins and leaves five times
    (SIGTERM, or SIGKILL: then its partitions come back after the session timeout). Each join and leave
    is a rebalance that takes partitions away in the middle of batches."""
    topics = await make_topics(broker, partitions=6)
    values = games(6000, players=80, seed=98)
    env = worker_env(database_url, broker, topics, batch_size=200)
    steady = workers.start(env, "steady")
    stream = asyncio.create_task(produce_steadily(broker.bootstrap_servers, topics.input, values, per_second=300))
    codes = []
    for i in range(5):
        await asyncio.sleep(1.0)
        guest = workers.start(env, f"guest{i}")
        await asyncio.sleep(3.5)
        if i % 2:
            guest.signal(signal.SIGKILL)
        else:
            guest.signal(signal.SIGTERM)
        codes.append(await workers.wait(guest))
    await stream
    assert await wait_processed(database_url, 6000, timeout=180) == 6000
    expect = await history_ids(database_url)
    published = await published_ids(broker.bootstrap_servers, topics.output, expect)
    assert await workers.stop(steady) == 0
    assert codes == [0, -signal.SIGKILL, 0, -signal.SIGKILL, 0]
    # The guests did take partitions: the ones stopped cleanly say how many batches they completed.
    guest_batches = [orjson.loads(line)["batches"] for i in (0, 2, 4) for line in workers.log(f"guest{i}").splitlines()
                     if '"worker stopped"' in line]
    assert sum(guest_batches) > 0, "the second worker never got partitions: no rebalance was tested"
    await assert_invariants(database_url, values, published)


# ---- the watchdog -----------------------------------------------------------------------------------------


async def test_watchdog_exits_a_worker_that_cannot_progress(database_url, broker, topics, workers):
    """WATCHDOG_TIMEOUT_S=4: an idle worker stays up longer than that; once records are waiting and the
    database is cut for good, the worker exits with code 75 and an ERROR line. Restarted with the
    database back, it applies everything once."""
    values = games(500, players=30, seed=99)
    async with database_proxy(database_url) as (proxy, proxied):
        env = worker_env(proxied, broker, topics, batch_size=100, watchdog_timeout_s=4, db_command_timeout_s=2,
                         retry_backoff_max_s=1)
        w = workers.start(env, "stuck")
        await produce(broker.bootstrap_servers, topics.input, values[:200])
        assert await wait_processed(database_url, 200) == 200
        await asyncio.sleep(6)
        assert w.proc.poll() is None, "the watchdog stopped an idle worker"
        proxy.cut()
        await produce(broker.bootstrap_servers, topics.input, values[200:])
        assert await workers.wait(w, timeout=90) == WATCHDOG_EXIT_CODE
        lines = [orjson.loads(line) for line in workers.log("stuck").splitlines() if "watchdog" in line]
        assert any(e["level"] == "error" and e["exit_code"] == WATCHDOG_EXIT_CODE for e in lines)
        proxy.restore()
        again = workers.start(env, "restarted")
        assert await wait_processed(database_url, 500) == 500
        expect = await history_ids(database_url)
        published = await published_ids(broker.bootstrap_servers, topics.output, expect)
        assert await workers.stop(again) == 0
    await assert_invariants(database_url, values, published)


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "60", "30"])
def test_watchdog_timeout_must_be_off_or_longer_than_one_database_call(value):
    env = {"DATABASE_URL": "postgresql://db/r", "KAFKA_BOOTSTRAP_SERVERS": "k:9092", "WATCHDOG_TIMEOUT_S": value}
    with pytest.raises(ConfigError, match="WATCHDOG_TIMEOUT_S"):
        load_config(env=env)


def test_watchdog_timeout_default_and_off():
    env = {"DATABASE_URL": "postgresql://db/r", "KAFKA_BOOTSTRAP_SERVERS": "k:9092"}
    assert load_config(env=env).watchdog_timeout_s == 300
    assert load_config(env={**env, "WATCHDOG_TIMEOUT_S": "0"}).watchdog_timeout_s == 0
    assert load_config(env={**env, "WATCHDOG_TIMEOUT_S": "61"}).watchdog_timeout_s == 61
