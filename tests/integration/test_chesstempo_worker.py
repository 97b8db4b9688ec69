"""Chess Tempo attempts through the worker (3 partitions, small batches) end with replay's states."""

from __future__ import annotations

import io

import asyncpg
import orjson
import pytest

from tests.integration.harness import make_topics, produce, read_topic, wait_processed, worker_config
from tests.integration.test_worker_end_to_end import running_worker
from worker.commands.replay import replay
from worker.dev.streams import chesstempo_attempts


async def test_mixed_standard_and_blitz_attempts_equal_replay(database_url, broker):
    topics = await make_topics(broker, partitions=1)
    values = chesstempo_attempts(3000, users=60, problems=12, seed=8, days=3)
    await produce(broker.bootstrap_servers, topics.input, values)
    async with running_worker(worker_config(database_url, broker, topics, batch_size=250)):
        assert await wait_processed(database_url, len(values)) == len(values)
        published = await read_topic(broker.bootstrap_servers, topics.output, at_least=len(values))
    memory = await replay(values, io.BytesIO())
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch("SELECT player_id, system, category, rating, rd, games, version, last_at, extra "
                                "FROM ratings")
    finally:
        await conn.close()
    stored = {(r["player_id"], r["system"], r["category"]): r for r in rows}
    assert set(stored) == {tuple(k) for k in memory.states}
    for key, st in memory.states.items():
        row = stored[tuple(key)]
        assert row["rating"] == pytest.approx(st.rating, abs=1e-9), key
        assert (row["games"], row["version"]) == (st.games, st.version), key
        if st.rd is not None:
            assert row["rd"] == pytest.approx(st.rd, abs=1e-9)
        if key.system == "chesstempo-problem" and st.extra:
            extra = orjson.loads(row["extra"])
            assert extra["solves"] == st.extra["solves"]
            assert extra["mean"] == pytest.approx(st.extra["mean"], abs=1e-9)
    assert len(published) == len(values)  # one rating.changed per attempt: the user's; problems are not published
    assert any(k.system == "chesstempo-top" and st.extra["threshold"] is not None for k, st in memory.states.items())
