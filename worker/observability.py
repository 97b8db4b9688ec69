"""Prometheus metrics, /healthz and /readyz, and JSON logs (one line per notable event)."""

from __future__ import annotations

import asyncio
import bisect
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable

import orjson
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

_logger = logging.getLogger("rating_worker.readiness")


class Metrics:
    """The worker's metrics, in their own registry so that tests can run several workers in one process."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.messages = Counter(
            "rating_worker_messages", "Input messages by type and outcome", ["type", "outcome", "reason"], registry=r
        )
        self.batch_size = Histogram(
            "rating_worker_batch_size", "Messages per batch", buckets=(1, 10, 50, 100, 250, 500, 1000, 2000, 5000),
            registry=r,
        )
        self.batch_seconds = Histogram(
            "rating_worker_batch_duration_seconds", "Consume-to-offset-commit time of a batch",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10), registry=r,
        )
        self.event_lag = Histogram(
            "rating_worker_event_lag_seconds", "Now minus the cause's time when its change is published",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 300, 3600, 86400), registry=r,
        )
        self.record_latency = Histogram(
            "rating_worker_record_latency_seconds", "From an input record's timestamp (the producer's create "
            "time, or the broker's append time) to the commit of its offset, its changes published",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300), registry=r,
        )
        self.consumer_lag = Gauge(
            "rating_worker_consumer_lag", "Records behind the end of the partition", ["topic", "partition"], registry=r
        )
        self.batch_plans = Counter(
            "rating_worker_batch_plans", "Batches by whether the plan made before the locks held or was recomputed",
            ["result"], registry=r,
        )
        self.db_retries = Counter("rating_worker_db_retries", "Batches retried after a database error", registry=r)
        self.broker_retries = Counter("rating_worker_broker_retries", "Broker operations retried", registry=r)
        self.outbox_backlog = Gauge("rating_worker_outbox_backlog", "History rows not yet published", registry=r)
        self.rating_changes = Counter(
            "rating_worker_rating_changes", "Published rating changes", ["system", "category"], registry=r
        )
        self.dead_letters = Counter("rating_worker_dead_letters", "Messages sent to the DLQ", ["error_class"], registry=r)
        self.ready = Gauge("rating_worker_ready", "1 while the worker can make progress", registry=r)
        self.offsets_went_back = Counter(
            "rating_worker_offsets_went_back", "Partitions that handed out records below an offset this worker "
            "had committed (the broker lost its data or the group's offsets, or they were reset)", ["topic"],
            registry=r,
        )
        self.unreadable_offset = Gauge(
            "rating_worker_unreadable_offset", "The offset of a record this worker cannot read (a codec it does "
            "not have, a corrupt batch): its partition is stopped there, the others go on. Present only while "
            "it is so", ["topic", "partition"], registry=r,
        )
        self.assigned_partitions = Gauge(
            "rating_worker_assigned_partitions", "Input partitions assigned to this worker by its consumer group",
            ["topic"], registry=r,
        )
        self.side_task_failures = Counter(
            "rating_worker_side_task_failures", "Unexpected failures of a side task (relay, lag, probe, "
            "retention), each restarted after a backoff", ["task"], registry=r,
        )
        self.topic_partitions = Gauge(
            "rating_worker_topic_partitions", "Partitions of each input topic, as the broker's metadata says "
            "(the group's workers together should be assigned all of them)", ["topic"], registry=r,
        )
        # Retention (worker.pipeline.retention), read after each of its passes
        self.retention_removed = Counter(
            "rating_worker_retention_removed", "Rows removed by retention, per table (processed ids past "
            "DEDUPE_WINDOW_DAYS, unrated rows past UNRATED_WINDOW_DAYS or with their message's id)", ["table"],
            registry=r,
        )
        self.retention_oldest = Gauge(
            "rating_worker_retention_oldest_seconds", "Age of the oldest row kept, per table (by when the worker "
            "stored it)", ["table"], registry=r,
        )
        self.retention_overdue = Gauge(
            "rating_worker_retention_overdue_seconds", "How long past its window the oldest row kept is, per "
            "table (0: none is; above a few minutes, removal is falling behind or not running)", ["table"],
            registry=r,
        )
        self.table_bytes = Gauge(
            "rating_worker_table_bytes", "Bytes on disk of the big tables, their rows (with TOAST) and their "
            "indexes, summed over partitions", ["table", "part"], registry=r,
        )


def observe_many(histogram: Histogram, values: Iterable[float]) -> None:
    """`histogram.observe(v)` for every value, with one increment per bucket instead of one per value
    (a batch observes thousands: ~1 us each through observe()). The same buckets and count as observe();
    the sum is added once, so it may differ from one-by-one additions in the last bit. A NaN, as in
    observe(), goes to the sum and to no bucket. Falls back to observe() if the client's internals (its
    bucket bounds and values) are not what this version has."""
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    total_value = getattr(histogram, "_sum", None)
    if bounds is None or buckets is None or total_value is None or len(bounds) != len(buckets):
        for v in values:
            histogram.observe(v)
        return
    counts = [0] * len(bounds)
    where = bisect.bisect_left
    total = 0.0
    for v in values:
        total += v
        if v == v:  # not NaN
            counts[where(bounds, v)] += 1  # the first bucket whose bound is >= v, as observe() picks it
    for bucket, n in zip(buckets, counts, strict=True):
        if n:
            bucket.inc(n)
    total_value.inc(total)


class Readiness:
    """Whether the worker can make progress: ready while nothing reports a problem.

    Readiness has several sources - a batch retrying after database errors, a broker operation retrying,
    the periodic broker probe, the start-up - and each reports its own reason while it fails and takes it
    back when it recovers, so that one source's recovery never hides another's failure: ready is the empty
    set of reasons. A reason names one failing thing (e.g. "database: batch 12", "broker: probe"); two
    things that fail at once use two reasons. `rating_worker_ready` and /readyz follow it."""

    def __init__(self, metrics: Metrics, reasons: tuple[str, ...] = ("starting",)) -> None:
        self._metrics = metrics
        self._reasons: dict[str, None] = dict.fromkeys(reasons)  # a set that keeps the order of arrival
        self._metrics.ready.set(0 if self._reasons else 1)

    @property
    def ready(self) -> bool:
        return not self._reasons

    @property
    def reasons(self) -> list[str]:
        return list(self._reasons)

    def fail(self, reason: str) -> bool:
        """`reason` is failing now; True if that is news."""
        if reason in self._reasons:
            return False
        was_ready = self.ready
        self._reasons[reason] = None
        if was_ready:
            self._metrics.ready.set(0)
            log(_logger, logging.WARNING, "not ready", reasons=self.reasons)
        return True

    def recover(self, reason: str) -> bool:
        """`reason` works again (or never failed); True if it had been failing."""
        if reason not in self._reasons:
            return False
        del self._reasons[reason]
        if self.ready:
            self._metrics.ready.set(1)
            log(_logger, logging.INFO, "ready", recovered=reason)
        return True


class HealthServer:
    """A tiny HTTP/1.0 server: /metrics, /healthz (process alive), /readyz (database and broker usable;
    503 names the reasons)."""

    def __init__(self, metrics: Metrics, host: str, port: int, readiness: Readiness | None = None) -> None:
        self.metrics = metrics
        self.host, self.port = host, port
        self.readiness = readiness or Readiness(metrics)
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            path = line.split(b" ")[1].decode() if line.count(b" ") >= 2 else "/"
            if path.startswith("/metrics"):
                status, ctype, body = "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.metrics.registry)
            elif path.startswith("/healthz"):
                status, ctype, body = "200 OK", "text/plain", b"ok\n"
            elif path.startswith("/readyz"):
                reasons = self.readiness.reasons
                status = "503 Service Unavailable" if reasons else "200 OK"
                ctype, body = "text/plain", f"not ready: {', '.join(reasons)}\n".encode() if reasons else b"ready\n"
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"not found\n"
            head = f"HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n"
            writer.write(head.encode() + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, IndexError):
            pass
        finally:
            writer.close()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if fields:
            entry.update(fields)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    """For people at a terminal (the demo): the message, then its fields as key=value."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None) or {}
        return super().format(record) + "".join(f" {k}={v}" for k, v in fields.items())


class RepeatLimiter(logging.Filter):
    """Rate-limits the repeated records of noisy libraries' loggers (aiokafka logs an ERROR for every failed
    connection and metadata attempt, several a second, for as long as a broker is unreachable).

    Per message template - the logger, the level and the format string before its arguments, so that
    "Unable connect to node with id %s: %s" is one template whatever the node and the error - the first
    record passes; after it at most one per `interval_s`, carrying the field `suppressed`: how many records
    of the template were dropped since the last one that passed. Records of other loggers (ours) pass
    untouched. The records dropped after the last one that passed are not reported (nothing is logged by
    a timer)."""

    def __init__(self, prefixes: tuple[str, ...] = ("aiokafka",), interval_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, max_templates: int = 1000) -> None:
        super().__init__()
        self.prefixes = prefixes
        self.interval_s = interval_s
        self.max_templates = max_templates
        self._clock = clock
        self._templates: dict[tuple, list] = {}  # template -> [when one last passed, dropped since]
        self._lock = threading.Lock()

    def _limited(self, name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in self.prefixes)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._limited(record.name):
            return True
        key = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        with self._lock:
            seen = self._templates.get(key)
            if seen is not None and now - seen[0] < self.interval_s:
                seen[1] += 1
                return False
            suppressed = seen[1] if seen is not None else 0
            if seen is None and len(self._templates) >= self.max_templates:
                self._forget(now)
            self._templates[key] = [now, 0]
        if suppressed:
            record.fields = {**(getattr(record, "fields", None) or {}), "suppressed": suppressed}
        return True

    def _forget(self, now: float) -> None:
        """Keep the table bounded: drop the templates whose window is over, or all of them."""
        for key in [k for k, (t, _) in self._templates.items() if now - t >= self.interval_s]:
            del self._templates[key]
        if len(self._templates) >= self.max_templates:
            self._templates.clear()


def setup_logging(level: str = "INFO", json: bool = True, stream=None) -> None:
    """The root logger's one handler: JSON (or text) lines on stderr, or on `stream` (the demo's log file)."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if json else TextFormatter())
    # On the handler, not on the "aiokafka" logger: a logger's filters do not see its children's records.
    handler.addFilter(RepeatLimiter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiokafka").setLevel(logging.WARNING)


def log(logger: logging.Logger, level: int, msg: str, **fields) -> None:
    logger.log(level, msg, extra={"fields": fields})
