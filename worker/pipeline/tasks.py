"""The pipeline's side tasks, started by name and supervised.

The outbox relay, the lag monitor, the broker probe and retention (PostgreSQL's) each run beside the
batches. One that fails with an exception nobody expected (a bug, a library's surprise) must not end
silently: the failure is logged at ERROR with the task's name and traceback, counted in
`rating_worker_side_task_failures_total{task}`, and the task is started again after a backoff (about
1 s, doubling up to RETRY_BACKOFF_MAX_S, with jitter: worker.pipeline.retry.Backoff) while the batches
go on. Restarting rather than stopping the worker:
each side task only reports or catches up (the relay publishes what the live path left behind), so a
batch never waits for one, and a worker that keeps rating is better than one that restarts; the ERROR
lines and the counter, which the dashboard shows, say that something is wrong.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from worker.observability import Metrics
from worker.pipeline.retry import Retrier

__all__ = ["SideTasks"]

logger = logging.getLogger("rating_worker.pipeline")

FIRST_RESTART_S = 1.0


class SideTasks:
    def __init__(self, metrics: Metrics, retrier: Retrier) -> None:
        self.metrics = metrics
        self.retrier = retrier
        self._tasks: dict[str, asyncio.Task] = {}

    def start(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        self.metrics.side_task_failures.labels(name)  # a series at 0 from the start
        self._tasks[name] = asyncio.create_task(self._supervise(name, run), name=f"rating-worker {name}")

    async def _supervise(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        backoff = self.retrier.backoff(FIRST_RESTART_S)
        while not self.retrier.stopping.is_set():
            try:
                await run()
                return  # it ends at a stop
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - supervised: said, counted, started again
                self.metrics.side_task_failures.labels(name).inc()
                delay = backoff.next()
                logger.error("side task failed, restarting it", exc_info=exc,
                             extra={"fields": {"task": name, "error": repr(exc), "restart_in_s": round(delay, 3)}})
                await self.retrier.sleep(delay)

    async def stop(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()

    def running(self) -> list[str]:
        return [name for name, task in self._tasks.items() if not task.done()]

