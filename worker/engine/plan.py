"""Plans: a batch computed before its locks, used under them only if what it assumed still holds.

A batch is planned from a lock-free snapshot while the batches before it are in PostgreSQL, laid on
top of their own plans; under its locks it checks its assumptions (the processed ids, the closures,
the stored versions of every key it read, and that every plan it was laid on was used) and then uses
the plan's results without reading any state again; otherwise it is computed there
(worker.engine.batch). The proof that versions suffice is in `Plan`'s docstring.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from worker.engine.compute import Computed, compute_stepwise
from worker.engine.reads import Needs, contexts, load, needs_of
from worker.ratings.inputs import Message
from worker.ratings.state import StateKey
from worker.ratings.system import RatingSystem
from worker.store.base import StateStore

__all__ = ["Plan", "PlanOutcome", "plan_batch"]


@dataclass(slots=True)
class PlanOutcome:
    """Whether a batch used its plan: decided under its locks, before its commit, at every attempt."""

    held: bool | None = None  # None: not decided yet


@dataclass(slots=True)
class Plan:
    """A batch computed before its locks, and what it assumed: used only if, under the locks, it holds.

    It assumed the version of every key it read (0 for a key not stored), which of its message ids were
    already processed, and the fair-play closures of its players. Versions are enough for what was
    read from the database: every change of a state increments its version, so a committed (key,
    version) has one value. Not for what it took from the plans of the batches in flight before it
    (`built_on`): such a batch that was recomputed under its locks wrote the versions its plan
    predicted, with other values. So a plan does not hold once one of those was not used. (That
    batch decided before it committed, and this one checks after it committed: the keys taken from
    its plan are its players', whose locks this batch waits for. If that batch rolled back instead,
    this attempt may read an outcome of its previous attempt, but cannot commit: before_commit sees
    the earlier batch's failed attempt and sends this one round again, see worker.pipeline.inflight.)
    """

    versions: dict[StateKey, int]  # every key read -> its version (0: not stored)
    done: frozenset[tuple[str, str]]
    closed: dict[str, float]
    computed: Computed
    needs: Needs
    built_on: tuple[PlanOutcome, ...] = ()
    outcome: PlanOutcome = field(default_factory=PlanOutcome)

    def assumptions_hold(self, done: set, closed: dict[str, float]) -> bool:
        """Read under the locks: the processed ids and closures are as assumed, and every plan this one
        was laid on was used (the stored versions are checked by the store: `versions_changed`)."""
        return (
            self.closed == closed
            and self.done == frozenset(done)
            and not any(earlier.held is False for earlier in self.built_on)
        )


async def plan_batch(store: StateStore, messages: Sequence[Message], earlier: Sequence[Plan],
                     systems: Sequence[RatingSystem] | None = None) -> Plan | None:
    """Compute a batch ahead of its locks from a snapshot, with the batches in flight before it on top.

    None for a batch that reads the games of the past (a fair-play closure: rare, and whom it locks
    is only known under the locks): it is computed under its locks. `systems` as for `needs_of`.
    """
    needs = needs_of(messages, systems)
    if needs.queries:
        return None
    async with store.reader() as r:
        working, asked = await load(r, messages, needs)
        done = await r.processed(needs.ids)
        closed = await r.closed_accounts(needs.players)
    ids = set(needs.ids)
    for plan in earlier:
        # A batch's changed states are fewer than the keys a batch asks for (most of those are a player's
        # other categories, never stored): walk the smaller of the two.
        changed = plan.computed.changed
        if len(changed) < len(asked):
            working.update((key, st) for key, st in changed.items() if key in asked)
        else:
            working.update((key, st) for key in asked if (st := changed.get(key)) is not None)
        done.update(i for i in ((p.source, p.id) for p in plan.computed.processed) if i in ids)
    if contexts(messages, needs, working):
        return None  # a category-wide read (rare: once a day) is made under the locks
    versions = {k: (st.version if (st := working.get(k)) is not None else 0) for k in asked}
    assumed_done = frozenset(done)
    computed = await compute_stepwise(messages, needs.systems, working, done, closed, asked, set(needs.players))
    return Plan(versions, assumed_done, dict(closed), computed, needs, tuple(p.outcome for p in earlier))
