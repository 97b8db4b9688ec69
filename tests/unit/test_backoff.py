"""The one backoff and the one classification of failures (worker.pipeline.retry; issue 39, item 2)."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import asyncpg
import pytest
from aiokafka.errors import CommitFailedError, KafkaConnectionError

from worker.pipeline.inflight import PreviousBatchFailed
from worker.pipeline.retry import Backoff, Verdict, classify
from worker.store.connection import CannotConnect, Failure


def waits(backoff: Backoff, n: int) -> list[float]:
    return [backoff.next() for _ in range(n)]


def test_two_workers_that_lost_the_same_server_wait_differently():
    """Without jitter both came back at 0.1, 0.3, 0.7 ... s and knocked together; now each draws its own."""
    first, second = waits(Backoff(0.1, 30.0), 8), waits(Backoff(0.1, 30.0), 8)
    assert first != second
    assert all(a != b for a, b in zip(first, second, strict=True))


def test_each_wait_is_half_its_step_and_up_to_the_whole_doubling_to_the_cap():
    backoff = Backoff(0.1, 1.0, rng=random.Random(7))
    steps = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    for step, wait in zip(steps, waits(backoff, len(steps)), strict=True):
        assert step / 2 <= wait <= step
    assert waits(Backoff(0.1, 1.0, rng=_Fixed(0.0)), 3) == [0.05, 0.1, 0.2]  # equal jitter, the lowest draw
    assert waits(Backoff(0.1, 1.0, rng=_Fixed(1.0)), 3) == [0.1, 0.2, 0.4]  # and the highest


def test_a_success_starts_the_waits_again():
    backoff = Backoff(1.0, 30.0, rng=_Fixed(1.0))
    assert not backoff.waited and waits(backoff, 3) == [1.0, 2.0, 4.0] and backoff.waited
    backoff.reset()
    assert not backoff.waited and backoff.next() == 1.0


class _Fixed(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize(("exc", "verdict"), [
    (PreviousBatchFailed(), Verdict.WAIT),
    (asyncpg.exceptions.SerializationError("x"), Verdict.TRANSIENT),
    (ConnectionResetError(), Verdict.TRANSIENT),
    (asyncpg.exceptions.UniqueViolationError("x"), Verdict.RAISE),
    (KafkaConnectionError(), Verdict.TRANSIENT),
    (CommitFailedError(), Verdict.RAISE),
])
def test_every_failure_is_transient_wait_or_raise(exc, verdict):
    assert classify(exc) is verdict


def test_at_the_first_connection_only_a_setting_is_not_retried():
    """A refused login is retried at start (a secret rotated late), and so is a Unix socket not there yet (the
    URL's certificate files are checked with the settings, before); a URL asyncpg cannot use is not."""
    assert classify(asyncpg.exceptions.InvalidPasswordError("x"), connecting=True) is Verdict.TRANSIENT
    assert classify(asyncpg.exceptions.InvalidPasswordError("x")) is Verdict.RAISE  # in a batch: permanent
    assert classify(FileNotFoundError(2, "No such file or directory", "/run/postgresql/.s.PGSQL.5432"),
                    connecting=True) is Verdict.TRANSIENT
    assert classify(asyncpg.exceptions.ClientConfigurationError("x"), connecting=True) is Verdict.RAISE
    assert classify(CannotConnect(Failure("the server is unreachable", "x")), connecting=True) is Verdict.TRANSIENT


def test_no_retry_loop_of_the_worker_doubles_its_own_waits():
    """Every retry and restart waits by Backoff: no module but retry.py grows a delay of its own."""
    own = []
    for path in sorted((Path(__file__).resolve().parents[2] / "worker").rglob("*.py")):
        if path.name == "retry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign | ast.AugAssign) and "delay" in ast.unparse(node).split("=")[0] and \
                    isinstance(node.value, ast.BinOp | ast.Call) and "* 2" in ast.unparse(node.value):
                own.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert own == []
