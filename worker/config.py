"""Settings from environment variables and matching flags, validated once at start-up.

Every setting has a documented default; an invalid one stops the process with one clear line naming the
variable. `settings()` is the one description of them: `rating-worker run --help` and the reference page
docs/configuration.md (written by `rating-worker docs`, checked by a test) are both made from it.
`Config` holds the worker's settings (`run`, and the operator's commands take what they need of it);
`ServeConfig` the read API's (`serve`), which runs apart from the workers and never needs a broker.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass, fields
from urllib.parse import parse_qs, urlparse

from worker.contract.types import default_topics


class ConfigError(ValueError):
    pass


ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
# The codecs Kafka defines; "none" is the Kafka producer's default.
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")


def mask_url(url: str) -> str:
    """The URL with its password replaced by ***, for logs and reprs."""
    parts = urlparse(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


@dataclass(frozen=True)
class Config:
    database_url: str = ""
    kafka_bootstrap_servers: str = ""
    kafka_input_topics: tuple[str, ...] = default_topics()  # each input type's (worker.contract.types)
    kafka_output_topic: str = "ratings.changed"
    kafka_dlq_topic: str = "ratings.dlq"
    kafka_group_id: str = "rating-worker"
    metrics_port: int = 9464
    metrics_host: str = "0.0.0.0"
    batch_size: int = 5000
    batch_wait_ms: int = 50
    sweep_chunk: int = 1000
    max_message_bytes: int = 1_048_576
    max_inflight_batches: int = 3
    db_pool_size: int = 6
    db_command_timeout_s: float = 60.0
    relay_interval_s: float = 5.0
    relay_min_age_s: float = 10.0
    dedupe_window_days: float = 8.0
    unrated_window_days: float = 30.0
    retention_chunk: int = 5000
    retention_interval_s: float = 60.0
    retry_backoff_max_s: float = 10.0
    watchdog_timeout_s: float = 300.0
    kafka_session_timeout_ms: int = 10000
    kafka_heartbeat_interval_ms: int = 3000
    kafka_fetch_max_wait_ms: int = 500
    kafka_isolation_level: str = "read_committed"
    kafka_compression_type: str = "none"
    drain_timeout_s: float = 30.0
    kafka_security_protocol: str = "PLAINTEXT"
    kafka_sasl_mechanism: str = ""
    kafka_sasl_username: str = ""
    kafka_sasl_password: str = ""
    kafka_ssl_cafile: str = ""
    kafka_ssl_certfile: str = ""
    kafka_ssl_keyfile: str = ""
    log_level: str = "INFO"
    migrate: bool = False

    def __repr__(self) -> str:
        # Secrets never reach a log line or a traceback through the configuration's repr.
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "database_url":
                value = mask_url(value)
            elif f.name == "kafka_sasl_password" and value:
                value = "***"
            shown.append(f"{f.name}={value!r}")
        return f"Config({', '.join(shown)})"

    __str__ = __repr__


@dataclass(frozen=True)
class ServeConfig:
    """The read API's settings (`rating-worker serve`)."""

    database_url: str = ""
    api_host: str = "0.0.0.0"
    api_port: int = 8080
    api_db_pool_size: int = 10
    api_db_timeout_s: float = 5.0
    api_ranks_max_age_s: float = 10.0
    api_cors_origins: tuple[str, ...] = ()
    support_token: str = ""
    log_level: str = "INFO"

    def __repr__(self) -> str:
        return f"ServeConfig(database_url={mask_url(self.database_url)!r}, api_host={self.api_host!r}, " \
               f"api_port={self.api_port}, support_token={'***' if self.support_token else ''!r})"

    __str__ = __repr__


HELP = {
    "database_url": "PostgreSQL URL, e.g. postgresql://user:pass@host:5432/ratings?sslmode=require (required)",
    "kafka_bootstrap_servers": "Kafka bootstrap servers, host:port[,host:port] (required)",
    "kafka_input_topics": "comma-separated input topics",
    "kafka_output_topic": "topic for rating.changed, keyed by player_id",
    "kafka_dlq_topic": "dead-letter topic for bad records: value, key and headers unchanged, the reason in headers",
    "kafka_group_id": "consumer group id",
    "metrics_port": "port of /metrics, /healthz, /readyz (0 disables)",
    "metrics_host": "address the metrics server binds",
    "batch_size": "most messages applied in one PostgreSQL transaction",
    "batch_wait_ms": "longest wait for a batch to fill, in milliseconds",
    "sweep_chunk": "ratings changed per PostgreSQL transaction when a FIDE list is published (rating.period_closed): "
                   "the longest another batch waits for its locks",
    "max_message_bytes": "record values larger than this are dead-lettered",
    "max_inflight_batches": "batches in PostgreSQL at once (kept in order; 1 = strictly one after another)",
    "db_pool_size": "PostgreSQL connections (at least MAX_INFLIGHT_BATCHES + 2)",
    "db_command_timeout_s": "a PostgreSQL call taking longer counts as an outage (rolled back, retried)",
    "relay_interval_s": "how often the outbox relay looks for unpublished changes",
    "relay_min_age_s": "the relay publishes only rows at least this old (the live path owns newer ones)",
    "dedupe_window_days": "how long a processed message's id is kept (by when the worker stored it) so that a "
                          "redelivery of it is a duplicate; 0 keeps every id. At least the input topics' "
                          "retention.ms plus a day (Kafka deletes whole segments, a little after retention.ms): "
                          "the worker refuses to start with less when the broker reports retention.ms "
                          "(docs/operations.md, \"Retention\")",
    "unrated_window_days": "how long the players a message left unchanged, and why, are kept (support's \"why did "
                           "my rating not change?\"); an unrated message's id and reason stay for the longer of "
                           "the two windows; 0 keeps them all",
    "retention_chunk": "rows removed per statement by the retention task (one worker of the group at a time)",
    "retention_interval_s": "pause between the retention task's passes; each pass also updates the size and "
                            "retention metrics",
    "retry_backoff_max_s": "longest pause between retries during a database or broker outage",
    "watchdog_timeout_s": "exit with code 75 (for the supervisor to restart the worker) when records are waiting "
                          "but no batch has completed for this long; 0 disables; must exceed DB_COMMAND_TIMEOUT_S",
    "kafka_session_timeout_ms": "consumer group session timeout; a silent worker loses its partitions after it",
    "kafka_heartbeat_interval_ms": "consumer heartbeat interval (about a third of the session timeout or less)",
    "kafka_fetch_max_wait_ms": "longest time the broker may hold a fetch waiting for records (Kafka's "
                               "fetch.max.wait.ms, 0 to 4000: the broker probe's request can wait behind a held "
                               "fetch). Kafka answers as soon as one record is there; the embedded broker holds "
                               "every fetch up to this long, so the latency benchmark sets 100 "
                               "(docs/operations.md, \"The embedded broker\")",
    "kafka_isolation_level": "read_committed (records of aborted or open transactions are never rated) or "
                             "read_uncommitted",
    "kafka_compression_type": "compression of the records the worker produces (rating.changed, dead letters): "
                              "none, gzip, snappy, lz4 or zstd; input records of every codec are read whatever "
                              "this says",
    "drain_timeout_s": "longest a stop (SIGTERM) or a rebalance waits for the batches in hand to finish; what is "
                       "not finished by then is abandoned uncommitted and redelivered",
    "kafka_security_protocol": "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    "kafka_sasl_mechanism": "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
    "kafka_sasl_username": "SASL user",
    "kafka_sasl_password": "SASL password",
    "kafka_ssl_cafile": "CA bundle for SSL",
    "kafka_ssl_certfile": "client certificate for SSL",
    "kafka_ssl_keyfile": "client key for SSL",
    "log_level": "DEBUG, INFO, WARNING or ERROR: JSON logs on stderr, one line per notable event",
    "migrate": "apply pending migrations before starting (default: refuse an out-of-date schema)",
    # the read API (ServeConfig)
    "api_host": "address the read API binds",
    "api_port": "port of the read API (/v1/..., /openapi.json, /healthz, /readyz, /metrics)",
    "api_db_pool_size": "PostgreSQL connections of one read API process (its requests in PostgreSQL at once)",
    "api_db_timeout_s": "a read taking longer fails with 503 and Retry-After (PostgreSQL cancels it)",
    "api_ranks_max_age_s": "how old the leaderboard a player's rank and percentile are placed on may be: each process "
                           "holds every board asked for in memory and reads it again at most this often (0: for "
                           "every request, exact, at the price of reading the whole board each time)",
    "api_cors_origins": "comma-separated origins whose pages may call the API from a browser (CORS), or * for "
                        "any; default: none (same origin only)",
    "support_token": "when set, `/v1/messages` (what became of a message) needs `Authorization: Bearer` this "
                     "token (give it by the environment: a flag shows in the process list); default: open to anyone "
                     "who can reach the API",
}


@dataclass(frozen=True)
class Setting:
    """One setting as a person reads it: its flag, its environment variable, its default and its meaning."""

    name: str
    flag: str
    env: str
    default: object  # None: none (required, or a switch that is off)
    meaning: str
    switch: bool


def settings(kind: type = Config) -> list[Setting]:
    """Every field of Config (or ServeConfig), in its order: the flag is `--batch-size` for BATCH_SIZE."""
    out = []
    for f in fields(kind):
        default = ",".join(f.default) if isinstance(f.default, tuple) else f.default
        out.append(Setting(f.name, "--" + f.name.replace("_", "-"), f.name.upper(),
                           None if default in ("", False) else default, HELP[f.name], f.type == "bool"))
    return out


def add_arguments(parser: argparse.ArgumentParser, kind: type = Config) -> None:
    """One flag per setting; the environment fills what flags leave out."""
    for s in settings(kind):
        if s.switch:
            parser.add_argument(s.flag, action="store_true", default=None, help=f"{s.meaning} [env {s.env}]")
            continue
        default = "" if s.default is None else s.default
        parser.add_argument(s.flag, default=None, metavar=s.env, help=f"{s.meaning} [env {s.env}; default {default!r}]")


def _convert(name: str, kind: str, raw: str):
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "bool":
            return raw if isinstance(raw, bool) else raw.strip().lower() in ("1", "true", "yes", "on")
        if kind.startswith("tuple"):
            return tuple(t.strip() for t in raw.split(",") if t.strip())
    except ValueError:
        raise ConfigError(f"{name.upper()}={raw!r}: expected {kind.split('[')[0]}") from None
    return raw


def _read(args: argparse.Namespace | None, env: dict[str, str] | None, overrides: dict, kind: type = Config):
    env = os.environ if env is None else env
    values = {}
    for f in fields(kind):
        raw = overrides.get(f.name)
        if raw is None and args is not None:
            raw = getattr(args, f.name, None)
        if raw is None:
            raw = env.get(f.name.upper())
        if raw is not None:
            values[f.name] = raw if not isinstance(raw, str) else _convert(f.name, f.type, raw)
    return kind(**values)


def load(args: argparse.Namespace | None = None, env: dict[str, str] | None = None, **overrides) -> Config:
    config = _read(args, env, overrides)
    validate(config)
    return config


def load_for_tool(
    args: argparse.Namespace | None = None, *, database: bool = False, kafka: bool = False,
    env: dict[str, str] | None = None,
) -> Config:
    """The settings one of the operator's commands needs, checked as `load` checks them; the rest
    keep their defaults (a command that only reads PostgreSQL does not need a broker)."""
    config = _read(args, env, {})
    if database:
        _validate_database(config)
    if kafka:
        _validate_kafka(config)
    return config


def load_serve(args: argparse.Namespace | None = None, env: dict[str, str] | None = None, **overrides) -> ServeConfig:
    """The read API's settings, checked: ConfigError names the first one wrong."""
    c = _read(args, env, overrides, ServeConfig)
    _validate_database(c)
    if not 0 <= c.api_port <= 65535:
        raise ConfigError(f"API_PORT={c.api_port}: must be 0..65535 (0: any free port)")
    if c.api_db_pool_size < 1:
        raise ConfigError(f"API_DB_POOL_SIZE={c.api_db_pool_size}: must be at least 1")
    if not (math.isfinite(c.api_db_timeout_s) and c.api_db_timeout_s > 0):
        raise ConfigError(f"API_DB_TIMEOUT_S={c.api_db_timeout_s}: must be positive")
    if not (math.isfinite(c.api_ranks_max_age_s) and c.api_ranks_max_age_s >= 0):
        raise ConfigError(f"API_RANKS_MAX_AGE_S={c.api_ranks_max_age_s}: must be 0 or more")
    for origin in c.api_cors_origins:
        parts = urlparse(origin)
        if origin != "*" and (parts.scheme not in ("http", "https") or not parts.netloc or parts.path):
            raise ConfigError(f"API_CORS_ORIGINS: {origin!r} is not an origin (scheme://host[:port], or *)")
    _validate_log_level(c.log_level)
    return c


def _validate_log_level(level: str) -> None:
    if level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ConfigError(f"LOG_LEVEL={level!r}: DEBUG, INFO, WARNING or ERROR")


def _validate_database(c: Config | ServeConfig) -> None:
    if not c.database_url:
        raise ConfigError("DATABASE_URL is not set: give the PostgreSQL URL (postgresql://user:pass@host/db)")
    parts = urlparse(c.database_url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ConfigError(f"DATABASE_URL must start with postgresql://, got {c.database_url.split(':')[0]!r}")
    # Parse it here, where the error can be worded without the URL: a driver's own parse error (a
    # password with an unescaped '#' or '/') would quote the password.
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ConfigError("DATABASE_URL is not a valid URL: its port is not a number (percent-encode special "
                          "characters such as # / @ : in the user name and password)") from None
    _validate_tls_files(parse_qs(parts.query))


#: The files a DATABASE_URL may name (libpq's parameters, which asyncpg reads)
_URL_FILES = ("sslrootcert", "sslcert", "sslkey")


def _validate_tls_files(query: dict[str, list[str]]) -> None:
    """Each file the URL names exists and can be read (a mistyped path would otherwise surface at the first
    connection, as an error that names no file); `sslrootcert=system` (libpq 16: the system's CAs) comes with
    verify-full, as libpq wants it, since the system's CAs vouch only for a host name."""
    for name in _URL_FILES:
        for path in query.get(name, []):
            if not path or (name == "sslrootcert" and path == "system"):
                continue
            if not os.path.isfile(path):
                raise ConfigError(f"DATABASE_URL's {name}={path}: no such file")
            if not os.access(path, os.R_OK):
                raise ConfigError(f"DATABASE_URL's {name}={path}: this user may not read it")
    mode = query.get("sslmode", ["verify-full"])[-1]
    if query.get("sslrootcert", [""])[-1] == "system" and mode != "verify-full":
        raise ConfigError(f"DATABASE_URL: sslrootcert=system needs sslmode=verify-full (the system's CAs vouch "
                          f"for a host name), not sslmode={mode}")


def _validate_kafka(c: Config) -> None:
    if not c.kafka_bootstrap_servers:
        raise ConfigError("KAFKA_BOOTSTRAP_SERVERS is not set: give host:port of the Kafka brokers")
    for server in c.kafka_bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"KAFKA_BOOTSTRAP_SERVERS: {server!r} is not host:port")
    if c.kafka_security_protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ConfigError(f"KAFKA_SECURITY_PROTOCOL={c.kafka_security_protocol!r}: not a Kafka protocol")
    if c.kafka_isolation_level not in ISOLATION_LEVELS:
        raise ConfigError(f"KAFKA_ISOLATION_LEVEL={c.kafka_isolation_level!r}: read_committed or read_uncommitted")
    if c.kafka_compression_type not in COMPRESSION_TYPES:
        raise ConfigError(f"KAFKA_COMPRESSION_TYPE={c.kafka_compression_type!r}: one of {', '.join(COMPRESSION_TYPES)}")
    if c.kafka_security_protocol.startswith("SASL") and not (c.kafka_sasl_mechanism and c.kafka_sasl_username):
        raise ConfigError("KAFKA_SASL_MECHANISM and KAFKA_SASL_USERNAME are required with SASL")


def validate(c: Config) -> None:
    _validate_database(c)
    _validate_kafka(c)
    if not c.kafka_input_topics:
        raise ConfigError("KAFKA_INPUT_TOPICS is empty")
    topics = set(c.kafka_input_topics)
    if c.kafka_output_topic in topics or c.kafka_dlq_topic in topics:
        raise ConfigError("KAFKA_OUTPUT_TOPIC and KAFKA_DLQ_TOPIC must not be input topics (a loop)")
    if not 0 <= c.metrics_port <= 65535:
        raise ConfigError(f"METRICS_PORT={c.metrics_port}: must be 0..65535")
    for name in ("batch_size", "batch_wait_ms", "sweep_chunk", "max_message_bytes", "db_pool_size"):
        if getattr(c, name) < 1:
            raise ConfigError(f"{name.upper()}={getattr(c, name)}: must be at least 1")
    if c.db_command_timeout_s <= 0:
        raise ConfigError(f"DB_COMMAND_TIMEOUT_S={c.db_command_timeout_s}: must be positive")
    if not (math.isfinite(c.drain_timeout_s) and c.drain_timeout_s > 0):
        raise ConfigError(f"DRAIN_TIMEOUT_S={c.drain_timeout_s}: must be positive")
    if c.watchdog_timeout_s != 0 and not (math.isfinite(c.watchdog_timeout_s)
                                          and c.watchdog_timeout_s > c.db_command_timeout_s):
        raise ConfigError(
            f"WATCHDOG_TIMEOUT_S={c.watchdog_timeout_s}: must be 0 (off) or longer than DB_COMMAND_TIMEOUT_S "
            f"({c.db_command_timeout_s}), the time one PostgreSQL call may legitimately take")
    _validate_retention(c)
    if c.max_inflight_batches < 1:
        raise ConfigError(f"MAX_INFLIGHT_BATCHES={c.max_inflight_batches}: must be at least 1")
    if c.db_pool_size < c.max_inflight_batches + 2:
        raise ConfigError(
            f"DB_POOL_SIZE={c.db_pool_size} must be at least MAX_INFLIGHT_BATCHES + 2 "
            f"({c.max_inflight_batches + 2}): each batch in flight, the outbox relay and marking need one")
    # The broker probe's metadata request may queue behind a fetch the broker holds: a wait near the
    # probe's 5 s timeout would make an idle worker's readiness flap.
    if not 0 <= c.kafka_fetch_max_wait_ms <= 4000:
        raise ConfigError(f"KAFKA_FETCH_MAX_WAIT_MS={c.kafka_fetch_max_wait_ms}: must be 0..4000")
    if c.kafka_heartbeat_interval_ms >= c.kafka_session_timeout_ms:
        raise ConfigError("KAFKA_HEARTBEAT_INTERVAL_MS must be smaller than KAFKA_SESSION_TIMEOUT_MS")
    _validate_log_level(c.log_level)


def _validate_retention(c: Config) -> None:
    for name in ("dedupe_window_days", "unrated_window_days"):
        value = getattr(c, name)
        if not (math.isfinite(value) and value >= 0):
            raise ConfigError(f"{name.upper()}={value}: must be 0 (keep forever) or a positive number of days")
    if c.retention_chunk < 1:
        raise ConfigError(f"RETENTION_CHUNK={c.retention_chunk}: must be at least 1")
    if not (math.isfinite(c.retention_interval_s) and c.retention_interval_s > 0):
        raise ConfigError(f"RETENTION_INTERVAL_S={c.retention_interval_s}: must be positive")

