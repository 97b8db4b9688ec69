"""Configuration: documented defaults, environment and flags, and one clear line when something is wrong."""

from __future__ import annotations

import subprocess
import sys

import pytest

from worker.config import ConfigError, load

OK = {"DATABASE_URL": "postgresql://u@db/ratings", "KAFKA_BOOTSTRAP_SERVERS": "k1:9092,k2:9092"}


def test_defaults_from_the_issue():
    c = load(env=OK)
    # Issue 2's four topics, and ratings.imported from issue 12.
    assert c.kafka_input_topics == (
        "games.finished", "events.finished", "puzzles.attempted", "accounts.closed", "ratings.imported")
    assert (c.kafka_output_topic, c.kafka_dlq_topic, c.kafka_group_id, c.metrics_port) == (
        "ratings.changed", "ratings.dlq", "rating-worker", 9464)


def test_environment_is_read_and_converted():
    c = load(env={**OK, "KAFKA_INPUT_TOPICS": "a, b", "BATCH_SIZE": "250", "RELAY_INTERVAL_S": "0.5"})
    assert c.kafka_input_topics == ("a", "b") and c.batch_size == 250 and c.relay_interval_s == 0.5


@pytest.mark.parametrize(
    "env,words",
    [
        ({"DATABASE_URL": ""}, "DATABASE_URL is not set"),
        ({"DATABASE_URL": "mysql://x/y"}, "DATABASE_URL must start with postgresql://"),
        ({"KAFKA_BOOTSTRAP_SERVERS": "kafka"}, "is not host:port"),
        ({"BATCH_SIZE": "many"}, "BATCH_SIZE='many': expected int"),
        ({"BATCH_SIZE": "0"}, "BATCH_SIZE=0: must be at least 1"),
        ({"METRICS_PORT": "70000"}, "METRICS_PORT=70000"),
        ({"KAFKA_OUTPUT_TOPIC": "games.finished"}, "must not be input topics"),
        ({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "KAFKA_SASL_MECHANISM and KAFKA_SASL_USERNAME are required"),
        ({"DB_POOL_SIZE": "2"}, "DB_POOL_SIZE=2 must be at least MAX_INFLIGHT_BATCHES + 2"),
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL='loud'"),
        ({"KAFKA_FETCH_MAX_WAIT_MS": "-1"}, "KAFKA_FETCH_MAX_WAIT_MS=-1: must be 0..4000"),
        ({"KAFKA_FETCH_MAX_WAIT_MS": "5000"}, "KAFKA_FETCH_MAX_WAIT_MS=5000: must be 0..4000"),
    ],
)
def test_invalid_settings_are_named(env, words):
    with pytest.raises(ConfigError) as info:
        load(env={**OK, **env})
    assert words in str(info.value)


def test_run_with_bad_configuration_exits_2_with_one_line():
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": "postgresql://u@db/x", "KAFKA_BOOTSTRAP_SERVERS": "k:1",
           "BATCH_SIZE": "-5"}
    proc = subprocess.run([sys.executable, "-m", "worker", "run"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["rating-worker: configuration error: BATCH_SIZE=-5: must be at least 1"]


def test_flags_win_over_environment():
    import argparse

    from worker.config import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--batch-size", "77", "--migrate"])
    c = load(args, env={**OK, "BATCH_SIZE": "5"})
    assert c.batch_size == 77 and c.migrate is True


# ---- issue 18: isolation, compression, the drain bound, and the clients built from them --------------------


async def test_the_consumer_reads_committed_records_by_default_and_the_setting_reaches_the_client():
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    from worker import kafka_clients

    c = load(env=OK)
    assert c.kafka_isolation_level == "read_committed"
    consumer = kafka_clients.group_consumer(c)
    assert consumer._isolation_level == "read_committed"
    # Round robin first (the workers among themselves), range for groups other clients are in.
    assert consumer._partition_assignment_strategy == (RoundRobinPartitionAssignor, RangePartitionAssignor)
    other = kafka_clients.group_consumer(load(env={**OK, "KAFKA_ISOLATION_LEVEL": "read_uncommitted"}))
    assert other._isolation_level == "read_uncommitted"
    reader = kafka_clients.reader(c)
    assert reader._isolation_level == "read_committed"
    for client in (consumer, other, reader):
        await client.stop()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_every_kafka_codec_can_compress_the_workers_own_records(codec):
    """KAFKA_COMPRESSION_TYPE (default none, as Kafka's producer): every codec is installed (cramjam), so
    a producer of each can be built, and aiokafka can read each on input."""
    from aiokafka import codec as codecs

    from worker import kafka_clients

    c = load(env={**OK, "KAFKA_COMPRESSION_TYPE": codec})
    producer = kafka_clients.producer(c)
    assert producer._compression_type == (None if codec == "none" else codec)
    await producer.stop()
    assert codecs.has_gzip() and codecs.has_snappy() and codecs.has_lz4() and codecs.has_zstd()
    assert load(env=OK).kafka_compression_type == "none"


@pytest.mark.parametrize("env,words", [
    ({"KAFKA_ISOLATION_LEVEL": "committed"}, "KAFKA_ISOLATION_LEVEL='committed': read_committed or read_uncommitted"),
    ({"KAFKA_COMPRESSION_TYPE": "brotli"}, "KAFKA_COMPRESSION_TYPE='brotli': one of none, gzip, snappy, lz4, zstd"),
    ({"DRAIN_TIMEOUT_S": "0"}, "DRAIN_TIMEOUT_S=0.0: must be positive"),
    ({"DRAIN_TIMEOUT_S": "nan"}, "DRAIN_TIMEOUT_S=nan: must be positive"),
])
def test_issue_18_settings_are_checked_at_start(env, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        load(env={**OK, **env})
