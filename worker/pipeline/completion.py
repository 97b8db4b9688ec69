"""Steps 2 to 4 of the commit order (worker.pipeline.loop), for a batch and for a sweep's chunk alike.

Once a batch's transaction committed (step 1):

2. its bad records go to the dead-letter topic, and the messages the rating code failed on with them;
3. its changes are published (`rating.changed`), then their outbox rows are taken out;
4. its offsets are committed.

A FIDE list's sweep commits in chunks: each chunk takes step 3 as it commits (`publish`), so that a list's
tens of thousands of changes never wait in memory; its batch then takes the steps that are left.

Each step is done once per batch: a stop may cut a completion short at any await, and the drain then
completes the batch again, skipping what was done. After a halt nothing more is committed. The batch's
metrics are taken here, after step 4, in one place. (quixstreams' `Checkpoint` is the model: one object
that knows the order, at a tenth of its size.)
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError

from worker.contract.reasons import BadMessage
from worker.engine import BatchResult
from worker.observability import Metrics, log, observe_many
from worker.pipeline.inflight import Batch
from worker.pipeline.publisher import Publisher
from worker.pipeline.retry import Retrier, Stopping
from worker.store.base import StateStore

__all__ = ["Completion"]

logger = logging.getLogger("rating_worker.pipeline")


class Completion:
    def __init__(self, store: StateStore, publisher: Publisher, consumer: AIOKafkaConsumer | None, metrics: Metrics,
                 retrier: Retrier, fault: Callable[[str, int], None] = lambda point, n: None) -> None:
        self.store = store
        self.publisher = publisher
        self.consumer = consumer
        self.metrics = metrics
        self.retrier = retrier
        self.fault = fault  # the test-only fault seam (worker.pipeline.faults)
        self.batches = 0  # batches completed
        self.halted = False
        # The offsets this process committed: a partition that hands out records below them has lost
        # its data (a broker that lost its log or the group's offsets) or was reset by hand.
        self.committed: dict[TopicPartition, int] = {}

    async def complete(self, b: Batch, result: BatchResult) -> None:
        """Steps 2 to 4 for a batch whose transaction committed, then its metrics."""
        if self.halted:
            raise Stopping()
        self.fault("kill_after_commit", self.batches + 1)
        if not b.reported:
            await self.dead_letters(b, result)
            b.reported = True
        if not b.published:
            await self.publish(result)
            b.published = True
        self.fault("kill_after_publish", self.batches + 1)
        await self.commit_offsets(b.offsets)
        self.batches += 1
        self._measure(b, result)

    async def dead_letters(self, b: Batch, result: BatchResult) -> None:
        """Step 2: the batch's bad records, and the messages the rating code failed on."""
        dead = list(b.dead)
        for index, error in result.failed:
            item = b.items[index]
            log(logger, logging.ERROR, "rating failed, message dead-lettered", type=item.message.type,
                source=item.message.source, id=item.message.id, error=error)
            dead.append((item.record, BadMessage("rating_error", error)))
        if dead:
            await self.publisher.dead_letter(dead)

    async def publish(self, part: BatchResult) -> None:
        """Step 3, for a batch or a sweep's chunk: its changes published, then their outbox rows taken out
        (a crash in between leaves the rows: the relay publishes them again, with the same ids)."""
        await self.publisher.publish(part.records)
        if part.row_ids:
            await self.retrier.db("mark published", lambda: self.store.mark_published(part.row_ids))

    def check_position(self, tp: TopicPartition, offset: int) -> None:
        """Records fetched from `offset`: below an offset this process committed, the partition went back.
        Nothing is applied twice (the processed ids are in PostgreSQL), but the operator must know:
        messages the broker lost are lost unless their producers send them again (docs/operations.md)."""
        committed = self.committed.get(tp, 0)
        if offset >= committed:
            return
        log(logger, logging.ERROR, "partition went back below an offset this worker committed: the broker lost "
            "its data or the group's offsets, or they were reset; messages already applied will be skipped",
            topic=tp.topic, partition=tp.partition, committed=committed, fetched=offset)
        self.metrics.offsets_went_back.labels(tp.topic).inc()
        self.committed[tp] = offset  # once per fall, not once per batch while it catches up

    async def commit_offsets(self, offsets: dict[TopicPartition, int]) -> None:
        """Step 4: the only place offsets are committed (never after a halt)."""
        if self.halted:
            raise Stopping()
        try:
            await self.retrier.broker("commit offsets", lambda: self.consumer.commit(offsets))
            self.committed.update(offsets)
        except (CommitFailedError, IllegalStateError) as exc:
            # The partitions went to another worker: it will see these messages again and skip them
            # as duplicates (their ids are in the database), so nothing is lost or applied twice.
            log(logger, logging.WARNING, "offset commit refused after a rebalance", error=repr(exc))

    def _measure(self, b: Batch, result: BatchResult) -> None:
        m = self.metrics
        counts = Counter((item.message.type, r.status, r.reason or "")
                         for item, r in zip(b.items, result.messages, strict=True)
                         if r.status != "failed")  # counted as dead-lettered
        for labels, n in counts.items():
            m.messages.labels(*labels).inc(n)
        # An event or attempt that changes nobody's rating is worth a line (a casual game is not: it is common).
        for item, r in zip(b.items, result.messages, strict=True):
            if r.status == "unrated" and item.message.type != "game.finished":
                msg = item.message
                log(logger, logging.INFO, "message not rated", type=msg.type, source=msg.source, id=msg.id,
                    ref=msg.ref, reason=r.reason)
        if b.items:
            m.batch_plans.labels("held" if result.planned else "recomputed").inc()
        # Records of the old message format have no timestamp (None); a clock behind the producer's, 0.
        now_ms = time.time() * 1000
        observe_many(m.record_latency, [max(0.0, now_ms - t) / 1000 for t in b.timestamps if t is not None and t > 0])
        m.batch_size.observe(len(b.items) + len(b.dead))
        m.batch_seconds.observe(time.perf_counter() - b.started)
