"""`rating-worker run`: wire the store, the pipeline, the health server and the signals together."""

from __future__ import annotations

import asyncio
import logging
import signal

from worker.config import Config
from worker.observability import HealthServer, Metrics, log
from worker.pipeline import DB_ERRORS, Pipeline

logger = logging.getLogger("rating_worker.service")


async def connect_store(cfg: Config, stopping: asyncio.Event):
    """Connect with retries (the database may start after us); check or apply migrations."""
    from worker.store.migrate import ensure_schema
    from worker.store.postgres import PostgresStore

    delay = 0.5
    while True:
        try:
            store = await PostgresStore.connect(cfg.database_url, min_size=1, max_size=cfg.db_pool_size)
            await ensure_schema(cfg.database_url, apply=cfg.migrate)
            return store
        except DB_ERRORS as exc:
            if stopping.is_set():
                raise
            log(logger, logging.WARNING, "database not reachable, retrying", error=repr(exc), retry_in_s=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, cfg.retry_backoff_max_s)


async def run_service(cfg: Config, started: asyncio.Event | None = None) -> int:
    metrics = Metrics()
    health = HealthServer(metrics, cfg.metrics_host, cfg.metrics_port) if cfg.metrics_port else None
    if health is not None:
        await health.start()
        log(logger, logging.INFO, "metrics listening", url=f"http://{cfg.metrics_host}:{health.port}/metrics")
    stopping = asyncio.Event()
    pipeline: Pipeline | None = None

    def on_signal(name: str) -> None:
        log(logger, logging.INFO, "signal received, draining", signal=name)
        stopping.set()
        if pipeline is not None:
            pipeline.stop()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    store = await connect_store(cfg, stopping)
    try:
        pipeline = Pipeline(cfg, store, metrics, health)
        if stopping.is_set():
            return 0
        await pipeline.start()
        if started is not None:
            started.set()
        await pipeline.run()
        return 0
    finally:
        if pipeline is not None:
            await pipeline.close()
        await store.close()
        if health is not None:
            await health.stop()
