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

from worker.engine import BatchResult, apply_batch, plan_batch
from worker.observability import Metrics, Readiness, log
from worker.pipeline.inflight import Batch, PreviousBatchFailed
from worker.pipeline.retry import DB_ERRORS, Abandoned, Retrier, is_transient
from worker.store.base import StateStore

__all__ = ["DatabaseStage"]

logger = logging.getLogger("rating_worker.pipeline")


class DatabaseStage:
    def __init__(self, store: StateStore, metrics: Metrics, readiness: Readiness, retrier: Retrier) -> None:
        self.store = store
        self.metrics = metrics
        self.readiness = readiness
        self.retrier = retrier

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
        await self._plan(b)
        backoff = self.retrier.backoff()
        while True:
            b.attempting()
            try:
                result = await apply_batch(self.store, b.good, hooks=b, plan=b.plan)
            except PreviousBatchFailed:
                b.failed()
                continue  # the earlier batch is retrying; go again behind it
            except DB_ERRORS as exc:
                b.failed()
                if not is_transient(exc):
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
            b.committed()
            if backoff.waited:
                log(logger, logging.INFO, "database reachable again, batch applied", messages=len(b.good))
            return result

    async def _plan(self, b: Batch) -> None:
        """Compute the batch from a snapshot while earlier batches hold their locks (worker.engine.plan).

        Plans are made in batch order, each on top of the earlier ones; a failed read only means
        the batch is computed under its locks instead.
        """
        try:
            if b.prev is not None and not b.prev.is_committed:
                await b.prev.planned.wait()
            b.plan = await plan_batch(self.store, b.good, b.earlier_plans())
        except Exception as exc:  # noqa: BLE001 - the batch is then computed under its locks, where errors surface
            log(logger, logging.INFO, "planning failed, computing under the locks", error=repr(exc))
        finally:
            b.planned.set()
