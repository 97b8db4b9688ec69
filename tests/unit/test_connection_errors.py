"""worker.store.connection: one line for each way PostgreSQL says no, and the files DATABASE_URL names
checked at start-up (worker.config). The real refusals, from a real TLS server, are in
tests/integration/test_postgres_tls.py; here, each kind of error the driver raises, and the settings."""

from __future__ import annotations

import os
import ssl

import asyncpg
import pytest

from worker.config import ConfigError, load_for_tool
from worker.store.connection import EXIT_DATABASE, EXIT_SETTING, CannotConnect, connect_args, describe


def _certificate_error(message: str) -> ssl.SSLCertVerificationError:
    exc = ssl.SSLCertVerificationError(1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message}")
    exc.verify_message = message
    return exc


@pytest.mark.parametrize("exc,line,code", [
    (_certificate_error("unable to get local issuer certificate"),
     "the server's certificate was rejected: unable to get local issuer certificate", EXIT_DATABASE),
    (asyncpg.InvalidPasswordError('password authentication failed for user "rating"'),
     'the login was refused: password authentication failed for user "rating"', EXIT_DATABASE),
    (asyncpg.InvalidAuthorizationSpecificationError('no pg_hba.conf entry for host "127.0.0.1", user "rating", '
                                                    'database "ratings", no encryption'),
     'the login was refused: no pg_hba.conf entry for host "127.0.0.1"', EXIT_DATABASE),
    (asyncpg.InvalidCatalogNameError('database "ratingz" does not exist'),
     'the database does not exist: database "ratingz" does not exist', EXIT_DATABASE),
    (ConnectionError('PostgreSQL server at "db:5432" rejected SSL upgrade'),
     "the server does not offer TLS", EXIT_DATABASE),
    (ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1)"),
     "the server is unreachable: [Errno 111] Connect call failed", EXIT_DATABASE),
    (TimeoutError(), "the server is unreachable: no answer in time", EXIT_DATABASE),
    (FileNotFoundError(2, "No such file or directory"),
     "a file cannot be opened: No such file or directory (the Unix socket of the URL's host", EXIT_DATABASE),
    (asyncpg.ClientConfigurationError("`sslmode` parameter must be one of: disable, ..."),
     "DATABASE_URL cannot be used: `sslmode` parameter", EXIT_SETTING),
])
def test_each_refusal_is_one_line_that_says_what_happened(exc, line, code):
    failure = describe(exc)
    assert str(failure).startswith(line) and "\n" not in str(failure) and failure.exit_code == code
    assert describe(CannotConnect(failure)) is failure


@pytest.mark.parametrize("name", ["sslrootcert", "sslcert", "sslkey"])
def test_a_file_the_url_names_must_exist(tmp_path, name):
    missing = tmp_path / "missing.pem"
    with pytest.raises(ConfigError, match=f"DATABASE_URL's {name}={missing}: no such file"):
        load_for_tool(env={"DATABASE_URL": f"postgresql://u:p@db/r?sslmode=verify-full&{name}={missing}"},
                      database=True)
    missing.write_text("")
    load_for_tool(env={"DATABASE_URL": f"postgresql://u:p@db/r?sslmode=verify-full&{name}={missing}"}, database=True)


def test_sslrootcert_system_is_the_systems_trust_store_with_the_host_name_checked():
    dsn, extra = connect_args("postgresql://u:p%40@db:5432/r?sslrootcert=system&sslmode=verify-full&application_name=x")
    assert dsn == "postgresql://u:p%40@db:5432/r?application_name=x"
    context = extra["ssl"]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == ssl.create_default_context().cert_store_stats()["x509_ca"]
    assert connect_args("postgresql://u@db/r?sslmode=require") == ("postgresql://u@db/r?sslmode=require", {})


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file: run the tests as another user to check this")
def test_a_file_the_url_names_must_be_readable(tmp_path):
    key = tmp_path / "client.key"
    key.write_text("")
    key.chmod(0)
    with pytest.raises(ConfigError, match=f"DATABASE_URL's sslkey={key}: this user may not read it"):
        load_for_tool(env={"DATABASE_URL": f"postgresql://u:p@db/r?sslkey={key}"}, database=True)


@pytest.mark.parametrize("mode", ["require", "verify-ca", "disable"])
def test_sslrootcert_system_wants_verify_full_as_libpq_does(mode):
    with pytest.raises(ConfigError, match=f"sslrootcert=system needs sslmode=verify-full .*not sslmode={mode}"):
        load_for_tool(env={"DATABASE_URL": f"postgresql://u@db/r?sslrootcert=system&sslmode={mode}"}, database=True)
    load_for_tool(env={"DATABASE_URL": "postgresql://u@db/r?sslrootcert=system"}, database=True)
