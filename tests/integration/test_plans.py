"""Plans (engine.plan_batch): a batch computed ahead of its locks is used only when it still holds.

The same scenarios run against the in-memory store and PostgreSQL. Each ends with the states that
applying the messages one after another, in order, gives: a plan that holds changes nothing, and a plan
that no longer holds is recomputed under the locks. The hard case: a plan laid on top of an earlier
batch's plan, when that earlier batch was recomputed under its locks and wrote the same version
numbers with other values.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from worker.contract.decode import decode
from worker.dev.streams import TCS, game_event
from worker.engine import apply_batch, plan_batch
from worker.ratings.state import StateKey
from worker.store.memory import MemoryStore
from worker.store.postgres import PostgresStore

T0 = datetime(2026, 3, 1, tzinfo=UTC)
_ids = iter(range(1_000_000))


def game(white: str, black: str, result: str = "1-0", minutes: int = 0, ident: int | None = None):
    i = next(_ids) if ident is None else ident
    return decode(orjson.dumps(game_event(i, white, black, result, T0 + timedelta(minutes=minutes))))


def keys(*players: str) -> list[StateKey]:
    return [StateKey(p, "csr", "blitz") for p in players]


@pytest.fixture(params=["memory", "postgres"])
async def store(request, database_url):
    if request.param == "memory":
        yield MemoryStore()
        return
    s = await PostgresStore.connect(database_url)
    yield s
    await s.close()


async def states_of(store, players: str) -> dict:
    async with store.transaction() as tx:
        return await tx.load_states(keys(*players))


async def sequential(*messages) -> dict:
    """The reference: every message in its own batch, in order, on a fresh memory store."""
    ref = MemoryStore()
    for m in messages:
        await apply_batch(ref, [m])
    return ref


async def test_a_plan_that_holds_is_used_and_equals_the_sequential_result(store):
    g1, g2, g3 = game("A", "B", minutes=1), game("A", "C", "0-1", 2), game("B", "C", "1/2-1/2", 3)
    await apply_batch(store, [g1])
    plan = await plan_batch(store, [g2, g3], [])
    result = await apply_batch(store, [g2, g3], plan=plan)
    assert result.planned
    ref = await sequential(g1, g2, g3)
    assert await states_of(store, "ABC") == await states_of(ref, "ABC")


async def test_a_plan_made_stale_by_another_writer_is_recomputed(store):
    g1, g2, other = game("A", "B", minutes=1), game("A", "C", minutes=3), game("C", "D", "0-1", 2)
    await apply_batch(store, [g1])
    plan = await plan_batch(store, [g2], [])
    await apply_batch(store, [other])  # another worker changes C after the plan read it
    result = await apply_batch(store, [g2], plan=plan)
    assert not result.planned
    ref = await sequential(g1, other, g2)
    assert await states_of(store, "ABCD") == await states_of(ref, "ABCD")


async def test_a_plan_on_top_of_a_recomputed_plan_is_recomputed_too(store):
    """E's plan reads B; another writer changes B; E is recomputed under its locks and writes A at the
    versions its plan predicted, with other values. L was planned on top of E's plan (A as E's plan
    left it): the version it assumed for A is the one stored, yet its values are not."""
    e1, e2 = game("A", "B", minutes=2), game("A", "C", "1/2-1/2", 3)
    l1 = game("A", "D", "0-1", 4)
    other = game("B", "Y", "0-1", 1)
    plan_e = await plan_batch(store, [e1, e2], [])
    plan_l = await plan_batch(store, [l1], [plan_e])
    await apply_batch(store, [other])
    result_e = await apply_batch(store, [e1, e2], plan=plan_e)
    assert not result_e.planned
    stored = await states_of(store, "A")
    assert stored[keys("A")[0]].version == plan_e.computed.changed[keys("A")[0]].version  # same version...
    assert stored[keys("A")[0]] != plan_e.computed.changed[keys("A")[0]]  # ...other values
    result_l = await apply_batch(store, [l1], plan=plan_l)
    assert not result_l.planned
    ref = await sequential(other, e1, e2, l1)
    assert await states_of(store, "ABCDY") == await states_of(ref, "ABCDY")


async def test_a_plan_on_top_of_a_plan_that_held_is_used(store):
    e1, l1 = game("A", "B", minutes=1), game("A", "C", minutes=2)
    plan_e = await plan_batch(store, [e1], [])
    plan_l = await plan_batch(store, [l1], [plan_e])
    assert (await apply_batch(store, [e1], plan=plan_e)).planned
    assert (await apply_batch(store, [l1], plan=plan_l)).planned
    ref = await sequential(e1, l1)
    assert await states_of(store, "ABC") == await states_of(ref, "ABC")


async def test_a_message_processed_meanwhile_makes_the_plan_recompute(store):
    g1, g2 = game("A", "B", minutes=1), game("A", "C", minutes=2)
    plan = await plan_batch(store, [g1, g2], [])
    await apply_batch(store, [g2])  # delivered twice: the other copy went first
    result = await apply_batch(store, [g1, g2], plan=plan)
    assert not result.planned and result.outcomes == ["applied", "duplicate"]
    ref = await sequential(g2, g1)
    assert await states_of(store, "ABC") == await states_of(ref, "ABC")


async def test_a_plan_laid_on_a_batch_that_committed_before_its_snapshot_is_used(store):
    """The earlier batch's writes are both in the snapshot and in its plan: the plan on top of it holds."""
    e1, l1 = game("A", "B", minutes=1), game("A", "C", minutes=2)
    plan_e = await plan_batch(store, [e1], [])
    assert (await apply_batch(store, [e1], plan=plan_e)).planned
    plan_l = await plan_batch(store, [l1], [plan_e])  # e1 already committed: A and B are in the snapshot
    assert (await apply_batch(store, [l1], plan=plan_l)).planned
    ref = await sequential(e1, l1)
    assert await states_of(store, "ABC") == await states_of(ref, "ABC")


async def test_a_rating_of_another_speed_stored_meanwhile_makes_the_plan_recompute(store):
    """A's first bullet game reads his other speeds (where his bullet rating starts from): a rapid
    rating stored by another writer after the plan read them changes where it starts."""
    g1 = game("A", "B", minutes=1)  # blitz
    first_bullet = decode(orjson.dumps(game_event(next(_ids), "A", "D", "1-0", T0 + timedelta(minutes=5), TCS[0])))
    rapid = decode(orjson.dumps(game_event(next(_ids), "A", "C", "1-0", T0 + timedelta(minutes=3), TCS[3])))
    await apply_batch(store, [g1])
    plan = await plan_batch(store, [first_bullet], [])
    await apply_batch(store, [rapid])  # another worker: a key A did not have when the plan read him
    result = await apply_batch(store, [first_bullet], plan=plan)
    assert not result.planned
    ref = await sequential(g1, rapid, first_bullet)
    every = [StateKey(p, "csr", c) for p in "ABCD" for c in ("bullet", "blitz", "rapid")]
    async with store.transaction() as tx, ref.transaction() as rtx:
        assert await tx.load_states(every) == await rtx.load_states(every)

