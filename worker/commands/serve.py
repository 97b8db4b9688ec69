"""`rating-worker serve`: the read API (worker.api) under uvicorn, a process of its own beside the workers.

It is stateless and read-only: run as many as the reads need, against the primary or a read replica, with
a role that may only SELECT (deploy/: the Compose service and the Kubernetes Deployment). It starts
while PostgreSQL is away (503 and /readyz say why until it is back); only a setting it can not work with
stops it, in one line (exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from worker import config as config_mod
from worker.config import ServeConfig
from worker.observability import log, setup_logging

logger = logging.getLogger("rating_worker.api")


async def _first_connection(cfg: ServeConfig) -> int | None:
    """Try PostgreSQL once at start: a setting that can not work (exit 2) stops the process in one line;
    anything else (the server away, a login refused) is logged, and the API answers 503 until it mends."""
    from worker.store.connection import EXIT_SETTING, connect, describe

    try:
        conn = await asyncio.wait_for(connect(cfg.database_url), cfg.api_db_timeout_s + 5)
    except Exception as exc:  # noqa: BLE001 - each is described; none but a setting stops the API
        failure = describe(exc)
        if failure.exit_code == EXIT_SETTING:
            print(f"rating-worker serve: configuration error: PostgreSQL: {failure}", file=sys.stderr)
            return EXIT_SETTING
        log(logger, logging.WARNING, f"cannot connect to PostgreSQL: {failure.what}; answering 503 until it "
            "can", error=failure.why)
        return None
    await conn.close()
    return None


async def serve(cfg: ServeConfig) -> int:
    import uvicorn

    from worker.api.app import create_app

    if (code := await _first_connection(cfg)) is not None:
        return code
    server = uvicorn.Server(uvicorn.Config(
        create_app(cfg), host=cfg.api_host, port=cfg.api_port, log_config=None, access_log=False,
        server_header=False, lifespan="on", timeout_graceful_shutdown=10))

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.05)
        host, port = server.servers[0].sockets[0].getsockname()[:2]
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        log(logger, logging.INFO, "serving the read API", url=f"http://{shown}:{port}", bound=f"{host}:{port}")

    announcing = asyncio.ensure_future(announce())
    try:
        await server.serve()
    except SystemExit:  # uvicorn's own exit when it cannot listen (its ERROR line says why)
        if server.started:
            raise
    finally:
        announcing.cancel()
    if not server.started:
        print(f"rating-worker serve: cannot listen on {cfg.api_host}:{cfg.api_port} (in use, or not allowed): "
              "change API_HOST or API_PORT", file=sys.stderr)
        return 2
    return 0


def main(args: argparse.Namespace) -> int:
    try:
        cfg = config_mod.load_serve(args)
    except config_mod.ConfigError as exc:
        print(f"rating-worker serve: configuration error: {exc}", file=sys.stderr)
        return 2
    setup_logging(cfg.log_level)
    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)  # its start and stop lines: ours say them
    return asyncio.run(serve(cfg))


def add_parser(sub) -> None:
    p = sub.add_parser("serve", help="the read API: ratings, histories, leaderboards, messages over HTTP",
                       description=(
        "Serve the read API (JSON over HTTP, OpenAPI document at /openapi.json): a player's ratings "
        "(/v1/players/ID), a rating's history, leaderboards, what became of a message, the points at stake "
        "before a game, FIDE's monthly lists; /healthz, /readyz and /metrics beside them. Read-only and "
        "stateless: run it apart from the workers, against a read replica if you have one, with a role that "
        "may only SELECT. Every setting is an environment variable or the matching flag; flags win. "
        "Example: rating-worker serve --api-port 8080"))
    config_mod.add_arguments(p, ServeConfig)
    p.set_defaults(func=main)
