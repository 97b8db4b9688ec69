"""The Kafka clients of the worker and its commands, built from `Config` in one place: every producer
gets the same delivery and compression settings, every consumer the same security and isolation.

Input records of every codec Kafka defines (gzip, snappy, lz4, zstd) are read: aiokafka decompresses
them with `cramjam` (installed with aiokafka's snappy/lz4/zstd extras, pyproject.toml).
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from worker.config import Config

# The assignors the worker offers when it joins its group, preferred first. The group uses one that
# every member offers: round robin among the workers themselves (as before), and range, the first of
# the Java consumer's defaults ("range, cooperative-sticky") and librdkafka's ("range,roundrobin"), so
# that a group which a member of those clients is in (or was in: a broker may keep the group's protocol
# while it is not empty) can still be joined. aiokafka has no cooperative protocol: a group whose members
# offer only cooperative-sticky cannot be joined (docs/operations.md, "Consumer group trouble").
ASSIGNORS = (RoundRobinPartitionAssignor, RangePartitionAssignor)

# The request limit of the worker's producers: the largest input record (MAX_MESSAGE_BYTES) with room for
# the headers a dead letter adds. A dead letter that would not fit is sent without its value
# (worker.contract.deadletter).
REQUEST_HEADROOM = 65536


def request_limit(config: Config) -> int:
    return config.max_message_bytes + REQUEST_HEADROOM


def kafka_security(c: Config) -> dict:
    """aiokafka keyword arguments for the security settings."""
    kw: dict = {"security_protocol": c.kafka_security_protocol}
    if c.kafka_security_protocol in ("SSL", "SASL_SSL"):
        from aiokafka.helpers import create_ssl_context

        kw["ssl_context"] = create_ssl_context(
            cafile=c.kafka_ssl_cafile or None,
            certfile=c.kafka_ssl_certfile or None,
            keyfile=c.kafka_ssl_keyfile or None,
        )
    if c.kafka_security_protocol.startswith("SASL"):
        kw.update(
            sasl_mechanism=c.kafka_sasl_mechanism,
            sasl_plain_username=c.kafka_sasl_username,
            sasl_plain_password=c.kafka_sasl_password,
        )
    return kw


def producer(config: Config, **overrides) -> AIOKafkaProducer:
    """A producer for the worker's own records (rating.changed, dead letters, re-submitted records)."""
    settings = dict(
        bootstrap_servers=config.kafka_bootstrap_servers,
        acks="all",
        # Tansu does not support InitProducerId; the changes' ids are stable and consumers drop
        # duplicates (docs/architecture.md, "Delivery").
        enable_idempotence=False,
        compression_type=None if config.kafka_compression_type == "none" else config.kafka_compression_type,
        linger_ms=2,
        max_batch_size=1_048_576,
        max_request_size=request_limit(config),
        request_timeout_ms=30000,
        **kafka_security(config),
    )
    settings.update(overrides)
    return AIOKafkaProducer(**settings)


def group_consumer(config: Config) -> AIOKafkaConsumer:
    """The worker's consumer: in its group, committing offsets itself, never reading past open or
    aborted transactions unless KAFKA_ISOLATION_LEVEL says so."""
    return AIOKafkaConsumer(
        bootstrap_servers=config.kafka_bootstrap_servers,
        group_id=config.kafka_group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=config.kafka_isolation_level,
        partition_assignment_strategy=ASSIGNORS,
        max_partition_fetch_bytes=max(1_048_576, request_limit(config)),
        fetch_max_bytes=52_428_800,
        session_timeout_ms=config.kafka_session_timeout_ms,
        heartbeat_interval_ms=config.kafka_heartbeat_interval_ms,
        max_poll_interval_ms=600000,
        fetch_max_wait_ms=config.kafka_fetch_max_wait_ms,
        **kafka_security(config),
    )


def admin(config: Config, request_timeout_ms: int = 10000) -> AIOKafkaAdminClient:
    """An admin client (the worker reads its input topics' retention.ms with it at start)."""
    return AIOKafkaAdminClient(bootstrap_servers=config.kafka_bootstrap_servers,
                               request_timeout_ms=request_timeout_ms, **kafka_security(config))


def reader(config: Config) -> AIOKafkaConsumer:
    """A consumer outside any group, for reading a topic from its start (the dead letters)."""
    return AIOKafkaConsumer(
        bootstrap_servers=config.kafka_bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        isolation_level=config.kafka_isolation_level,
        max_partition_fetch_bytes=max(1_048_576, request_limit(config)),
        **kafka_security(config),
    )
