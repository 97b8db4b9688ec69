"""Issue 38: the worker against a real PostgreSQL that speaks TLS and says no, as an operator meets it.

One throwaway server for the module (tests/integration/tls_postgres.py: Debian's PostgreSQL, a CA made
here, a certificate for `localhost`, `hostssl ... scram-sha-256` only, the role `rating` with the password
`p@ss:w/rd%`). The worker rates over `sslmode=verify-full` (pg_stat_ssl shows its connections' TLS), and
each refusal ends every command that connects, `run` included, with one line that names the cause and a
documented exit code (docs/operations.md, "Exit codes"), no traceback, and never the password. Without
Debian's server the module skips, saying what to install.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.integration import tls_postgres
from tests.integration.harness import http_get, make_topics, produce
from worker.dev import free_port
from worker.dev.streams import games, import_rows, write_csv

ROOT = Path(__file__).resolve().parents[2]
WRONG_PASSWORD = "n0t:th3/p@ss"
SECRETS = (tls_postgres.PASSWORD, quote(tls_postgres.PASSWORD, safe=""), WRONG_PASSWORD,
           quote(WRONG_PASSWORD, safe=""))


@pytest.fixture(scope="module")
def server():
    started = tls_postgres.start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """A history (for backfill and replay) and a ratings file (for import)."""
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "history.jsonl").write_bytes(b"\n".join(games(20, players=6, seed=38, source="/tls/history")) + b"\n")
    write_csv(folder / "ratings.csv", import_rows(3))
    return folder


@dataclass
class Done:
    code: int
    out: str
    err: str

    @property
    def said(self) -> str:
        return self.out + self.err


def command_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    # HOME: asyncpg would read ~/.postgresql/root.crt where the URL names no CA.
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "PYTHONPATH": str(ROOT), **extra}


async def rating_worker(env: dict[str, str], *args: str) -> Done:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "worker", *args, env=env, cwd=ROOT,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return Done(proc.returncode, out.decode(), err.decode())


def operator_commands(url: str, files: Path, tmp_path: Path) -> dict[str, tuple[str, ...]]:
    """Every command that connects to PostgreSQL but `run`, by name (the URL from DATABASE_URL, or the flag
    for those that rate in memory without it)."""
    return {
        "migrate": ("migrate",),
        "player": ("player", "p001"),
        "leaderboard": ("leaderboard", "csr", "blitz"),
        "outbox": ("outbox",),
        "message": ("message", "/tls/history", "game-1"),
        "backfill": ("backfill", str(files / "history.jsonl")),
        "replay": ("replay", str(files / "history.jsonl"), "-o", str(tmp_path / "changes.jsonl"), "--database-url",
                   url),
        "import": ("import", str(files / "ratings.csv"), "--quiet", "--database-url", url),
    }


async def run_until(env: dict[str, str], line: str, port: int, timeout: float = 60) -> tuple[Done, str]:
    """`rating-worker run` until its log has `line` (and then /readyz's answer), or until it exits by itself;
    stopped with SIGTERM. (Its output, /readyz's body or "" when it had exited.)"""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "worker", "run", env=env, cwd=ROOT,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, ready = b"", ""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            while line.encode() not in out and (chunk := await proc.stdout.read(65536)):
                out += chunk
    if line.encode() in out:
        ready = (await asyncio.to_thread(http_get, port, "/readyz"))[1]
    if not proc.stdout.at_eof():  # (a process that ended is not signalled: Popen would reap it, not asyncio)
        proc.send_signal(signal.SIGTERM)
    out += (await asyncio.wait_for(proc.communicate(), 60))[0]
    return Done(proc.returncode, out.decode(), ""), ready


def worker_env(tmp_path: Path, url: str, port: int, bootstrap: str = "127.0.0.1:9", **extra: str) -> dict[str, str]:
    return command_env(tmp_path, DATABASE_URL=url, KAFKA_BOOTSTRAP_SERVERS=bootstrap, METRICS_PORT=str(port),
                       METRICS_HOST="127.0.0.1", RETRY_BACKOFF_MAX_S="1", **extra)


def assert_no_secret(*outputs: str) -> None:
    for text in outputs:
        assert not [s for s in SECRETS if s in text], text


# --- every refusal, every command ---------------------------------------------------------------------------------

# (name, how the URL goes wrong, the cause the line must say, the exit code)
REFUSALS = [
    ("wrong CA", lambda s: s.verified(ca="other-ca.pem"),
     "the server's certificate was rejected: unable to get local issuer certificate", 3),
    ("host name mismatch", lambda s: s.verified(host="127.0.0.1"),
     "the server's certificate was rejected: IP address mismatch, certificate is not valid for '127.0.0.1'", 3),
    ("wrong password", lambda s: s.verified(password=WRONG_PASSWORD),
     'the login was refused: password authentication failed for user "rating"', 3),
    ("pg_hba refusal", lambda s: s.verified(database="postgres"),
     'the login was refused: no pg_hba.conf entry for host "127.0.0.1", user "rating", database "postgres", '
     'SSL encryption', 3),
    ("sslmode=disable", lambda s: s.url("sslmode=disable"),
     'the login was refused: no pg_hba.conf entry for host "127.0.0.1", user "rating", database "ratings", '
     'no encryption', 3),
    ("system CAs", lambda s: s.url("sslrootcert=system"),
     "the server's certificate was rejected: unable to get local issuer certificate", 3),
    ("missing CA file", lambda s: s.verified(ca="missing-ca.pem"), None, 2),
    ("system CAs without verify-full", lambda s: s.url("sslmode=require&sslrootcert=system"),
     "DATABASE_URL: sslrootcert=system needs sslmode=verify-full (the system's CAs vouch for a host name), not "
     "sslmode=require", 2),
]


@pytest.mark.parametrize("refusal,make_url,cause,code", REFUSALS, ids=[r[0] for r in REFUSALS])
async def test_every_command_says_why_in_one_line(server, files, tmp_path, refusal, make_url, cause, code):
    url = make_url(server)
    cause = cause or f"DATABASE_URL's sslrootcert={server.certs / 'missing-ca.pem'}: no such file"
    env = command_env(tmp_path, DATABASE_URL=url)
    commands = operator_commands(url, files, tmp_path)
    done = dict(zip(commands, await asyncio.gather(*(rating_worker(env, *a) for a in commands.values())),
                    strict=True))
    wrong = {}
    for name, d in done.items():
        prefix = "rating-worker import: failed: cannot connect to PostgreSQL at " if name == "import" and code == 3 \
            else f"rating-worker {name}: "
        lines = d.err.splitlines()
        if not (d.code == code and d.out == "" and len(lines) == 1 and lines[0].startswith(prefix)
                and lines[0].endswith(cause)):
            wrong[name] = (d.code, d.out, d.err)
    assert wrong == {}, f"expected exit {code} and one line ending {cause!r}"
    assert_no_secret(*(d.said for d in done.values()))


@pytest.mark.parametrize("refusal,make_url,cause,code", REFUSALS, ids=[r[0] for r in REFUSALS])
async def test_run_names_the_cause_in_its_log_and_its_readiness(server, tmp_path, refusal, make_url, cause, code):
    """A refused certificate or login is retried (a secret rotated late), said in the retry line and in
    /readyz; a setting that cannot work (a file missing) stops the worker at start with exit 2."""
    url, port = make_url(server), free_port()
    if code == 2:
        cause = cause or f"DATABASE_URL's sslrootcert={server.certs / 'missing-ca.pem'}: no such file"
        done, _ = await run_until(worker_env(tmp_path, url, port), "never said", port)
        assert (done.code, done.out.splitlines()) == (2, [f"rating-worker: configuration error: {cause}"])
        return
    what, why = cause.split(": ", 1)
    retrying = f"cannot connect to PostgreSQL: {what}, retrying"
    done, ready = await run_until(worker_env(tmp_path, url, port), retrying, port)
    assert retrying in done.out and why.replace('"', '\\"') in done.out, done.out[-3000:]
    assert ready == f"not ready: starting, database: {cause}\n"
    assert done.code == 0 and "Traceback" not in done.out, done.out[-3000:]
    assert_no_secret(done.out)


# --- the worker at work over verify-full ---------------------------------------------------------------------------


async def test_the_worker_rates_over_verify_full(server, files, broker, tmp_path):
    url = server.verified()
    env = command_env(tmp_path, DATABASE_URL=url)
    migrated = await rating_worker(env, "migrate")
    assert migrated.code == 0 and migrated.out.startswith("applied: 0001_initial"), migrated.said
    backfilled = await rating_worker(env, "backfill", str(files / "history.jsonl"), "--quiet")
    assert backfilled.code == 0 and ": 20 lines in " in backfilled.out, backfilled.said

    topics, port = await make_topics(broker), free_port()
    live = games(30, players=6, seed=39, source="/tls/live")
    await produce(broker.bootstrap_servers, topics.input, live)
    worker = worker_env(tmp_path, url, port, broker.bootstrap_servers, KAFKA_INPUT_TOPICS=topics.input,
                        KAFKA_OUTPUT_TOPIC=topics.output, KAFKA_DLQ_TOPIC=topics.dlq, KAFKA_GROUP_ID=topics.group,
                        KAFKA_SESSION_TIMEOUT_MS="2000", KAFKA_HEARTBEAT_INTERVAL_MS="300")
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "worker", "run", env=worker, cwd=ROOT,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        conn = await server.superuser(tls_postgres.DATABASE)
        try:
            async with asyncio.timeout(90):
                while await conn.fetchval("SELECT count(*) FROM processed_messages WHERE source = '/tls/live'") < len(
                        live):
                    await asyncio.sleep(0.3)
            sessions = await conn.fetch(
                "SELECT s.ssl, s.version FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
                "WHERE a.usename = 'rating' AND a.application_name = 'rating-worker'")
        finally:
            await conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        out = (await asyncio.wait_for(proc.communicate(), 60))[0].decode()
    assert proc.returncode == 0, out[-3000:]
    assert sessions and all(s["ssl"] and s["version"].startswith("TLSv1.") for s in sessions), sessions

    asked = {"player": ("player", "p001"), "leaderboard": ("leaderboard", "csr", "blitz"), "outbox": ("outbox",),
             "message": ("message", "/tls/live", "game-1")}
    answers = dict(zip(asked, await asyncio.gather(*(rating_worker(env, *a) for a in asked.values())), strict=True))
    assert {name: d.code for name, d in answers.items()} == dict.fromkeys(asked, 0), answers
    assert "applied" in answers["message"].out
    assert_no_secret(migrated.said, backfilled.said, out, *(d.said for d in answers.values()))


async def test_sslrootcert_system_trusts_what_the_system_trusts(server, tmp_path):
    """libpq 16's sslrootcert=system: OpenSSL's default trust store, here the test CA through SSL_CERT_FILE
    (which OpenSSL reads for it), with the host name checked as verify-full checks it."""
    env = command_env(tmp_path, DATABASE_URL=server.url("sslrootcert=system"), SSL_CERT_FILE=str(server.certs / "ca.pem"))
    trusted = await rating_worker(env, "outbox")
    assert trusted.code == 0 and trusted.out.startswith("outbox backlog:"), trusted.said
    env["DATABASE_URL"] = server.url("sslrootcert=system", host="127.0.0.1")
    by_address = await rating_worker(env, "outbox")
    assert by_address.code == 3 and "certificate is not valid for '127.0.0.1'" in by_address.err, by_address.said
