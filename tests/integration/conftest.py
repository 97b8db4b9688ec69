"""Fixtures of the integration tests that several modules use (the services themselves: tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.integration.harness import Workers
from worker import dev


@pytest.fixture
async def own_broker():
    """A broker of this test's own (it is paused, stopped or emptied)."""
    broker = dev.start_broker()
    yield broker
    broker.stop()


@pytest.fixture
def workers(tmp_path):
    """Worker processes of the test; whatever still runs at its end is killed."""
    ws = Workers(tmp_path)
    yield ws
    ws.kill_all()
