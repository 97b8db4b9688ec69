"""The pipeline's side tasks are named and supervised (worker.pipeline.tasks): an unexpected exception is
logged at ERROR with the task's name, counted, and the task is started again after a backoff."""

from __future__ import annotations

import asyncio
import logging

from worker.config import load
from worker.observability import Metrics, Readiness
from worker.pipeline import tasks
from worker.pipeline.retry import Retrier
from worker.pipeline.tasks import SideTasks

CFG = load(env={"DATABASE_URL": "postgresql://x/y", "KAFKA_BOOTSTRAP_SERVERS": "k:9092", "RETRY_BACKOFF_MAX_S": "0.1"})


async def test_a_side_task_that_fails_is_said_counted_and_started_again(monkeypatch, caplog):
    monkeypatch.setattr(tasks, "FIRST_RESTART_S", 0.01)
    metrics = Metrics()
    stopping = asyncio.Event()
    retrier = Retrier(CFG, metrics, Readiness(metrics, reasons=()), stopping)
    runs = []

    async def relay() -> None:
        runs.append(len(runs))
        if len(runs) <= 2:
            raise RuntimeError(f"bug number {len(runs)}")
        await stopping.wait()  # the third run is healthy, until the stop

    side = SideTasks(metrics, retrier)
    with caplog.at_level(logging.ERROR, logger="rating_worker.pipeline"):
        side.start("relay", relay)
        for _ in range(200):
            if len(runs) == 3:
                break
            await asyncio.sleep(0.01)
    assert runs == [0, 1, 2] and side.running() == ["relay"]
    assert metrics.registry.get_sample_value("rating_worker_side_task_failures_total", {"task": "relay"}) == 2
    errors = [r for r in caplog.records if r.getMessage() == "side task failed, restarting it"]
    assert [r.fields["task"] for r in errors] == ["relay", "relay"]
    assert "bug number 1" in errors[0].fields["error"] and errors[0].exc_info is not None
    stopping.set()
    await side.stop()
    assert side.running() == []


async def test_every_side_task_has_a_series_from_the_start():
    metrics = Metrics()
    stopping = asyncio.Event()
    stopping.set()
    side = SideTasks(metrics, Retrier(CFG, metrics, Readiness(metrics, reasons=()), stopping))

    async def quiet() -> None:
        return None

    side.start("lag", quiet)
    await side.stop()
    assert metrics.registry.get_sample_value("rating_worker_side_task_failures_total", {"task": "lag"}) == 0
