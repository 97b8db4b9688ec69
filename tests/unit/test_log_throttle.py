"""aiokafka's repeated log records are rate-limited (one line per template per 30 s, with a count); ours are not."""

from __future__ import annotations

import io
import logging

import orjson
import pytest

from worker.observability import JsonFormatter, RepeatLimiter, setup_logging


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def record(name: str, msg: str, *args, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def test_first_passes_then_one_per_30s_with_the_count_of_what_was_dropped():
    clock = FakeClock()
    limiter = RepeatLimiter(clock=clock)
    template = "Unable connect to node with id %s: %s"
    first = record("aiokafka.client", template, 1, "refused")
    assert limiter.filter(first) and not getattr(first, "fields", None)
    passed = []
    for _ in range(58):  # one every half second for 29 s: all dropped
        clock.now += 0.5
        passed.append(limiter.filter(record("aiokafka.client", template, 2, "timed out")))
    assert not any(passed)
    clock.now += 1.0  # 30 s after the first
    again = record("aiokafka.client", template, 1, "refused")
    assert limiter.filter(again)
    assert again.fields == {"suppressed": 58}
    assert again.getMessage() == "Unable connect to node with id 1: refused"
    clock.now += 10
    assert not limiter.filter(record("aiokafka.client", template, 1, "refused"))
    clock.now += 20
    last = record("aiokafka.client", template, 1, "refused")
    assert limiter.filter(last) and last.fields == {"suppressed": 1}
    clock.now += 30
    quiet = record("aiokafka.client", template, 1, "refused")
    assert limiter.filter(quiet) and not getattr(quiet, "fields", None), "nothing was dropped: no count"


def test_templates_levels_and_loggers_are_limited_separately():
    clock = FakeClock()
    limiter = RepeatLimiter(clock=clock)
    assert limiter.filter(record("aiokafka.client", "Unable to update metadata from %s", [0]))
    assert limiter.filter(record("aiokafka.client", "Unable connect to node with id %s: %s", 0, "x"))
    assert limiter.filter(record("aiokafka.client", "Unable connect to node with id %s: %s", 0, "x",
                                 level=logging.WARNING))
    assert limiter.filter(record("aiokafka.consumer.group_coordinator", "Unable to update metadata from %s", [0]))
    assert not limiter.filter(record("aiokafka.client", "Unable to update metadata from %s", [1]))
    assert not limiter.filter(record("aiokafka.consumer.group_coordinator", "Unable to update metadata from %s", [0]))


def test_our_loggers_and_look_alike_names_are_not_limited():
    limiter = RepeatLimiter(clock=FakeClock())
    for name in ("rating_worker.pipeline", "aiokafkax", "asyncpg", "root"):
        assert all(limiter.filter(record(name, "publish failed, retrying")) for _ in range(100)), name
    assert limiter.filter(record("aiokafka", "Heartbeat failed: %r", "x"))
    assert not limiter.filter(record("aiokafka", "Heartbeat failed: %r", "y"))


def test_the_table_of_templates_stays_bounded():
    clock = FakeClock()
    limiter = RepeatLimiter(clock=clock, max_templates=50)
    for i in range(500):  # messages formatted before logging: every one its own template
        clock.now += 0.01
        assert limiter.filter(record("aiokafka.conn", f"connection {i} reset"))
        assert len(limiter._templates) <= 50


def test_the_count_is_a_field_of_the_json_line():
    clock = FakeClock()
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RepeatLimiter(clock=clock))
    for _ in range(5):
        handler.handle(record("aiokafka.client", "Unable to update metadata from %s", [0]))
        clock.now += 7.5
    lines = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert [line.get("suppressed") for line in lines] == [None, 3]
    assert lines[1]["msg"] == "Unable to update metadata from [0]" and lines[1]["level"] == "error"


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    kafka_level = logging.getLogger("aiokafka").level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("aiokafka").setLevel(kafka_level)


def test_setup_logging_limits_aiokafka_and_not_ours(restore_logging, capsys):
    setup_logging("INFO")
    for i in range(20):
        logging.getLogger("aiokafka.client").error("Unable connect to node with id %s: %s", 0, f"error {i}")
        logging.getLogger("rating_worker.pipeline").warning("publish failed, retrying")
    lines = [orjson.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert sum(line["logger"] == "aiokafka.client" for line in lines) == 1
    assert sum(line["logger"] == "rating_worker.pipeline" for line in lines) == 20
