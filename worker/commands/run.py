"""`rating-worker run`: the worker in production, wired together: the store, the pipeline, the health
server, the signals and the watchdog.

A stop (SIGTERM, SIGINT) at any moment ends within DRAIN_TIMEOUT_S + about 15 s with exit 0
(docs/operations.md, "Stopping"); the watchdog exits 75 for the supervisor when work waits and no
batch completes for WATCHDOG_TIMEOUT_S.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time

from worker import config as config_mod
from worker.config import Config
from worker.observability import HealthServer, Metrics, Readiness, log, setup_logging
from worker.pipeline import DB_ERRORS, Pipeline, Stopping
from worker.pipeline.retry import Backoff, Verdict, classify

logger = logging.getLogger("rating_worker.service")

#: The exit code after the watchdog gave up on a stuck pipeline (EX_TEMPFAIL: restart me).
WATCHDOG_EXIT_CODE = 75
STORE_CLOSE_TIMEOUT_S = 5.0
CONNECT_FIRST_S = 0.5  # the first wait after a failed connection at start (then longer, with jitter)


async def connect_store(cfg: Config, stopping: asyncio.Event, readiness: Readiness | None = None):
    """Connect with retries (the database may start after us, a secret may be rotated late: a refused login
    or certificate is retried too, docs/operations.md); check or apply migrations. Each failure is logged
    with its cause, which is also the readiness reason until it changes or the connection is made. None
    when a stop is asked for first (a connection attempt in progress is given up at once); a failure no
    retry can mend (a setting) is raised (`CannotConnect`)."""
    from worker.store.connection import CannotConnect, describe
    from worker.store.migrate import check_schema, migrate
    from worker.store.postgres import PostgresStore

    async def connect():
        store = await PostgresStore.connect(
            cfg.database_url, min_size=1, max_size=cfg.db_pool_size,
            # A half-open connection must fail, not hang: every batch behind it waits for it.
            command_timeout=cfg.db_command_timeout_s,
            server_settings={
                "idle_in_transaction_session_timeout": str(int(cfg.db_command_timeout_s * 2000)),
                "tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10", "tcp_keepalives_count": "3",
            },
        )
        try:
            await (migrate(store.pool) if cfg.migrate else check_schema(store.pool))
        except BaseException:
            await store.close()
            raise
        return store

    backoff = Backoff(CONNECT_FIRST_S, cfg.retry_backoff_max_s)
    failing = ""  # the readiness reason of the last failure
    try:
        while not stopping.is_set():
            attempt = asyncio.ensure_future(connect())
            stop = asyncio.ensure_future(stopping.wait())
            await asyncio.wait((attempt, stop), return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            if not attempt.done():
                attempt.cancel()
                await asyncio.gather(attempt, return_exceptions=True)
                return None
            try:
                return attempt.result()
            except DB_ERRORS as exc:
                failure = describe(exc)
                if classify(exc, connecting=True) is Verdict.RAISE:
                    raise CannotConnect(failure) from exc
                delay = backoff.next()
                log(logger, logging.WARNING, f"cannot connect to PostgreSQL: {failure.what}, retrying",
                    error=failure.why, retry_in_s=round(delay, 3))
                if readiness is not None and f"database: {failure}" != failing:
                    readiness.recover(failing)
                    failing = f"database: {failure}"
                    readiness.fail(failing)
            try:
                await asyncio.wait_for(stopping.wait(), delay)
            except TimeoutError:
                pass
        return None
    finally:
        if readiness is not None:
            readiness.recover(failing)


async def watchdog(pipeline: Pipeline, timeout_s: float, interval_s: float | None = None) -> None:
    """Return when the pipeline has had work (records fetched, batches in flight, or lag) but completed
    no batch for `timeout_s`. It runs on the event loop: it catches a pipeline that waits forever, not a
    loop blocked by a CPU-bound call (the liveness probe on /healthz, served by the same loop, does)."""
    interval_s = interval_s or min(5.0, timeout_s / 10)

    def progress() -> int:  # a FIDE list's sweep holds one batch for minutes, chunk after chunk
        return pipeline.batches + pipeline.database.sweep_chunks

    since, done = time.monotonic(), progress()
    while True:
        await asyncio.sleep(interval_s)
        now = time.monotonic()
        if progress() != done or not pipeline.has_work():
            since, done = now, progress()
        elif now - since >= timeout_s:
            log(logger, logging.ERROR, "watchdog: work is waiting but no batch completed, exiting for a restart",
                stuck_for_s=round(now - since, 1), watchdog_timeout_s=timeout_s, exit_code=WATCHDOG_EXIT_CODE)
            return


async def _run_watched(pipeline: Pipeline, cfg: Config) -> bool:
    """`pipeline.run()` under the watchdog; False when the watchdog gave up on it (it is cancelled:
    the batches in hand are abandoned uncommitted and redelivered to whoever consumes next)."""
    run = asyncio.create_task(pipeline.run())
    if not cfg.watchdog_timeout_s:
        await run
        return True
    dog = asyncio.create_task(watchdog(pipeline, cfg.watchdog_timeout_s))
    try:
        await asyncio.wait({run, dog}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # we were cancelled: so is the pipeline (as `await run` would do)
        run.cancel()
        raise
    finally:
        dog.cancel()
    if run.done():
        run.result()
        return True
    run.cancel()
    await asyncio.wait({run}, timeout=10)
    return False


async def run_service(
    cfg: Config,
    *,
    started: asyncio.Event | None = None,
    stop_event: asyncio.Event | None = None,
    metrics: Metrics | None = None,
    install_signals: bool = True,
) -> int:
    """Run until SIGTERM/SIGINT (or `stop_event`): drain the batch in hand, commit, exit 0."""
    metrics = metrics or Metrics()
    health = HealthServer(metrics, cfg.metrics_host, cfg.metrics_port) if cfg.metrics_port else None
    if health is not None:
        await health.start()
        log(logger, logging.INFO, "metrics listening", url=f"http://{cfg.metrics_host}:{health.port}/metrics")
    stopping = stop_event or asyncio.Event()
    pipeline: Pipeline | None = None

    async def stop_when_asked() -> None:
        await stopping.wait()
        if pipeline is not None:
            pipeline.stop()

    def on_signal(name: str) -> None:
        log(logger, logging.INFO, "signal received, draining", signal=name)
        stopping.set()

    if install_signals:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig.name)
    watcher = asyncio.create_task(stop_when_asked())
    store = None
    code = 0
    try:
        store = await connect_store(cfg, stopping, health.readiness if health is not None else None)
        if store is None:
            log(logger, logging.INFO, "worker stopped before it started (a stop was asked for while connecting "
                "to the database)")
            return 0
        pipeline = Pipeline(cfg, store, metrics, health, retention=True)  # the store is PostgreSQL's
        if not stopping.is_set():
            try:
                await pipeline.start()
            except Stopping:
                pass
        if stopping.is_set() and not pipeline.started:
            log(logger, logging.INFO, "worker stopped before it started (a stop was asked for while connecting "
                "to the broker)")
            return 0
        if started is not None:
            started.set()
        if stopping.is_set():
            pipeline.stop()
        if not await _run_watched(pipeline, cfg):
            code = WATCHDOG_EXIT_CODE
        return code
    finally:
        watcher.cancel()
        await _close(pipeline, store, health)
        if pipeline is not None and pipeline.started:
            log(logger, logging.INFO, "worker stopped", batches=pipeline.batches, abandoned=pipeline.abandoned)


async def _close(pipeline: Pipeline | None, store, health: HealthServer | None) -> None:
    """Close everything within a bounded time (about 15 s): a stuck client must not hold the exit. The
    server rolls back what a closed connection left open, and the group reassigns the partitions."""
    if pipeline is not None:
        await pipeline.close()
    if store is not None:
        try:
            await asyncio.wait_for(store.close(), STORE_CLOSE_TIMEOUT_S)
        except TimeoutError:
            log(logger, logging.WARNING, "closing the database connections timed out, closing them hard",
                timeout_s=STORE_CLOSE_TIMEOUT_S)
            store.pool.terminate()
    if health is not None:
        await health.stop()


def main(args: argparse.Namespace) -> int:
    try:
        cfg = config_mod.load(args)
    except config_mod.ConfigError as exc:
        print(f"rating-worker: configuration error: {exc}", file=sys.stderr)
        return 2
    setup_logging(cfg.log_level)
    from worker.store.connection import CannotConnect
    from worker.store.migrate import MigrationError

    try:
        return asyncio.run(run_service(cfg))
    except config_mod.ConfigError as exc:  # found at start: DEDUPE_WINDOW_DAYS against the topics' retention.ms
        print(f"rating-worker: configuration error: {exc}", file=sys.stderr)
        return 2
    except CannotConnect as exc:  # a setting no retry can mend
        print(f"rating-worker: configuration error: PostgreSQL: {exc.failure}", file=sys.stderr)
        return exc.failure.exit_code
    except MigrationError as exc:
        print(f"rating-worker: {exc}", file=sys.stderr)
        return 3


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="run the worker (production)", description=(
        "Consume the input topics, rate, publish rating.changed. Every setting is an environment variable "
        "or the matching flag; flags win. SIGTERM drains the batch in hand and exits 0."))
    config_mod.add_arguments(p)
    p.set_defaults(func=main)
