"""One batch in one store transaction: lock, dedupe, check the plan or compute, save.

`apply_batch` is the one place that drives a store (PostgreSQL in the worker, memory in `replay`), so
both paths are the same code. `hooks` let the pipeline keep several batches in flight without
reordering them (worker.pipeline.inflight).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from worker.engine.compute import BatchResult, compute
from worker.engine.plan import Plan
from worker.engine.reads import answers, contexts, load, lock, needs_of
from worker.ratings.inputs import Message
from worker.ratings.system import RatingSystem
from worker.store.base import StateStore

__all__ = ["BatchHooks", "apply_batch"]


class BatchHooks(Protocol):
    """How a caller orders concurrent batches: called around the locks and before the commit."""

    async def before_lock(self) -> None: ...

    async def after_lock(self) -> None: ...

    async def before_commit(self) -> None: ...


async def apply_batch(
    store: StateStore, messages: Sequence[Message], hooks: BatchHooks | None = None, plan: Plan | None = None,
    predict: bool = False, systems: Sequence[RatingSystem] | None = None,
) -> BatchResult:
    """Apply messages in order in one store transaction (every message must have a system).

    Lock first, then dedupe: a message being applied by another worker holds its players' locks,
    so its processed id is visible by the time ours are granted. `hooks` let the pipeline keep
    several batches in flight without reordering them (worker.pipeline.inflight); a `plan` that still
    holds under the locks saves computing inside them. `predict` (an evaluation, never with a plan):
    the result says what each message's system expected of it (BatchResult.predictions). `systems`: the
    systems that rate the messages, when the caller has them (the worker found them while decoding).
    """
    needs = plan.needs if plan is not None else needs_of(messages, systems)
    async with store.transaction() as tx:
        if plan is not None:
            # Its rows go to the store before the locks, while the batch ahead holds them: if the plan
            # holds, only one statement is left to run under the locks (worker.store.postgres).
            c = plan.computed
            await tx.stage(c.changed, c.result.records, c.processed, c.closures)
        if hooks is not None:
            await hooks.before_lock()
        history = await lock(tx, messages, needs)
        if hooks is not None:
            await hooks.after_lock()
        done = await tx.processed(needs.ids)
        closed = await tx.closed_accounts(needs.players)
        held = (plan is not None and plan.assumptions_hold(done, closed)
                and not await tx.versions_changed(plan.versions))
        if plan is not None:
            plan.outcome.held = held
        if held:
            computed = plan.computed
            computed.result.planned = True
        else:
            working, asked = await load(tx, messages, needs)
            asked_for = await answers(tx, contexts(messages, needs, working))
            computed = compute(messages, needs.systems, working, done, closed, asked, set(needs.players), history,
                               needs.queries, asked_for, predict)
            await tx.stage(computed.changed, computed.result.records, computed.processed, computed.closures)
        computed.result.row_ids = await tx.write_staged()
        if hooks is not None:
            await hooks.before_commit()
    return computed.result
