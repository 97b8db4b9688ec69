"""Retention: processed ids and unrated rows removed once their windows are over, and the readings an
operator watches (docs/operations.md, "Retention").

- A processed id is kept DEDUPE_WINDOW_DAYS after the worker stored it (`processed_at`, the database's
  clock: never before the broker appended its record, whatever the producer's clock said). A redelivery
  comes from the input topics, which keep a record for their `retention.ms` (and up to a segment's age
  more: Kafka deletes whole segments), so the window must cover that: `check_topic_retention`, at start,
  refuses a window shorter than the topics' retention.ms plus a day.
- The players a message left unchanged, and why (`unrated_players`), are kept UNRATED_WINDOW_DAYS, and
  never longer than their message's id (they go with it). An unrated message's id, which carries its reason,
  is kept for the longer of the two windows, so that its rows are found with it for all of theirs.
- 0 keeps them forever.

`Retention.run` is a side task (worker.pipeline.tasks) on a connection of its own (never one a batch
waits for): every RETENTION_INTERVAL_S a pass removes expired rows in chunks of RETENTION_CHUNK
(worker.store.retention: one short transaction each, skipping rows a batch holds, one worker of the group
at a time), pausing between chunks as long as the chunk took, then reads the oldest rows kept and the big
tables' sizes into the metrics. A pass that finds much to remove stops after RETENTION_INTERVAL_S of it, to
report, and goes on at once.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError

from worker import kafka_clients
from worker.config import Config, ConfigError
from worker.observability import Metrics, log
from worker.pipeline.retry import DB_ERRORS, Retrier
from worker.store import retention as store
from worker.store.connection import connect

__all__ = ["MARGIN_DAYS", "Retention", "check_topic_retention", "needed_window_days"]

logger = logging.getLogger("rating_worker.retention")

DAY = 86400.0
#: What the dedupe window must exceed the topics' retention.ms by: Kafka deletes a segment once its newest
#: record is older than retention.ms, so a record can outlive it by up to a segment's age (segment.ms, 7 days
#: by default, but segment.bytes, 1 GiB, rolls a busy topic's segments within hours).
MARGIN_DAYS = 1.0
DESCRIBE_TIMEOUT_S = 10.0
MIN_PAUSE_S = 0.01


def needed_window_days(retention_ms: int | None) -> float | None:
    """The shortest DEDUPE_WINDOW_DAYS for a topic's retention.ms: None when the topic keeps its records
    forever (retention.ms -1, or compacted): then only 0 (every id kept) will do."""
    if retention_ms is None or retention_ms < 0:
        return None
    return retention_ms / 1000 / DAY + MARGIN_DAYS


def window_problem(config: Config, retentions: dict[str, int | None]) -> str | None:
    """The one line that refuses the dedupe window for these topics' retention.ms (None: forever), if any."""
    window = config.dedupe_window_days
    if window == 0:
        return None
    for topic, ms in sorted(retentions.items()):
        need = needed_window_days(ms)
        if need is None:
            return (f"DEDUPE_WINDOW_DAYS={window:g}: topic {topic} keeps its records forever (retention.ms=-1 or "
                    f"compacted), so a redelivery can come at any time: set DEDUPE_WINDOW_DAYS=0 (keep every id)")
        if window < need:
            return (f"DEDUPE_WINDOW_DAYS={window:g} is shorter than topic {topic}'s retention.ms={ms} "
                    f"({ms / 1000 / DAY:g} days) plus a day's margin: set it to at least {math.ceil(need)} "
                    f"(or 0 to keep every id)")
    return None


async def topic_retentions(config: Config) -> dict[str, int | None]:
    """retention.ms of each input topic as the broker reports it (None: kept forever); a topic the broker
    says nothing of is left out."""
    admin = kafka_clients.admin(config)
    await admin.start()
    try:
        answers = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t) for t in config.kafka_input_topics])
    finally:
        await admin.close()
    found: dict[str, int | None] = {}
    for answer in answers:
        for error, _message, _kind, topic, entries in answer.resources:
            settings = {entry[0]: entry[1] for entry in entries} if not error else {}
            if "retention.ms" not in settings:
                continue
            ms = int(settings["retention.ms"])
            compacted_only = "delete" not in settings.get("cleanup.policy", "delete")
            found[topic] = None if compacted_only else ms
    return found


async def check_topic_retention(config: Config) -> None:
    """At start: raise ConfigError when DEDUPE_WINDOW_DAYS is shorter than an input topic's retention.ms plus
    MARGIN_DAYS; a broker that does not answer, or does not say, is logged and the worker goes on."""
    if config.dedupe_window_days == 0:
        return
    try:
        retentions = await asyncio.wait_for(topic_retentions(config), DESCRIBE_TIMEOUT_S)
    except (KafkaError, OSError, TimeoutError) as exc:
        log(logger, logging.WARNING, "the broker did not describe the input topics: DEDUPE_WINDOW_DAYS not "
            "checked against their retention.ms", error=repr(exc), dedupe_window_days=config.dedupe_window_days)
        return
    problem = window_problem(config, retentions)
    if problem is not None:
        raise ConfigError(problem)
    unknown = [t for t in config.kafka_input_topics if t not in retentions]
    if unknown:
        # Kafka reports every topic's retention.ms (its default too); the embedded broker only what was set.
        log(logger, logging.INFO, "the broker did not report retention.ms of some input topics: "
            "DEDUPE_WINDOW_DAYS not checked against it", topics=unknown, dedupe_window_days=config.dedupe_window_days)


class Retention:
    def __init__(self, config: Config, metrics: Metrics, retrier: Retrier) -> None:
        self.config = config
        self.metrics = metrics
        self.retrier = retrier
        self._conn = None
        for table in ("processed_messages", "unrated_players"):
            metrics.retention_removed.labels(table)  # a series at 0 from the start

    def windows(self) -> tuple[float, float, float]:
        """The windows in seconds (0: kept forever) of applied messages' ids, unrated messages' ids (with their
        reasons) and unrated rows."""
        dedupe, unrated = self.config.dedupe_window_days * DAY, self.config.unrated_window_days * DAY
        return dedupe, (max(dedupe, unrated) if dedupe and unrated else 0.0), unrated

    def targets(self) -> list[tuple[str | None, float]]:
        """(outcome of the processed ids, or None for unrated rows; window in seconds) of what expires."""
        applied, unrated_ids, unrated = self.windows()
        return [(outcome, window) for outcome, window in (("applied", applied), ("unrated", unrated_ids),
                                                          (None, unrated)) if window]

    async def run(self) -> None:
        """Until the stop: a pass, then RETENTION_INTERVAL_S (at once when the pass was cut short). A database
        failure is logged and the next pass tries again, on a new connection."""
        try:
            while not self.retrier.stopping.is_set():
                finished = True
                try:
                    finished = await self.pass_once()
                except DB_ERRORS as exc:  # CannotConnect is one (a ConnectionError)
                    log(logger, logging.WARNING, "retention pass failed, will retry", error=repr(exc))
                    await self.close()
                await self.retrier.sleep(self.config.retention_interval_s if finished else MIN_PAUSE_S)
        finally:
            await self.close()

    async def pass_once(self) -> bool:
        """Remove what expired (unless another worker is at it), then take the readings. False when it stopped
        for the time limit with more to remove."""
        conn = await self._connection()
        finished = await self._remove(conn)
        await self.measure(conn)
        return finished

    async def _remove(self, conn) -> bool:
        started = time.monotonic()
        removed = self.metrics.retention_removed
        chunk = self.config.retention_chunk
        for outcome, window_s in self.targets():
            while True:
                began = time.monotonic()
                if outcome is None:
                    done = await store.remove_unrated(conn, window_s, chunk)
                else:
                    done = await store.remove_processed(conn, outcome, window_s, chunk)
                if done is None:
                    return True  # another worker of the group is removing: it has the pass
                removed.labels("processed_messages").inc(done.ids)
                removed.labels("unrated_players").inc(done.unrated)
                if (done.unrated if outcome is None else done.ids) < chunk or self.retrier.stopping.is_set():
                    break
                if time.monotonic() - started >= self.config.retention_interval_s:
                    return False
                await self.retrier.sleep(max(MIN_PAUSE_S, time.monotonic() - began))
        return True

    async def measure(self, conn) -> None:
        """The oldest rows kept, how far past their windows, and the big tables' sizes."""
        ages = await store.oldest(conn)
        applied, unrated_ids, unrated = self.windows()
        ids = [a for a in (ages.applied, ages.unrated_ids) if a is not None]
        set_age = self.metrics.retention_oldest.labels
        set_age("processed_messages").set(max(ids, default=0.0))
        set_age("unrated_players").set(ages.unrated_players or 0.0)
        overdue = self.metrics.retention_overdue.labels
        overdue("processed_messages").set(max(_past(ages.applied, applied), _past(ages.unrated_ids, unrated_ids)))
        overdue("unrated_players").set(_past(ages.unrated_players, unrated))
        for table, (rows, indexes) in (await store.table_sizes(conn)).items():
            self.metrics.table_bytes.labels(table, "rows").set(rows)
            self.metrics.table_bytes.labels(table, "indexes").set(indexes)

    async def _connection(self):
        if self._conn is None or self._conn.is_closed():
            self._conn = await connect(self.config.database_url, command_timeout=self.config.db_command_timeout_s,
                                       server_settings={"application_name": "rating-worker retention"})
        return self._conn

    async def close(self) -> None:
        """Close its connection (run() does at its end)."""
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                await asyncio.wait_for(conn.close(), 5)
            except DB_ERRORS:  # TimeoutError is one
                conn.terminate()


def _past(age: float | None, window_s: float) -> float:
    """How long past `window_s` a row of this age is (0: within it, or no window: kept forever)."""
    if age is None or not window_s:
        return 0.0
    return max(0.0, age - window_s)
