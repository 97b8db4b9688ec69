"""The read API as one ASGI application (Starlette): its routes, how errors are answered, its health and
metrics. `rating-worker serve` runs it under uvicorn; tests and benchmarks start the same command.

- Every route reads PostgreSQL through worker.store.reads (every statement in queries.sql) on a pool
  whose sessions are read-only (`default_transaction_read_only`): the API works with a role that may only
  SELECT, against a replica, and takes no lock a worker waits on.
- A bad request is a 4xx problem (worker.api.problems); PostgreSQL down, refusing or too slow is a 503 with
  `Retry-After`, and `/readyz` says why; anything else is a bug: a 500 without details, logged here.
- The pool opens no connection at start (min_size 0): the API starts while the database is away and
  answers 503 until it is back, as the worker pauses and resumes.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time

import asyncpg
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from worker.api import boards, messages, openapi, pages, players
from worker.api.paths import SegmentPaths
from worker.api.problems import Problem, bad, problem_response
from worker.api.responses import FRESH, STATIC, dumps
from worker.api.standings import Standings
from worker.config import ServeConfig
from worker.store import connection
from worker.store.postgres import init_connection
from worker.store.reads import OperatorReads

logger = logging.getLogger("rating_worker.api")

RETRY_AFTER_S = 5
READY_TIMEOUT_S = 2.0
GZIP_FROM_BYTES = 1000  # smaller answers gain nothing from compression
# SQLSTATE classes of a database that is away or overloaded rather than of a bad statement: connection (08),
# invalid transaction state (25, a replica promoted), transaction rollback (40: a replica cancels a read that
# conflicts with recovery), insufficient resources (53), operator intervention (57: a statement timeout, a
# shutdown), system (58), invalid authorization (28), no such database (3D)
UNAVAILABLE = frozenset({"08", "25", "28", "3D", "40", "53", "57", "58"})


def unavailable(exc: BaseException) -> str | None:
    """Why a read failed because of the database (its reason for a 503), None for a bug."""
    if isinstance(exc, asyncpg.UndefinedTableError | asyncpg.UndefinedColumnError):
        return f"the database's schema is older than this rating-worker ({exc}): run `rating-worker migrate`"
    if isinstance(exc, asyncpg.PostgresError) and (exc.sqlstate or "")[:2] not in UNAVAILABLE:
        return None
    if isinstance(exc, connection.ERRORS):  # CannotConnect is a ConnectionError, an OSError
        return str(connection.describe(exc))
    return None


class Metrics:
    """Requests by route and status, and their latency by route: the API's own registry (a test or a
    benchmark may run several apps in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("rating_api_requests", "HTTP requests answered, by route and status",
                                ["route", "status"], registry=self.registry)
        self.latency = Histogram("rating_api_request_seconds", "Time to answer an HTTP request, by route",
                                 ["route"], registry=self.registry,
                                 buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5))


CONVERTOR = re.compile(r":\w+}")  # "{player_id:segment}" is labelled "{player_id}", as the document names it


class Measured:
    """ASGI middleware: each request counted and timed under its route's path template (`scope["route"]`),
    never its raw path (a player id per label would grow without bound)."""

    def __init__(self, app, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def sending(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = CONVERTOR.sub("}", getattr(scope.get("route"), "path", "unmatched"))
            self.metrics.requests.labels(route, str(status)).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - start)


async def healthz(request: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


async def readyz(request: Request) -> Response:
    """Ready when PostgreSQL answers and its schema is this version's; else 503 and why."""
    from worker.store.migrate import check_schema

    try:
        async with request.app.state.db.acquire(timeout=READY_TIMEOUT_S) as conn:
            await check_schema(conn)
    except Exception as exc:  # noqa: BLE001 - every failure is a reason not to be ready
        reason = unavailable(exc) or str(exc) or type(exc).__name__
        return Response(dumps({"status": "not ready", "reason": f"database: {reason}"}), 503,
                        headers={"Retry-After": str(RETRY_AFTER_S)}, media_type="application/json")
    return Response(b'{"status":"ready"}', media_type="application/json")


async def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


async def openapi_document(request: Request) -> Response:
    return Response(openapi.document_bytes(), headers={"Cache-Control": STATIC}, media_type="application/json")


async def fide_list(request: Request) -> Response:
    """FIDE's newest list as CSV, streamed through a cursor (worker.api.fide_lists says which month is served)."""
    from worker.api.fide_lists import check_served, csv_rows, month_of

    month = month_of(request.path_params["month"])
    if month is None:
        raise bad("month", f"{request.path_params['month']!r} is not a list month: YYYY-MM")
    category = request.query_params.get("rating_type", "standard")
    if category not in ("standard", "rapid", "blitz"):
        raise bad("rating_type", f"one of standard, rapid, blitz, got {category!r}")
    db = request.app.state.db
    await check_served(month, OperatorReads(db).fide_list_applied)

    async def body():
        # The connection is taken when the body is first asked for: a body never started (the client gone
        # before it) runs no `finally`, and a connection taken beforehand would never go back to the pool.
        async with db.acquire() as conn:
            async for chunk in csv_rows(OperatorReads(conn).fide_states(category), month):
                yield chunk

    # FRESH: the newest list can still gain a first rating or an import during its month
    return StreamingResponse(body(), media_type="text/csv; charset=utf-8", headers={
        "Cache-Control": FRESH, "Content-Disposition": f'attachment; filename="fide-{category}-{month}.csv"'})


def _problem(request: Request, exc: Exception) -> Response:
    return problem_response(exc, request)


def _http_error(request: Request, exc: HTTPException) -> Response:
    return problem_response(Problem(exc.status_code, exc.detail, headers=exc.headers), request)


def _error(request: Request, exc: Exception) -> Response:
    reason = unavailable(exc)
    if reason is not None:
        logger.warning("a read failed: PostgreSQL is unavailable: %s", reason)
        return problem_response(Problem(503, f"database: {reason}", headers={"Retry-After": str(RETRY_AFTER_S)}),
                                request)
    logger.error("a read failed (a bug): %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(Problem(500, "an internal error; it has been logged"), request)


ROUTES = [
    # A parameter is one segment of the path as sent (worker.api.paths): a player id may hold a "/", sent as
    # %2F, and is still told apart from the routes' own "/unrated" or "/history/...".
    Route("/v1/players/{player_id:segment}/history/{system:segment}/{category:segment}", players.history),
    Route("/v1/players/{player_id:segment}/unrated", players.unrated),
    Route("/v1/players/{player_id:segment}", players.player),
    # ... and an id sent with a bare "/" is the rest of the path, as before: the routes ending with more first.
    Route("/v1/players/{player_id:rest}/history/{system:segment}/{category:segment}", players.history),
    Route("/v1/players/{player_id:rest}/unrated", players.unrated),
    Route("/v1/players/{player_id:rest}", players.player),
    Route("/v1/leaderboards/{system:segment}/{category:segment}", boards.leaderboard),
    Route("/v1/messages", messages.message),
    Route("/v1/preview/{system:segment}/{category:segment}", messages.preview),
    Route("/v1/fide/lists/{month:segment}", fide_list),
    Route("/openapi.json", openapi_document),
    Route("/healthz", healthz),
    Route("/readyz", readyz),
    Route("/metrics", metrics),
    *pages.ROUTES,  # the pages a person looks at (/, /players/..., /leaderboards/..., /messages), built on these
]


async def unchanged_session(conn: asyncpg.Connection) -> None:
    """The pool's reset of a connection given back: asyncpg's own step only (it rolls back a transaction left
    open). Its default reset also sends `SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`
    at every release, a round trip per request for state the API never makes (no advisory lock, LISTEN or
    SET; cursors only inside transactions): 23% more first leaderboard pages a second without it, the
    API's CPU a request down a tenth and PostgreSQL's by a third (./dev bench api, docs/performance.md)."""


def create_app(config: ServeConfig) -> Starlette:
    metrics_ = Metrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        app.state.db = await connection.create_pool(
            config.database_url, min_size=0, max_size=config.api_db_pool_size, init=init_connection,
            command_timeout=config.api_db_timeout_s + 1, reset=unchanged_session,
            server_settings={"application_name": "rating-worker-api", "jit": "off",
                             "default_transaction_read_only": "on",
                             "statement_timeout": str(int(config.api_db_timeout_s * 1000))})
        app.state.standings = Standings(app.state.db, config.api_ranks_max_age_s)
        try:
            yield
        finally:
            await app.state.db.close()

    middleware = [Middleware(SegmentPaths), Middleware(Measured, metrics=metrics_),
                  Middleware(GZipMiddleware, minimum_size=GZIP_FROM_BYTES)]
    if config.api_cors_origins:
        middleware.append(Middleware(CORSMiddleware, allow_origins=list(config.api_cors_origins),
                                     allow_methods=["GET"], allow_headers=["Authorization", "If-None-Match"],
                                     expose_headers=["ETag", "Retry-After"], max_age=600))
    # The database's failures are answered where problems are (a 503, logged in one line); an exception of
    # any other class is a bug, answered 500 by the handler of Exception, and logged with its traceback.
    database = {kind: _error for kind in connection.ERRORS}
    app = Starlette(routes=ROUTES, middleware=middleware, lifespan=lifespan, exception_handlers={
        Problem: _problem, HTTPException: _http_error, **database, Exception: _error})
    # No redirect from a path to the same with a "/" added: /v1/players would lead to the player route of
    # an empty id; a path not served is a 404 problem.
    app.router.redirect_slashes = False
    app.state.config, app.state.metrics = config, metrics_
    return app
