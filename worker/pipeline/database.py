"""A batch's database stage: planned ahead of its locks, then applied in one transaction, retried until
it commits (or it is abandoned): never skipped, never doubled.

The batch keeps its place in the ordering chain (worker.pipeline.inflight) at every attempt: a
transient database error rolls it back and it goes again after a backoff (the readiness reason
`database: batch N` meanwhile); the previous batch's failure sends it round again at once; a
permanent error (a broken constraint: retrying would stall every partition for good) ends it loudly,
naming its first and last message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from worker.engine import BatchResult, apply_batch, is_sweep, plan_batch, steps
from worker.engine.sweep import CHUNK
from worker.observability import Metrics, Readiness, log
from worker.pipeline.inflight import Batch, PreviousBatchFailed
from worker.pipeline.retry import DB_ERRORS, Abandoned, Retrier, Verdict, classify
from worker.store.base import StateStore

__all__ = ["DatabaseStage"]

logger = logging.getLogger("rating_worker.pipeline")


class DatabaseStage:
    def __init__(self, store: StateStore, metrics: Metrics, readiness: Readiness, retrier: Retrier) -> None:
        self.store = store
        self.metrics = metrics
        self.readiness = readiness
        self.retrier = retrier
        # A batch with a sweep publishes each piece as it commits, by `publish` (the pipeline's
        # Completion.publish: step 3 of the commit order); without it (tests) they go with the batch.
        self.publish: Callable[[BatchResult], Awaitable[None]] | None = None
        self.sweep_chunk = CHUNK
        self.faults_after_chunk: Callable[[int], None] | None = None  # the test-only fault seam
        self.sweep_chunks = 0  # chunks of sweeps applied: progress, for the watchdog

    def sweeps_publish_with(self, publish: Callable[[BatchResult], Awaitable[None]], chunk: int,
                            after_chunk: Callable[[int], None]) -> None:
        self.publish, self.sweep_chunk, self.faults_after_chunk = publish, chunk, after_chunk

    async def _chunk_committed(self, part: BatchResult) -> None:
        self.sweep_chunks += 1
        await self.publish(part)

    async def run(self, b: Batch) -> BatchResult:
        """Whatever ends it other than a commit marks the batch abandoned, so that the batches behind it
        stop waiting for it."""
        try:
            if not b.good:
                b.committed()
                return BatchResult()
            reason = f"database: batch {b.seq}"
            try:
                return await self._until_committed(b, reason)
            finally:
                self.readiness.recover(reason)
        except BaseException:
            b.abandon()
            raise

    async def _until_committed(self, b: Batch, reason: str) -> BatchResult:
        if any(is_sweep(item.message, item.system) for item in b.items):
            return await self._with_sweeps(b, reason)
        await self._plan(b)
        result = await self._retried(b, reason, lambda: apply_batch(self.store, b.good, hooks=b, plan=b.plan,
                                                                    systems=b.systems))
        b.committed()
        return result

    async def _retried(self, b: Batch, reason: str, attempt: Callable[[], Awaitable[BatchResult]]) -> BatchResult:
        """The one retry loop of a batch's database work: `attempt` until it commits."""
        backoff = self.retrier.backoff()
        while True:
            b.attempting()
            try:
                result = await attempt()
            except (*DB_ERRORS, PreviousBatchFailed) as exc:
                b.failed()
                verdict = classify(exc)
                if verdict is Verdict.WAIT:
                    continue  # the earlier batch is retrying; go again behind it
                if verdict is Verdict.RAISE:
                    # Retrying would stall every partition for good: stop loudly, naming the batch.
                    log(logger, logging.ERROR, "batch failed with a permanent database error", error=repr(exc),
                        sqlstate=getattr(exc, "sqlstate", None), messages=len(b.good),
                        first=f"{b.good[0].source} {b.good[0].id}", last=f"{b.good[-1].source} {b.good[-1].id}")
                    raise
                self.metrics.db_retries.inc()
                self.readiness.fail(reason)
                delay = backoff.next()
                log(logger, logging.WARNING, "batch rolled back, retrying", error=repr(exc), retry_in_s=delay,
                    messages=len(b.good))
                if self.retrier.giving_up():
                    raise Abandoned() from exc
                await self.retrier.sleep(delay)
                continue
            if backoff.waited:
                log(logger, logging.INFO, "database reachable again, batch applied", messages=len(b.good))
            return result

    async def _with_sweeps(self, b: Batch, reason: str) -> BatchResult:
        """A batch holding a sweep (FIDE's monthly list, worker.engine.sweep) goes alone, once the batch
        before it committed: its runs of ordinary messages as batches and each sweep in its chunks, in
        order, each retried until it commits (a retried sweep changes only what is left). The batches
        behind it wait for it, so this worker's partitions pause for the sweep's length; other workers
        wait at most one chunk's transaction for its locks. It starts once the batch before it is also
        published, and publishes as it goes, each run and each chunk as it commits: a player's changes go
        out in version order."""
        b.planned.set()  # nothing planned ahead: the batch behind plans on its own snapshot
        await b.after_previous()
        result = BatchResult()
        published = self._chunk_committed if self.publish is not None else None
        for step in steps(self.store, b.good, published, self.sweep_chunk, self.faults_after_chunk,
                          systems=b.systems):
            started = time.perf_counter()
            part = await self._retried(b, reason, step.apply)
            if step.sweep is not None:
                m, progress = step.sweep, step.progress
                log(logger, logging.INFO, "sweep applied", type=m.type, source=m.source, id=m.id,
                    states=progress.scanned, changes=progress.changed, chunks=progress.chunks,
                    seconds=round(time.perf_counter() - started, 3),
                    longest_chunk_s=round(progress.longest_chunk_s, 3))
            elif self.publish is not None:  # out before the sweep's chunks: each player's in version order
                await self.publish(part)
                part.records, part.row_ids = [], []
            result.extend(part)
        b.committed()
        return result

    async def _plan(self, b: Batch) -> None:
        """Compute the batch from a snapshot while earlier batches hold their locks (worker.engine.plan).

        Plans are made in batch order, each on top of the earlier ones; a failed read only means
        the batch is computed under its locks instead.
        """
        try:
            if b.prev is not None and not b.prev.is_committed:
                await b.prev.planned.wait()
            b.plan = await plan_batch(self.store, b.good, b.earlier_plans(), b.systems)
        except Exception as exc:  # noqa: BLE001 - the batch is then computed under its locks, where errors surface
            log(logger, logging.INFO, "planning failed, computing under the locks", error=repr(exc))
        finally:
            b.planned.set()
