"""Why nothing changed, stored in PostgreSQL (issue 20, item 2): the scenario of
tests/unit/test_unrated_reasons.py through `replay` against a real PostgreSQL must store what the memory
store stores: every processed id with its outcome, reason, ref and repeated deliveries, and every player
a message left unchanged with why."""

from __future__ import annotations

import io

import asyncpg
import pytest

from tests.unit.test_unrated_reasons import run, scenario
from worker.commands.replay import replay
from worker.store.postgres import PostgresStore


@pytest.mark.parametrize("chunk", [1, 11])
async def test_postgres_stores_the_same_reasons_as_memory(database_url, chunk):
    memory = await run(scenario(), chunk)
    store = await PostgresStore.connect(database_url)
    try:
        errors = io.StringIO()
        await replay(scenario(), io.BytesIO(), store=store, chunk=chunk, errors=errors)
        assert errors.getvalue() == ""
    finally:
        await store.close()
    conn = await asyncpg.connect(database_url)
    try:
        processed = await conn.fetch("SELECT source, id, type, outcome, reason, ref, duplicates FROM processed_messages")
        unrated = await conn.fetch("SELECT player_id, source, id, system, reason, message_at FROM unrated_players")
    finally:
        await conn.close()
    assert {(r["source"], r["id"]): (r["type"], r["outcome"], r["reason"], r["ref"], r["duplicates"])
            for r in processed} == {
        k: (m.type, m.outcome, m.reason, m.ref, m.duplicates) for k, m in memory.messages.items()}
    assert {(r["player_id"], r["source"], r["id"], r["system"], r["reason"], r["message_at"].timestamp())
            for r in unrated} == {
        (pid, m.source, m.id, m.system, why, m.at) for m in memory.messages.values() for pid, why in m.left_out}
    assert len(unrated) >= 10  # the scenario leaves someone unchanged in eight messages
