"""Real PostgreSQL and a real Kafka-protocol broker for the integration tests.

Both come from `worker.dev` (embedded wheels) unless DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS
point at running ones. Each test gets its own database (a copy of a migrated template) and its own
topics, so tests never see each other's data.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from worker import dev
from worker.config import load as load_config
from worker.dev import databases
from worker.dev.broker import produce  # noqa: F401 - the tests' producer, shared with bench/
from worker.store.migrate import available_migrations

_counter = itertools.count()


@pytest.fixture(scope="session")
def postgres():
    pg = dev.postgres_from_env_or_start()
    yield pg
    pg.stop()


@pytest.fixture(scope="session")
def broker():
    b = dev.broker_from_env_or_start()
    yield b
    b.stop()


async def empty_database(postgres, name: str | None = None) -> str:
    """The URL of a new database with nothing in it, not even the schema (dropped first if it exists)."""
    return await databases.new_database(postgres.url, name or f"rw_empty_{os.getpid()}_{next(_counter)}")


@pytest.fixture(scope="session")
async def template_db(postgres) -> str:
    name = f"rw_template_{os.getpid()}"
    await databases.new_database(postgres.url, name, migrated=True)
    return name


async def new_database(postgres, template_db: str) -> str:
    """The URL of a new database, a copy of the migrated template (a test that needs two asks twice)."""
    return await databases.new_database(postgres.url, f"rw_test_{os.getpid()}_{next(_counter)}", template=template_db)


@pytest.fixture
async def database_url(postgres, template_db) -> str:
    return await new_database(postgres, template_db)


@dataclass
class Topics:
    input: str
    output: str
    dlq: str
    group: str


async def make_topics(broker, partitions: int = 1) -> Topics:
    tag = uuid.uuid4().hex[:8]
    t = Topics(f"games-{tag}", f"changed-{tag}", f"dlq-{tag}", f"group-{tag}")
    await dev.create_topics(broker.bootstrap_servers, {t.input: partitions, t.output: 3, t.dlq: 1})
    return t


@pytest.fixture
async def topics(broker) -> Topics:
    return await make_topics(broker)


def worker_env(database_url: str, broker, topics: Topics, **extra) -> dict[str, str]:
    env = {
        "DATABASE_URL": database_url,
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
        "KAFKA_INPUT_TOPICS": topics.input,
        "KAFKA_OUTPUT_TOPIC": topics.output,
        "KAFKA_DLQ_TOPIC": topics.dlq,
        "KAFKA_GROUP_ID": topics.group,
        "METRICS_PORT": "0",
        "BATCH_WAIT_MS": "20",
        "RELAY_INTERVAL_S": "1",
        "RELAY_MIN_AGE_S": "2",
        # Tansu holds a JoinGroup for about half the session timeout: short ones keep rebalances quick.
        "KAFKA_SESSION_TIMEOUT_MS": "2000",
        "KAFKA_HEARTBEAT_INTERVAL_MS": "300",
    }
    env.update({k.upper(): str(v) for k, v in extra.items()})
    return env


def worker_config(database_url: str, broker, topics: Topics, **extra):
    return load_config(env=worker_env(database_url, broker, topics, **extra))


class WorkerProcess:
    """`python -m worker run` in a child process, for kill and signal tests."""

    def __init__(self, env: dict[str, str], log_path) -> None:
        self.log = open(log_path, "ab")  # noqa: SIM115
        full = {**os.environ, **env}
        self.proc = subprocess.Popen([sys.executable, "-m", "worker", "run"], env=full, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self.log.close()


async def schema_before(url: str, version: int) -> None:
    """The schema as the migrations before `version` left it, recorded as applied (a database of an older
    worker, for a test of migrating it); on such a database, the ones it lacks below `version`."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, "
                           "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(), checksum text NOT NULL)")
        applied = {r[0] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for m in available_migrations():
            if m.version < version and m.version not in applied:
                async with conn.transaction():
                    await conn.execute(m.sql)
                    await conn.execute("INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                                       m.version, m.name, m.checksum)
    finally:
        await conn.close()


async def history_indexes(conn) -> dict[str, list[str]]:
    """Each partition of the history (a month) -> its indexes' names, sorted."""
    found: dict[str, list[str]] = {}
    for r in await conn.fetch("SELECT c.relname AS month, i.indexrelid::regclass::text AS index FROM pg_inherits AS h "
                              "JOIN pg_class AS c ON c.oid = h.inhrelid JOIN pg_index AS i ON i.indrelid = c.oid "
                              "WHERE h.inhparent = 'rating_changes'::regclass ORDER BY 1, 2"):
        found.setdefault(r["month"], []).append(r["index"])
    return found


def migrations_from(version: int) -> list[str]:
    """What migrating a database of `schema_before(url, version)` applies: that migration and every later one."""
    return [m.name for m in available_migrations() if m.version >= version]


def message_key_function() -> str:
    """Migration 0013's CREATE FUNCTION message_key, which this version's store calls: run on a schema from
    before 0013, it lets the store write there as the older worker did (the migration replaces it)."""
    sql = next(m.sql for m in available_migrations() if m.name == "0013_message_key")
    return sql[sql.index("CREATE OR REPLACE FUNCTION message_key"):].split(";")[0]


async def read_topic(bootstrap: str, topic: str, at_least: int, timeout: float = 60.0) -> list:
    """Every record of a topic from the start, waiting until there are at least `at_least`."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    records = []
    deadline = time.monotonic() + timeout
    try:
        while len(records) < at_least and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for recs in batch.values():
                records.extend(recs)
        # drain what else is there right now
        batch = await consumer.getmany(timeout_ms=500)
        for recs in batch.values():
            records.extend(recs)
    finally:
        await consumer.stop()
    return records


async def wait_processed(database_url: str, count: int, timeout: float = 120.0) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        deadline = time.monotonic() + timeout
        while True:
            n = await conn.fetchval("SELECT count(*) FROM processed_messages")
            if n >= count or time.monotonic() > deadline:
                return n
            await asyncio.sleep(0.2)
    finally:
        await conn.close()


async def committed_offsets(bootstrap: str, topic: str, group: str, partitions: int) -> dict[int, int | None]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        await consumer.stop()


def http_get(port: int, path: str) -> tuple[int, str]:
    """GET http://127.0.0.1:PORT/PATH -> (status, body), 503 included; (0, why) while nothing listens
    (a worker process that is still starting). Blocking: call it in a thread."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, ConnectionError) as exc:
        return 0, str(exc)


def metric_samples(text: str, name: str) -> dict[tuple, float]:
    """The samples of one metric in a /metrics page: {(label, value) pairs: value}."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out


class Workers:
    """Worker processes started by a test; whatever is still running at the end is killed."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[WorkerProcess] = []

    def start(self, env: dict, name: str = "worker") -> WorkerProcess:
        w = WorkerProcess(env, self.tmp_path / f"{name}.log")
        self.started.append(w)
        return w

    def log(self, name: str = "worker") -> str:
        return (self.tmp_path / f"{name}.log").read_text()

    @staticmethod
    async def wait(w: WorkerProcess, timeout: float = 60) -> int:
        """Wait for the process without blocking the event loop (a proxy may be running on it)."""
        return await asyncio.to_thread(w.wait, timeout)

    async def stop(self, w: WorkerProcess) -> int:
        w.signal(signal.SIGTERM)
        return await self.wait(w)

    def kill_all(self) -> None:
        for w in self.started:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait(10)


@contextlib.contextmanager
def captured_logs(level: int = logging.DEBUG):
    """Every log record of this process, as the worker's JSON lines, while the block runs."""
    from worker.observability import JsonFormatter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(level)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(old)
