"""A throwaway PostgreSQL with TLS, the way an operator runs one: Debian's server (the embedded one has no
OpenSSL), a certificate for `localhost` from a CA made here, `pg_hba` allowing only `hostssl ...
scram-sha-256`, and a role that is not a superuser, with a password that needs percent-encoding.

`.ci/run` installs Debian's `postgresql` package; where it (or `openssl`) is missing, `start` skips the
test, saying what to install. PostgreSQL refuses to run as root: as root the server runs as the package's
`postgres` user (or `nobody`), owning its own temporary directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from worker.dev import free_port
from worker.dev.debian_postgres import debian_server_bin_dir, debian_server_user
from worker.dev.processes import run_in_thread, spawn_child, stop_group

ROLE, DATABASE = "rating", "ratings"
PASSWORD = "p@ss:w/rd%"  # every character URLs reserve that a password is likely to hold
INSTALL_HINT = "apt-get install postgresql (.ci/run installs it)"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(folder: Path, name: str) -> None:
    """`name`.pem and `name`.key: a self-signed CA (EC P-256, valid two days)."""
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
             "-subj", f"/CN=rating-worker test {name}", "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=folder)


def make_server_certificate(folder: Path, ca: str) -> None:
    """server.pem and server.key for the name `localhost` only (not 127.0.0.1), signed by the CA `ca`."""
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr", cwd=folder)
    (folder / "san.cnf").write_text("subjectAltName=DNS:localhost\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-days", "2", "-extfile", "san.cnf", "-out", "server.pem", cwd=folder)


def _run_as() -> dict:
    """Popen's user and group to run the server as (worker.dev.debian_postgres.debian_server_user)."""
    run_as = debian_server_user()
    if run_as is None:
        pytest.skip("running as root, and there is no `postgres` or `nobody` user to run PostgreSQL as")
    return run_as


HBA = f"""\
local   all       postgres                trust
hostssl {DATABASE}  {ROLE}      127.0.0.1/32    scram-sha-256
hostssl {DATABASE}  {ROLE}      ::1/128         scram-sha-256
"""


@dataclass
class TlsPostgres:
    """The running server: `url(...)` builds the worker's DATABASE_URL to it; `certs` holds ca.pem (the
    server's CA) and other-ca.pem (a CA that signed nothing of it)."""

    base: Path
    port: int
    proc: subprocess.Popen

    @property
    def certs(self) -> Path:
        return self.base / "certs"

    def url(self, query: str = "", host: str = "localhost", password: str = PASSWORD, user: str = ROLE,
            database: str = DATABASE) -> str:
        """postgresql://rating:<the password, percent-encoded>@host:port/ratings?query"""
        url = f"postgresql://{user}:{quote(password, safe='')}@{host}:{self.port}/{database}"
        return f"{url}?{query}" if query else url

    def verified(self, host: str = "localhost", ca: str = "ca.pem", **kw) -> str:
        """The URL with sslmode=verify-full and this CA file."""
        return self.url(f"sslmode=verify-full&sslrootcert={self.certs / ca}", host=host, **kw)

    async def superuser(self, database: str = "postgres"):
        """An asyncpg connection as the superuser, over the Unix socket (the only way `postgres` gets in)."""
        import asyncpg

        return await asyncpg.connect(host=str(self.base / "socket"), port=self.port, user="postgres",
                                     database=database)

    def stop(self) -> None:
        stop_group(self.proc, signal.SIGINT, timeout=15)  # a fast shutdown, then SIGKILL
        shutil.rmtree(self.base, ignore_errors=True)


def start() -> TlsPostgres:
    """Make the CAs and the certificate, initdb, start the server, create the role and its database."""
    bin_dir = debian_server_bin_dir()
    if bin_dir is None:
        pytest.skip(f"Debian's PostgreSQL server is not installed: {INSTALL_HINT}")
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed (apt-get install openssl): it makes the test CA")
    run_as = _run_as()
    base = Path(tempfile.mkdtemp(prefix="rating-tls-postgres-"))
    certs, data, socket = base / "certs", base / "data", base / "socket"
    for folder in (certs, socket):
        folder.mkdir()
    make_ca(certs, "ca")
    make_ca(certs, "other-ca")
    make_server_certificate(certs, "ca")
    for name in ("ca.key", "other-ca.key"):
        (certs / name).unlink()
    if run_as:
        for path in (base, socket, certs / "server.key", certs / "server.pem"):
            os.chown(path, run_as["user"], run_as["group"])
    os.chmod(certs / "server.key", 0o600)
    env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C"}
    subprocess.run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
                   env=env, check=True, capture_output=True, timeout=120, **run_as)
    (data / "pg_hba.conf").write_text(HBA)
    port = free_port()
    settings = {
        "listen_addresses": "localhost", "port": str(port), "unix_socket_directories": str(socket),
        "ssl": "on", "ssl_cert_file": str(certs / "server.pem"), "ssl_key_file": str(certs / "server.key"),
        "password_encryption": "scram-sha-256", "fsync": "off", "log_connections": "on",
    }
    cmd = [str(bin_dir / "postgres"), "-D", str(data)] + [a for k, v in settings.items() for a in ("-c", f"{k}={v}")]
    # Our child, killed with us (a test run that is killed leaves no server behind).
    server = TlsPostgres(base, port, spawn_child(cmd, base / "postgres.log", env, base, **run_as))
    try:
        _wait_ready(server)
        _create_role(server)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: TlsPostgres, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not list((server.base / "socket").glob(".s.PGSQL.*")):
        if server.proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"PostgreSQL did not start:\n{(server.base / 'postgres.log').read_text()[-3000:]}")
        time.sleep(0.05)


def _create_role(server: TlsPostgres) -> None:
    import asyncpg

    async def create() -> None:
        conn = await server.superuser()
        try:
            await conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'")
            await conn.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
        finally:
            await conn.close()

    deadline = time.monotonic() + 30
    while True:  # the socket file appears a moment before the server accepts connections
        try:
            run_in_thread(create)
            return
        except (OSError, asyncpg.CannotConnectNowError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
