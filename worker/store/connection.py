"""How the worker's commands open a PostgreSQL connection, and why one failed, in one line: the one owner of
both, so that `run`, `migrate`, `replay`, `import`, `backfill` and the operator's commands say the same
thing for the same failure.

- `connect_args(url)`: asyncpg's arguments for DATABASE_URL. asyncpg reads libpq's `sslmode`,
  `sslrootcert`, `sslcert` and `sslkey` itself, except `sslrootcert=system` (libpq 16: the system's
  trusted CAs, and the host name checked), which it would open as a file: that becomes an SSL context on
  the system's trust store.
- `connect(url)`, `create_pool(url)`: asyncpg's, raising `CannotConnect` with the `Failure` when the
  connection can not be made.
- `describe(exc)`: a `Failure`, what happened (the server's certificate rejected and why, the login
  refused, TLS refused, the server unreachable, a file not there) in the words of the server or of OpenSSL,
  and the exit code a command ends with: 2 when a setting must change before anything can work, 3 when
  the server refused or did not answer. Never the password: neither asyncpg's errors nor PostgreSQL's
  messages carry it.

The files the URL names are checked before any of this, with the other settings (worker.config).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

__all__ = ["ERRORS", "EXIT_DATABASE", "EXIT_SETTING", "CannotConnect", "Failure", "connect", "connect_args", "create_pool",
           "describe"]

#: What connecting (or a statement on a connection) raises when PostgreSQL is not usable.
ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)
EXIT_SETTING = 2  # a setting must change: a URL asyncpg cannot use (its files: worker.config, at start)
EXIT_DATABASE = 3  # the server refused (the certificate, TLS, the login) or could not be reached


@dataclass(frozen=True)
class Failure:
    """Why PostgreSQL could not be used: `what` in a few words (a log line's field, /readyz's reason),
    `why` in the server's or the library's own words."""

    what: str
    why: str
    exit_code: int = EXIT_DATABASE

    def __str__(self) -> str:
        return f"{self.what}: {self.why}" if self.why else self.what


def connect_args(url: str) -> tuple[str, dict[str, Any]]:
    """asyncpg's DSN and keyword arguments for DATABASE_URL (`sslrootcert=system`: see the docstring; the
    settings' check has made sure that it comes with `sslmode=verify-full` or none)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    params = dict(query)
    if params.get("sslrootcert") != "system":
        return url, {}
    context = ssl.create_default_context()  # the system's CAs, the certificate and the host name checked
    if params.get("sslcert"):
        context.load_cert_chain(params["sslcert"], params.get("sslkey") or None)
    rest = [(k, v) for k, v in query if k not in ("sslmode", "sslrootcert", "sslcert", "sslkey")]
    return urlunsplit(parts._replace(query=urlencode(rest))), {"ssl": context}


class CannotConnect(ConnectionError):
    """No connection could be made; `failure` says why. A ConnectionError: whoever retried a connection
    that failed (`run` at its start) retries this one as well."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(str(failure))
        self.failure = failure


async def connect(url: str, **kwargs: Any) -> asyncpg.Connection:
    return await _opened(asyncpg.connect, url, kwargs)


async def create_pool(url: str, **kwargs: Any) -> asyncpg.Pool:
    """asyncpg's pool, its first connections made (min_size)."""
    return await _opened(asyncpg.create_pool, url, kwargs)


async def _opened(open_connection, url: str, kwargs: dict[str, Any]):
    try:
        dsn, extra = connect_args(url)
        return await open_connection(dsn, **extra, **kwargs)
    except ERRORS as exc:
        raise CannotConnect(describe(exc)) from exc


def describe(exc: BaseException) -> Failure:
    """What a failure to connect to (or to use) PostgreSQL was, in one line."""
    if isinstance(exc, CannotConnect):
        return exc.failure
    if isinstance(exc, ssl.SSLCertVerificationError):
        return Failure("the server's certificate was rejected", (exc.verify_message or str(exc)).rstrip("."))
    if isinstance(exc, ssl.SSLError):
        return Failure("the TLS handshake failed", exc.reason or str(exc))
    if isinstance(exc, asyncpg.InvalidAuthorizationSpecificationError):  # 28000 (pg_hba, no role), 28P01
        return Failure("the login was refused", str(exc))
    if isinstance(exc, asyncpg.InvalidCatalogNameError):
        return Failure("the database does not exist", str(exc))
    if isinstance(exc, asyncpg.PostgresError):
        return Failure("PostgreSQL refused", f"{exc} (SQLSTATE {exc.sqlstate})")
    if isinstance(exc, FileNotFoundError | IsADirectoryError | PermissionError):
        # Not the URL's certificate files (checked at start): a Unix socket not there yet, or a file the
        # environment names
        named = f"{exc.filename}: " if exc.filename else ""
        return Failure("a file cannot be opened", f"{named}{exc.strerror} (the Unix socket of the URL's host, or "
                       f"the file PGSSLROOTCERT, PGSSLCERT or PGSSLKEY names)")
    if isinstance(exc, asyncpg.ClientConfigurationError):
        return Failure("DATABASE_URL cannot be used", str(exc), EXIT_SETTING)
    if isinstance(exc, ConnectionError) and "rejected SSL upgrade" in str(exc):
        return Failure("the server does not offer TLS", f"{exc}; DATABASE_URL's sslmode asks for it")
    if isinstance(exc, TimeoutError):
        return Failure("the server is unreachable", "no answer in time")
    if isinstance(exc, OSError):
        return Failure("the server is unreachable", str(exc) or type(exc).__name__)
    return Failure("the connection failed", str(exc) or type(exc).__name__)
