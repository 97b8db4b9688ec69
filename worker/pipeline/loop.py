"""The streaming loop: take records -> decode -> a batch's database stage -> complete it, in order.

The commit order of a batch, written once (every step waits for the one before it, and the batches
complete in the order they were taken):

1. Its messages' changes, their (source, id) and the outbox rows commit in PostgreSQL in one
   transaction (worker.pipeline.database; several batches may be in PostgreSQL at once, kept in order
   by worker.pipeline.inflight; a batch with a sweep, a FIDE list, commits and publishes in chunks).
2. Its bad records go to the dead-letter topic, and the messages the rating code failed on with them.
3. Its changes are published (`rating.changed`), then their outbox rows are taken out.
4. Its offsets are committed.

Steps 2 to 4 have one owner, worker.pipeline.completion, for a batch and a sweep's chunk alike; this
module takes records, launches batches and completes them in the order they were taken.

A crash anywhere redelivers whatever was not committed in step 4, and the dedupe on (source, id)
makes a second delivery a no-op: each message is applied exactly once. A crash between 1 and 3 leaves
outbox rows, which the relay publishes (at least once, with stable ids). Offsets are never committed
past a record that was neither applied nor dead-lettered: a batch that cannot finish (a stop or a
rebalance during an outage) is abandoned uncommitted with every batch after it, and their records
are taken again from the committed offsets.

Knows nothing about rating math: worker.engine does that through the state port.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from worker import kafka_clients
from worker.config import Config
from worker.observability import HealthServer, Metrics, Readiness, log
from worker.pipeline.completion import Completion
from worker.pipeline.database import DatabaseStage
from worker.pipeline.faults import Faults
from worker.pipeline.inflight import Batch, decode_records
from worker.pipeline.intake import FETCH_RETRY_S, Intake, is_group_error
from worker.pipeline.monitors import BrokerProbe, LagMonitor
from worker.pipeline.publisher import Publisher
from worker.pipeline.rebalance import FinishBatchesBeforeRevoke, Membership
from worker.pipeline.relay import Relay
from worker.pipeline.retention import Retention, check_topic_retention
from worker.pipeline.retry import Abandoned, Retrier, Stopping
from worker.pipeline.tasks import SideTasks
from worker.store.base import StateStore

__all__ = ["Pipeline"]

logger = logging.getLogger("rating_worker.pipeline")

# How long closing each Kafka client may take at a stop (leaving the group, flushing the producer): a
# coordinator that does not answer must not hold the exit.
CLOSE_TIMEOUT_S = 5.0
REJOIN_S = 1.0  # the first wait after the group refused this worker (then longer, with jitter)


class Pipeline:
    def __init__(self, config: Config, store: StateStore, metrics: Metrics, health: HealthServer | None = None,
                 *, retention: bool = False):
        """`retention`: run the retention side task (worker.pipeline.retention) on config.database_url, the
        database `store` keeps its state in; off for a store of another kind (tests with a memory store)."""
        self.config = config
        self.store = store
        self.metrics = metrics
        # Shared with /readyz when there is a health server; "starting" until start() has connected.
        self.readiness = health.readiness if health is not None else Readiness(metrics)
        self._stopping = asyncio.Event()
        self._draining = False  # a retry gives up at its next failure (the batch is abandoned)
        self.retrier = Retrier(config, metrics, self.readiness, self._stopping, giving_up=self._giving_up)
        self.database = DatabaseStage(store, metrics, self.readiness, self.retrier)
        self.membership = Membership(config, metrics, self.readiness)
        self.faults = Faults()
        # Its publisher and consumer come with start(); until then (tests) nothing is published or committed.
        self.completion = Completion(store, None, None, metrics, self.retrier, self.faults.at)
        self.consumer: AIOKafkaConsumer | None = None
        self.producer: AIOKafkaProducer | None = None
        self.intake: Intake | None = None
        self.publisher: Publisher | None = None
        self.relay: Relay | None = None
        self.lag: LagMonitor | None = None
        self.probe: BrokerProbe | None = None
        self._keeps_retention = retention
        self.retention: Retention | None = None  # from start(), when asked for
        self.started = False
        self.abandoned = 0  # batches given up uncommitted (stop or rebalance during an outage)
        self._launched = 0
        self._complete_lock = asyncio.Lock()
        self._rejoin = self.retrier.backoff(REJOIN_S)  # the waits while the group keeps this worker out
        self._inflight: deque[Batch] = deque()
        self._last: Batch | None = None
        self.broken: BaseException | None = None
        # For the watchdog: batches taken from the broker and not yet through `_complete`.
        self._unfinished = 0
        # A series at 0 for every input topic from the start, so that the first fall is an increase.
        for topic in config.kafka_input_topics:
            metrics.offsets_went_back.labels(topic)

    # ---- lifecycle -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask for a clean stop: the batches in hand finish and commit, then the loop ends."""
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def batches(self) -> int:
        """Batches completed (committed) by this process."""
        return self.completion.batches

    async def start(self) -> None:
        c = self.config
        self.producer = kafka_clients.producer(c)
        self.consumer = kafka_clients.group_consumer(c)
        self.intake = Intake(self.consumer, self.metrics, self.readiness, self.retrier.sleep,
                             probe_ms=c.kafka_fetch_max_wait_ms + 1000, backoff=self.retrier.backoff(FETCH_RETRY_S))
        self.publisher = Publisher(self.producer, c, self.metrics, self.retrier)
        self.completion.publisher, self.completion.consumer = self.publisher, self.consumer
        self.database.sweeps_publish_with(self.completion.publish, c.sweep_chunk,
                                          lambda n: self.faults.at("kill_after_sweep_chunk", n))
        self.relay = Relay(self.store, self.publisher, c, self.metrics, self.retrier)
        self.lag = LagMonitor(self.consumer, c, self.metrics, self.retrier, stopped=self.intake.stopped)
        self.probe = BrokerProbe(self.consumer, self.readiness, self.retrier)
        await self.retrier.broker("start producer", self.producer.start, interruptible=True)
        await self.retrier.broker("start consumer", self.consumer.start, interruptible=True)
        await check_topic_retention(c)  # ConfigError: DEDUPE_WINDOW_DAYS shorter than the topics keep records
        if self._keeps_retention:
            self.retention = Retention(c, self.metrics, self.retrier)
        self.consumer.subscribe(list(c.kafka_input_topics), listener=FinishBatchesBeforeRevoke(self))
        self.started = True
        self.readiness.recover("starting")
        log(logger, logging.INFO, "worker started", topics=list(c.kafka_input_topics), group=c.kafka_group_id)

    async def close(self) -> None:
        """Stop the Kafka clients (leave the group), each within CLOSE_TIMEOUT_S."""
        for name, client in (("consumer", self.consumer), ("producer", self.producer)):
            if client is None:
                continue
            try:
                await asyncio.wait_for(client.stop(), CLOSE_TIMEOUT_S)
            except (KafkaError, TimeoutError) as exc:
                log(logger, logging.WARNING, f"{name} stop failed", error=repr(exc), timeout_s=CLOSE_TIMEOUT_S)

    async def run(self) -> None:
        """Consume until `stop()`. Beside it, supervised (worker.pipeline.tasks): the outbox relay, the lag
        monitor, the broker probe and (PostgreSQL) retention.

        A stop finishes the batches in hand within DRAIN_TIMEOUT_S and abandons the rest uncommitted."""
        side = SideTasks(self.metrics, self.retrier)
        side.start("relay", self.relay.run)
        side.start("lag", self.lag.run)
        side.start("broker probe", self.probe.run)
        if self.retention is not None:
            side.start("retention", self.retention.run)
        try:
            while not self._stopping.is_set():
                try:
                    await self._step()
                except Stopping:
                    break  # whatever was waited for is given up; the drain below picks it up again
            await self.drain(self.config.drain_timeout_s)
            if self.broken is not None:
                raise self.broken
        except (Stopping, Abandoned):
            self._abandon()
        except BaseException:
            self._abandon()
            raise
        finally:
            await side.stop()

    async def _step(self) -> None:
        """One turn of the loop: complete what is finished, then take records or complete the oldest batch.
        Every wait is cut short by a stop (Stopping)."""
        until_stopped = self.retrier.until_stopped
        await until_stopped(self._complete_finished())
        if len(self._inflight) >= self.config.max_inflight_batches:
            await until_stopped(self._complete_oldest())
            return
        # With batches in flight, take what is fetched before the oldest one's transaction ends; else finish it.
        take = (self.intake.take_before(self._inflight[0].task, self.config.batch_size) if self._inflight
                else self.intake.take(self.config.batch_wait_ms, self.config.batch_size))
        try:
            records = await until_stopped(take)
        except KafkaError as exc:
            if not is_group_error(exc):
                raise
            self.membership.failed(exc)
            await self.retrier.sleep(self._rejoin.next())
            return
        if self._rejoin.failures:
            self._rejoin.reset()
        if records:
            await self.launch(records)
        elif self._inflight:
            await until_stopped(self._complete_oldest())

    def forget_partitions(self, partitions) -> None:
        """Partitions taken away: their lag series and fetch positions are the next owner's."""
        if self.lag is not None:
            self.lag.forget(partitions)
        if self.intake is not None:
            self.intake.forget(partitions)

    def has_work(self) -> bool:
        """For the watchdog: records fetched and not yet committed, or waiting in the partitions, or the
        worker kept out of its consumer group (a fresh process may join where this one cannot)."""
        waiting = self.lag.waiting if self.lag is not None else 0
        return self._unfinished > 0 or waiting > 0 or self.membership.trouble is not None

    # ---- batches ---------------------------------------------------------------------------------

    async def launch(self, records: dict[TopicPartition, list]) -> Batch:
        """Decode records into a batch and start its database stage; yields now and then so that the
        batches already in PostgreSQL get their round trips answered while this one decodes."""
        started = time.perf_counter()
        for tp, recs in records.items():
            self.completion.check_position(tp, recs[0].offset)
        items, dead, offsets, stamps = await decode_records(records, self.config.max_message_bytes)
        # A batch with nothing to apply stays out of the ordering chain: it would "commit" at once and
        # let the next batch overtake the one before it. Its offsets still commit in batch order.
        self._launched += 1
        batch = Batch(self._launched, self._last if items else None, items, dead, offsets, stamps, started)
        if items:
            self._last = batch
        batch.task = asyncio.create_task(self.database.run(batch))
        self._inflight.append(batch)
        self._unfinished += 1
        return batch

    async def _complete_finished(self) -> None:
        while self._inflight and self._inflight[0].task.done():
            await self._complete_oldest()

    async def _complete_oldest(self) -> None:
        async with self._complete_lock:
            if self._inflight:
                try:
                    await self._complete_first()
                except Abandoned:
                    self._give_up_inflight("failed")

    async def _complete_first(self) -> None:
        """Complete the oldest batch; it leaves the queue once complete (if it is still there: a drain that
        timed out may have given the queue up meanwhile)."""
        b = self._inflight[0]
        await self._complete(b)
        if self._inflight and self._inflight[0] is b:
            self._inflight.popleft()

    async def _complete(self, b: Batch) -> None:
        """Steps 2 to 4 of the commit order (worker.pipeline.completion), once the batch's transaction
        committed.

        A stop may cut it short at any await and the drain then completes the batch again: the batch's
        own task is shielded (a stop does not roll back a transaction that can finish), and each step is
        done once."""
        if self.completion.halted:
            raise Stopping()
        try:
            result = await asyncio.shield(b.task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if b.is_abandoned and not (current is not None and current.cancelling()):
                raise Abandoned() from None  # given up by a drain meanwhile, not our own cancellation
            raise
        await self.completion.complete(b, result)
        self._unfinished = max(0, self._unfinished - 1)
        if self.lag is not None:
            self.lag.waiting = 0  # measured before this batch: the lag monitor measures it again within 5 s

    # ---- draining, giving up ---------------------------------------------------------------------

    async def drain(self, timeout_s: float) -> None:
        """Finish every batch in hand, in order (before a rebalance, at a stop). A batch not finished
        within `timeout_s`, or whose database or broker work fails meanwhile, is abandoned uncommitted
        with every batch after it: its records come again to whoever owns the partition next."""
        self._draining = True
        try:
            await asyncio.wait_for(self._drain_locked(), timeout_s)
        except TimeoutError:
            self._give_up_inflight("timed out", timeout_s)
        except Abandoned:
            self._give_up_inflight("failed", timeout_s)
        finally:
            self._draining = False

    async def _drain_locked(self) -> None:
        async with self._complete_lock:
            while self._inflight:
                await self._complete_first()

    def _giving_up(self) -> bool:
        """After a failure, retry (False) or give the batch up uncommitted (a stop or a rebalance waits)."""
        return self._stopping.is_set() or self._draining

    def _give_up_inflight(self, why: str, timeout_s: float | None = None) -> None:
        """The batches in hand could not be finished: give them up, uncommitted, and carry on afresh."""
        count = self._cancel_inflight()
        self._last = None
        self._unfinished = 0
        if self.intake is not None:
            # Their records must come again: every partition goes back to its committed offset (a
            # rebalance does that too, but nothing may depend on one following).
            self.intake.rewind_to_committed()
        if count:
            log(logger, logging.WARNING, f"finishing the batches in hand {why}: abandoned uncommitted, their "
                "records are delivered again", batches=count, drain_timeout_s=timeout_s or self.config.drain_timeout_s)

    def halt(self, exc: BaseException) -> None:
        """Stop after a failure outside the main loop (in the rebalance listener): nothing more is
        committed, and `run` raises the failure (a requested stop that could not finish just stops)."""
        if self.broken is None and not isinstance(exc, Stopping | Abandoned):
            self.broken = exc
        log(logger, logging.ERROR, "pipeline halted", error=repr(exc))
        self._abandon()
        self._stopping.set()

    def _abandon(self) -> None:
        """Give up the batches in hand, uncommitted: from now on no offset is committed, since a later
        batch's offsets could pass an abandoned batch's messages (they are redelivered after a restart)."""
        self.completion.halted = True
        self._cancel_inflight()

    def _cancel_inflight(self) -> int:
        """Mark every batch in hand abandoned (the batches waiting behind one stop waiting) and cancel its
        database stage (rolled back unless it committed already); how many there were."""
        count = len(self._inflight)
        for b in self._inflight:
            b.abandon()
            b.task.cancel()
        self._inflight.clear()
        self.abandoned += count
        return count
