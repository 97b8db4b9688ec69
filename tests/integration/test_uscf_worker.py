"""US Chess events through the worker: one transaction per batch, the same ratings as replay."""

from __future__ import annotations

import io

import pytest

from tests.integration.harness import produce, wait_processed, worker_config
from tests.integration.test_worker_end_to_end import running_worker, stored_ratings
from worker.commands.replay import replay
from worker.dev.streams import uscf_events


async def test_uscf_events_through_the_worker_equal_replay(database_url, broker, topics):
    values = uscf_events(60, players=30, seed=41)
    await produce(broker.bootstrap_servers, topics.input, values)
    async with running_worker(worker_config(database_url, broker, topics, batch_size=7)):
        assert await wait_processed(database_url, 60) == 60
    memory = await replay(values, io.BytesIO())
    stored = await stored_ratings(database_url)
    assert {k[2] for k in stored} >= {"regular", "quick", "blitz"}
    assert len(stored) == len(memory.states)
    for key, st in memory.states.items():
        row = stored[tuple(key)]
        assert row["rating"] == pytest.approx(st.rating, abs=1e-9)
        assert (row["games"], row["version"], row["rd"]) == (st.games, st.version, None)
