"""Retention's settings (issue 42): the windows checked in one line, what each window removes, and the rule
that compares the dedupe window with the input topics' retention.ms (worker.pipeline.retention)."""

from __future__ import annotations

import asyncio

import pytest

from worker.config import Config, ConfigError, load
from worker.observability import Metrics, Readiness
from worker.pipeline.retention import Retention, needed_window_days, window_problem
from worker.pipeline.retry import Retrier

OK = {"DATABASE_URL": "postgresql://u@db/ratings", "KAFKA_BOOTSTRAP_SERVERS": "k1:9092"}
DAY = 86400.0


def test_the_defaults_cover_kafkas_default_retention_with_a_day_to_spare():
    c = load(env=OK)
    assert (c.dedupe_window_days, c.unrated_window_days, c.retention_chunk, c.retention_interval_s) == (8, 30, 5000, 60)
    assert needed_window_days(604_800_000) == 8  # Kafka's default retention.ms: 7 days
    assert window_problem(c, {"games.finished": 604_800_000}) is None


@pytest.mark.parametrize("env,line", [
    ({"DEDUPE_WINDOW_DAYS": "-1"}, "DEDUPE_WINDOW_DAYS=-1.0: must be 0 (keep forever) or a positive number of days"),
    ({"UNRATED_WINDOW_DAYS": "nan"}, "UNRATED_WINDOW_DAYS=nan: must be 0 (keep forever) or a positive number of days"),
    ({"UNRATED_WINDOW_DAYS": "a month"}, "UNRATED_WINDOW_DAYS='a month': expected float"),
    ({"RETENTION_CHUNK": "0"}, "RETENTION_CHUNK=0: must be at least 1"),
    ({"RETENTION_INTERVAL_S": "0"}, "RETENTION_INTERVAL_S=0.0: must be positive"),
])
def test_a_bad_window_is_refused_in_one_line(env, line):
    with pytest.raises(ConfigError) as refused:
        load(env={**OK, **env})
    assert str(refused.value) == line


def test_the_window_against_the_topics_retention():
    c = Config(dedupe_window_days=8)
    assert window_problem(c, {"a": 7 * 86_400_000, "b": None}).startswith(
        "DEDUPE_WINDOW_DAYS=8: topic b keeps its records forever (retention.ms=-1 or compacted)")
    assert window_problem(c, {"a": 7 * 86_400_000 + 1}) == (
        "DEDUPE_WINDOW_DAYS=8 is shorter than topic a's retention.ms=604800001 (7 days) plus a day's margin: set "
        "it to at least 9 (or 0 to keep every id)")
    assert window_problem(Config(dedupe_window_days=0), {"b": None}) is None  # every id kept
    assert needed_window_days(-1) is None and needed_window_days(0) == 1


def windows(dedupe: float, unrated: float) -> tuple[list, tuple]:
    config = Config(dedupe_window_days=dedupe, unrated_window_days=unrated)
    metrics = Metrics()
    r = Retention(config, metrics, Retrier(config, metrics, Readiness(metrics), asyncio.Event()))
    return r.targets(), r.windows()


def test_what_each_window_removes():
    # an unrated message's id (with its reason) stays for the longer window, and its rows go with it
    assert windows(8, 30)[0] == [("applied", 8 * DAY), ("unrated", 30 * DAY), (None, 30 * DAY)]
    assert windows(8, 3)[0] == [("applied", 8 * DAY), ("unrated", 8 * DAY), (None, 3 * DAY)]
    # 0 keeps forever: every id (and so the unrated rows, which never outlive theirs, only by their own window)
    assert windows(0, 30) == ([(None, 30 * DAY)], (0.0, 0.0, 30 * DAY))
    assert windows(8, 0) == ([("applied", 8 * DAY)], (8 * DAY, 0.0, 0.0))
    assert windows(0, 0)[0] == []
