"""The services the tests, the demo and the benchmarks use: the ones the environment names
(DATABASE_URL, KAFKA_BOOTSTRAP_SERVERS), else embedded ones started here; and `python -m
worker.dev` (`_main`), both started until Ctrl-C."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from worker.dev.broker import EmbeddedBroker, start_broker
from worker.dev.postgres import EmbeddedPostgres, start_postgres


class _External:
    """A service someone else runs (given by the environment): nothing to start or stop."""

    def stop(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class ExternalPostgres(_External):
    """A PostgreSQL given by ``DATABASE_URL``."""

    def __init__(self, url: str) -> None:
        self.url = url

    def url_for(self, database: str) -> str:
        """The same server and credentials, another database."""
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path="/" + database))

    def __repr__(self) -> str:
        from worker.config import mask_url

        return f"ExternalPostgres(url={mask_url(self.url)!r})"


class ExternalBroker(_External):
    """A broker given by ``KAFKA_BOOTSTRAP_SERVERS``."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers

    def __repr__(self) -> str:
        return f"ExternalBroker(bootstrap_servers={self.bootstrap_servers!r})"


def postgres_from_env_or_start(**kwargs: Any) -> ExternalPostgres | EmbeddedPostgres:
    """``DATABASE_URL`` if set (no-op stop), else :func:`start_postgres` (``kwargs`` go to it)."""
    url = os.environ.get("DATABASE_URL", "").strip()
    return ExternalPostgres(url) if url else start_postgres(**kwargs)


def broker_from_env_or_start(**kwargs: Any) -> ExternalBroker | EmbeddedBroker:
    """``KAFKA_BOOTSTRAP_SERVERS`` if set (no-op stop), else :func:`start_broker` (``kwargs`` go to it)."""
    servers = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    return ExternalBroker(servers) if servers else start_broker(**kwargs)


def _main(argv: list[str] | None = None) -> int:
    """``python -m worker.dev``: start both services, print their addresses, run until Ctrl-C."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pg-port", type=int)
    parser.add_argument("--kafka-port", type=int)
    parser.add_argument("--data-dir")
    args = parser.parse_args(argv)
    with start_postgres(args.data_dir, args.pg_port) as pg, start_broker(args.kafka_port) as broker:
        print(f"DATABASE_URL={pg.url}", flush=True)
        print(f"KAFKA_BOOTSTRAP_SERVERS={broker.bootstrap_servers}", flush=True)
        print(
            f"# postgres started in {pg.startup_seconds:.2f}s, broker in {broker.startup_seconds:.2f}s",
            flush=True,
        )
        _wait_forever()
    return 0


def _wait_forever() -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass


if __name__ == "__main__":
    raise SystemExit(_main())
