"""`./dev bench soak`: one worker process under a steady stream and periodic faults, for a bounded time.

Games are produced at a steady rate while one `rating-worker run` process consumes them through a
TcpProxy in front of PostgreSQL (worker/dev/proxy.py). Every BENCH_SOAK_FAULT_EVERY_S seconds a fault is
injected, in the order of BENCH_SOAK_FAULTS (repeated):
  cut   every PostgreSQL connection is reset and refused for BENCH_SOAK_CUT_S seconds;
  kill  the worker gets SIGKILL and is started again at once (as its supervisor would).
At the end (the stream stopped, everything applied and published, or a deadline) it reports:
- throughput: the rate sent, games per second end to end (first send to last applied), the best 5 s;
- latency from each game's send to the arrival of its first rating.changed: p50 / p99 / max, for all
  games and for those sent away from faults (not from 1 s before a fault to 15 s after it);
- the worker's RSS (VmRSS from /proc/PID/status, every 2 s) over time: first / last / max per process
  (a restart starts a new process; "first" is 20 s in, once caches and connections are up) and a
  sample every 30 s; it must stay flat;
- every 30 s, besides progress and RSS, the worker's own view of its batches (from its /metrics:
  how many, their mean size and consume-to-offset-commit time) and the CPU the worker and the embedded
  broker used (a share of one core: the broker's grows with its log, docs/operations.md);
- the consistency check of tests/integration/test_faults.py: each game applied once (processed ids,
  two history rows per game, versions 1..n without gaps, ratings.games = version = n, each player's
  number of games), every change published at least once and nothing else published, the outbox empty.
Exit status 0 when consistent, 1 otherwise.

Settings (environment): BENCH_SOAK_SECONDS (600: how long games are sent), BENCH_SOAK_RATE (500 games/s),
BENCH_SOAK_PLAYERS (2000), BENCH_SOAK_FAULT_EVERY_S (60), BENCH_SOAK_FAULTS ("cut,cut,kill"),
BENCH_SOAK_CUT_S (5), BENCH_SOAK_BATCH (1000: the worker's BATCH_SIZE). DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS
use running services instead of the embedded ones (PostgreSQL as for the other benchmarks: durable
commits, production sizing; bench/common.py PG_SETTINGS).
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import asyncpg
import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.common import PG_SETTINGS, fresh_db, rss_mib, start_worker, worker_env
from worker import dev
from worker.dev.proxy import TcpProxy
from worker.dev.streams import games, player_of

SECONDS = float(os.environ.get("BENCH_SOAK_SECONDS", "600"))
RATE = int(os.environ.get("BENCH_SOAK_RATE", "500"))
PLAYERS = int(os.environ.get("BENCH_SOAK_PLAYERS", "2000"))
FAULT_EVERY_S = float(os.environ.get("BENCH_SOAK_FAULT_EVERY_S", "60"))
FAULTS = [f.strip() for f in os.environ.get("BENCH_SOAK_FAULTS", "cut,cut,kill").split(",") if f.strip()]
CUT_S = float(os.environ.get("BENCH_SOAK_CUT_S", "5"))
BATCH = int(os.environ.get("BENCH_SOAK_BATCH", "1000"))
TAG = "soak"


class ThreadedProxy:
    """The TcpProxy on an event loop of its own, in a thread: the PostgreSQL traffic it carries does not
    wait for this process's producer and consumer (the latency measured is the worker's)."""

    def __init__(self, host: str, port: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="soak-proxy", daemon=True)
        self.thread.start()
        self.proxy = self._call(TcpProxy(host, port).start())

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    @property
    def address(self) -> str:
        return self.proxy.address

    def cut(self) -> None:
        self.loop.call_soon_threadsafe(self.proxy.cut)

    def restore(self) -> None:
        self.loop.call_soon_threadsafe(self.proxy.restore)

    def stop(self) -> None:
        self._call(self.proxy.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class Worker:
    """The worker process, restarted after each kill; its RSS sampled while it runs."""

    def __init__(self, env: dict, log: Path) -> None:
        self.env, self.log = env, log
        self.proc: subprocess.Popen | None = None
        self.rss: list[tuple[float, int, int]] = []  # (time since the start of the soak, pid, kB)
        self.kills = 0

    def start(self) -> None:
        self.proc = start_worker(self.env, self.log)

    async def kill_and_restart(self) -> None:
        self.proc.kill()
        await asyncio.to_thread(self.proc.wait, 30)
        self.kills += 1
        self.start()

    def sample_rss(self, t: float) -> None:
        mib = rss_mib(self.proc.pid)
        if mib:
            self.rss.append((t, self.proc.pid, int(mib * 1024)))

    async def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self.proc.wait, 60)


def _batch_metrics(port: int) -> tuple[float, float, float]:
    """(batches, their seconds, their messages) from the worker's /metrics; zeros when unreachable."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return 0.0, 0.0, 0.0
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("rating_worker_batch_duration_seconds_count", "rating_worker_batch_duration_seconds_sum",
                    "rating_worker_batch_size_sum"):
            values[name] = float(value)
    return (values.get("rating_worker_batch_duration_seconds_count", 0.0),
            values.get("rating_worker_batch_duration_seconds_sum", 0.0), values.get("rating_worker_batch_size_sum", 0.0))


async def _wait_for_member(bootstrap: str, group: str, timeout: float = 60) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            group_state = (await admin.describe_consumer_groups([group]))[0].groups[0]
            if group_state[2] == "Stable" and group_state[5]:
                return
            await asyncio.sleep(0.2)
        raise SystemExit(f"soak: the worker did not join its consumer group in {timeout:.0f} s")
    finally:
        await admin.close()


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of a process so far (None when it is gone or not ours to read)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS


class CpuShare:
    """The share of one core a process used between two readings ("" when it cannot be read)."""

    def __init__(self, pid: int | None) -> None:
        self.pid, self._last = pid, (time.perf_counter(), _cpu_seconds(pid))

    def reading(self, pid: int | None = None) -> str:
        if pid is not None and pid != self.pid:  # restarted: start again
            self.pid, self._last = pid, (time.perf_counter(), _cpu_seconds(pid))
            return "restarted"
        now, cpu = time.perf_counter(), _cpu_seconds(self.pid)
        (then, before), self._last = self._last, (now, cpu)
        if cpu is None or before is None or now <= then:
            return ""
        return f"{100 * (cpu - before) / (now - then):.0f}%"


def _percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, max(0, int(len(sorted_values) * q) - 1))]


async def consistency(url: str, values: list[bytes], published: set[str]) -> list[str]:
    """What is wrong (empty: nothing). The checks of tests/integration/test_faults.py, in SQL where large."""
    problems = []
    conn = await asyncpg.connect(url)
    try:
        n, distinct = await conn.fetchrow("SELECT count(*), count(DISTINCT (source, id)) FROM processed_messages")
        if n != len(values) or distinct != len(values):
            problems.append(f"processed_messages: {n} rows, {distinct} distinct, {len(values)} games sent")
        not_two = await conn.fetchval(
            "SELECT count(*) FROM (SELECT cause_id FROM rating_changes GROUP BY cause_id HAVING count(*) <> 2) x")
        games_in_history = await conn.fetchval("SELECT count(DISTINCT cause_id) FROM rating_changes")
        if not_two or games_in_history != len(values):
            problems.append(f"history: {not_two} games without exactly two rows, {games_in_history} games in it")
        gaps = await conn.fetchval(
            "SELECT count(*) FROM (SELECT count(*) AS n, min(version) AS lo, max(version) AS hi FROM rating_changes "
            "GROUP BY player_id, system, category) x WHERE lo <> 1 OR hi <> n")
        if gaps:
            problems.append(f"{gaps} ratings with gaps or repeats in their versions")
        wrong, ratings, keys = await conn.fetchrow(
            "SELECT count(*) FILTER (WHERE r.games IS DISTINCT FROM h.n OR r.version IS DISTINCT FROM h.n), "
            "count(r.player_id), count(h.player_id) "
            "FROM ratings r FULL JOIN (SELECT player_id, system, category, count(*) AS n FROM rating_changes "
            "GROUP BY 1, 2, 3) h USING (player_id, system, category)")
        if wrong or ratings != keys:
            problems.append(f"ratings: {wrong} whose games/version differ from their history ({ratings} vs {keys})")
        expected = Counter()
        for v in values:
            d = orjson.loads(v)["data"]
            expected[d["white"]["player_id"]] += 1
            expected[d["black"]["player_id"]] += 1
        stored = Counter({r[0]: r[1] for r in await conn.fetch(
            "SELECT player_id, sum(games)::int FROM ratings GROUP BY player_id")})
        if stored != expected:
            problems.append(f"{len(set(stored.items()) ^ set(expected.items()))} players with the wrong number of games")
        history = {r[0] for r in await conn.fetch("SELECT event_id FROM rating_changes")}
        if history - published:
            problems.append(f"{len(history - published)} committed changes never published")
        if published - history:
            problems.append(f"{len(published - history)} published changes that were never committed")
        outbox = await conn.fetchval("SELECT count(*) FROM outbox")
        if outbox:
            problems.append(f"{outbox} changes left in the outbox")
    finally:
        await conn.close()
    return problems


async def soak() -> int:
    pg = (dev.ExternalPostgres(os.environ["DATABASE_URL"]) if os.environ.get("DATABASE_URL")
          else dev.start_postgres(settings=PG_SETTINGS))
    broker = dev.broker_from_env_or_start()
    log = Path(tempfile.mkdtemp(prefix="rw-soak-")) / "worker.log"
    try:
        return await _soak(pg, broker, log)
    finally:
        broker.stop()
        pg.stop()


async def _soak(pg, broker, log: Path) -> int:  # noqa: C901 - one scenario, told in order
    url = await fresh_db(pg, f"bench_{TAG}")
    host_port = url.split("@", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    proxy = ThreadedProxy(host, int(port))
    bootstrap = broker.bootstrap_servers
    topics = {f"in-{TAG}": 3, f"out-{TAG}": 3, f"dlq-{TAG}": 1}
    await dev.create_topics(bootstrap, topics)
    metrics_port = dev.free_port()  # the same after each restart
    env = worker_env(url.replace(host_port, proxy.address), bootstrap, TAG, metrics_port=metrics_port,
                     metrics_host="127.0.0.1", batch_size=BATCH, retry_backoff_max_s=1, relay_interval_s=1,
                     relay_min_age_s=2,
                     # quick rejoins after a kill (Tansu holds a JoinGroup for about half the session timeout)
                     kafka_session_timeout_ms=2000, kafka_heartbeat_interval_ms=300)
    total = int(RATE * SECONDS)
    print(f"soak: {SECONDS:.0f} s at {RATE} games/s ({total} games, {PLAYERS} players), a fault every "
          f"{FAULT_EVERY_S:.0f} s ({','.join(FAULTS)}; cuts of {CUT_S:.0f} s), batch {BATCH}; log {log}", flush=True)
    values = games(total, PLAYERS, seed=9)
    worker = Worker(env, log)
    worker.start()
    await _wait_for_member(bootstrap, f"g-{TAG}")  # the stream starts once the worker consumes

    sent: dict[str, float] = {}
    first_seen: dict[str, float] = {}
    published: set[str] = set()
    faults: list[tuple[str, float, float]] = []  # (kind, start, end) in seconds since t0
    processed_samples: list[tuple[float, int]] = []
    t0 = time.perf_counter()
    done_sending = asyncio.Event()

    consumer = AIOKafkaConsumer(f"out-{TAG}", bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", fetch_max_wait_ms=50)
    await consumer.start()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, linger_ms=5)
    await producer.start()

    async def receive() -> None:
        while True:
            batch = await consumer.getmany(timeout_ms=200)
            now = time.perf_counter()
            for records in batch.values():
                for r in records:
                    event = orjson.loads(r.value)
                    published.add(event["id"])
                    first_seen.setdefault(event["data"]["cause"]["id"], now)

    async def send() -> None:
        pending = []
        start = time.perf_counter()
        for i, v in enumerate(values):
            delay = start + i / RATE - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            sent[f"game-{i}"] = time.perf_counter()
            pending.append(await producer.send(f"in-{TAG}", v, key=player_of(v)))
            if len(pending) >= 1000:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
        done_sending.set()

    async def inject() -> None:
        k = 0
        while True:
            if (k + 1) * FAULT_EVERY_S >= SECONDS:
                return  # none after the stream: the end is for the catching up
            await asyncio.sleep(t0 + (k + 1) * FAULT_EVERY_S - time.perf_counter())
            kind = FAULTS[k % len(FAULTS)]
            start = time.perf_counter() - t0
            if kind == "cut":
                proxy.cut()
                await asyncio.sleep(CUT_S)
                proxy.restore()
            elif kind == "kill":
                await worker.kill_and_restart()
            else:
                raise SystemExit(f"BENCH_SOAK_FAULTS: unknown fault {kind!r} (cut, kill)")
            faults.append((kind, start, time.perf_counter() - t0))
            print(f"  {start:6.1f} s: {kind}" + (f" for {CUT_S:.0f} s" if kind == "cut" else " and restart"), flush=True)
            k += 1

    # CPU of the broker and of the worker per line: with the embedded broker, every fetch lists every
    # record batch the partition holds (its memory engine keeps each batch as an object), so its
    # CPU grows with the log while the worker's stays flat (docs/operations.md, ./dev bench broker).
    broker_cpu, worker_cpu = CpuShare(getattr(broker, "pid", None)), CpuShare(worker.proc.pid)

    async def monitor(conn) -> None:
        last_print, last_batches = 0.0, (0.0, 0.0, 0.0)
        while True:
            t = time.perf_counter() - t0
            worker.sample_rss(t)
            n = await conn.fetchval("SELECT count(*) FROM processed_messages")
            processed_samples.append((t, n))
            if t - last_print >= 30:
                rss = worker.rss[-1][2] // 1024 if worker.rss else 0
                # the worker's own view of its batches since the last line (its counters restart with it)
                batches = await asyncio.to_thread(_batch_metrics, metrics_port)
                if batches[0] < last_batches[0]:  # restarted: its counters started again from zero
                    last_batches = (0.0, 0.0, 0.0)
                count, seconds, size = (b - a for a, b in zip(last_batches, batches, strict=True))
                seen = (f"{count:.0f} batches of {size / count:.0f} messages, {seconds / count * 1000:.0f} ms each"
                        if count > 0 else "no batch")
                last_batches = batches
                cpu = f"CPU worker {worker_cpu.reading(worker.proc.pid)}, broker {broker_cpu.reading()}"
                print(f"  {t:6.1f} s: {len(sent)} sent, {n} applied, {len(first_seen)} with a change seen, "
                      f"worker RSS {rss} MiB; {seen}; {cpu}", flush=True)
                last_print = t
            await asyncio.sleep(2.0)

    monitor_conn = await asyncpg.connect(url)  # straight to PostgreSQL, not through the proxy
    tasks = [asyncio.create_task(c) for c in (receive(), inject(), monitor(monitor_conn))]
    sender = asyncio.create_task(send())
    try:
        await sender
        sent_at = time.perf_counter() - t0
        deadline = time.perf_counter() + 600
        while time.perf_counter() < deadline:
            n = await monitor_conn.fetchval("SELECT count(*) FROM processed_messages")
            if n >= total and len(first_seen) >= total:
                break
            await asyncio.sleep(0.5)
        applied_at = next((t for t, n in processed_samples if n >= total), time.perf_counter() - t0)
        # the relay publishes what a kill left in the outbox: wait until it is empty and seen
        while time.perf_counter() < deadline:
            if not await monitor_conn.fetchval("SELECT count(*) FROM outbox"):
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(3)  # the last rating.changed reach the consumer
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await monitor_conn.close()
        await producer.stop()
        await consumer.stop()
    code = await worker.stop()
    proxy.stop()
    problems = await consistency(url, values, published)
    if code != 0:
        problems.append(f"the worker exited with {code} on SIGTERM")
    _report(values, sent, first_seen, faults, processed_samples, worker, t0, sent_at, applied_at, problems)
    return 1 if problems else 0


def _report(values, sent, first_seen, faults, processed_samples, worker, t0, sent_at, applied_at, problems) -> None:
    total = len(values)
    lat = sorted((first_seen[k] - t) * 1000 for k, t in sent.items() if k in first_seen)

    def near_fault(t: float) -> bool:
        return any(start - 1 <= t <= end + 15 for _, start, end in faults)

    calm = sorted((first_seen[k] - t) * 1000 for k, t in sent.items() if k in first_seen and not near_fault(t - t0))
    best = 0.0
    for (ta, na), (tb, nb) in zip(processed_samples, processed_samples[2:], strict=False):
        if tb - ta >= 4:
            best = max(best, (nb - na) / (tb - ta))
    print(f"soak: sent {total} games in {sent_at:.0f} s ({total / sent_at:,.0f}/s); all applied after "
          f"{applied_at:.0f} s: {total / applied_at:,.0f} games/s end to end; best 5 s: {best:,.0f} games/s")
    print(f"soak: faults: {Counter(kind for kind, _, _ in faults)}; worker restarts after SIGKILL: {worker.kills}")
    if lat:
        print(f"soak: latency send -> first rating.changed, all {len(lat)} games: p50 {statistics.median(lat):.0f} ms, "
              f"p99 {_percentile(lat, 0.99):.0f} ms, max {lat[-1]:.0f} ms")
    if calm:
        print(f"soak: the {len(calm)} games sent away from faults (not within 1 s before to 15 s after one): "
              f"p50 {statistics.median(calm):.0f} ms, p99 {_percentile(calm, 0.99):.0f} ms, max {calm[-1]:.0f} ms")
    per_minute = []
    for minute in range(int(max(sent.values()) - t0) // 60 + 1):
        window = sorted((first_seen[k] - t) * 1000 for k, t in sent.items()
                        if k in first_seen and minute * 60 <= t - t0 < (minute + 1) * 60)
        if window:
            per_minute.append(f"{minute}:{statistics.median(window):.0f}/{_percentile(window, 0.99):.0f}")
    print("soak: latency per minute of sending (minute:p50/p99 ms): " + " ".join(per_minute))
    by_pid: dict[int, list[tuple[float, int]]] = {}
    for t, pid, kb in worker.rss:
        by_pid.setdefault(pid, []).append((t, kb))
    for pid, samples in by_pid.items():
        # "first" once the process has run 20 s (imports, connections and caches filled); "at start" is raw
        warm = [kb for t, kb in samples if t >= samples[0][0] + 20] or [samples[-1][1]]
        print(f"soak: worker pid {pid}, {samples[0][0]:.0f}-{samples[-1][0]:.0f} s: RSS at start "
              f"{samples[0][1] / 1024:.0f} MiB, first (20 s in) {warm[0] / 1024:.0f} MiB, last {warm[-1] / 1024:.0f} MiB, "
              f"max {max(kb for _, kb in samples) / 1024:.0f} MiB")
    series, next_t = [], 0.0
    for t, _, kb in worker.rss:
        if t >= next_t:
            series.append(f"{t:.0f}s:{kb // 1024}")
            next_t = t + 30
    print("soak: RSS over time (MiB): " + " ".join(series))
    print("soak: consistency: " + ("OK (each game applied once, versions without gaps, every change published, "
                                   "nothing else published, outbox empty)" if not problems else "; ".join(problems)))


def main() -> int:
    return asyncio.run(soak())


if __name__ == "__main__":
    sys.exit(main())
