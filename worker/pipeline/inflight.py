"""The batches in flight, and the one rule that keeps them in consumption order.

Several batches may be in PostgreSQL at once (the database works while Python decodes the next batch).
A later batch must never overtake an earlier one for the same player, so each batch follows the one
before it (`prev`) through its database stage:

- it takes its locks only once the previous batch holds its own, or has committed: where they share
  players it then waits for the previous commit in PostgreSQL's lock queue;
- it commits only after the previous batch committed, and rolls back and goes again if the previous
  batch's attempt failed meanwhile (its locks were released, so ours may have been taken too early);
- a batch behind one that was abandoned is abandoned with it.

A batch's place in that chain is one `Stage`, moved only by its own database stage (and by the
pipeline when it abandons it); every move wakes the batch waiting behind it.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Any, NamedTuple

from worker.contract.decode import decode_rateable
from worker.contract.reasons import BadMessage
from worker.engine import Plan
from worker.pipeline.retry import Abandoned, Behind
from worker.ratings.inputs import Message
from worker.ratings.system import RatingSystem

__all__ = ["Batch", "Item", "PreviousBatchFailed", "Stage", "decode_records"]


class Item(NamedTuple):
    """One good message of a batch: the Kafka record it came in (dead-lettered if the rating code fails on
    it), the message decoded from it, and the system that rates it."""

    record: Any
    message: Message
    system: RatingSystem


async def decode_records(records: dict[Any, list], max_bytes: int) -> tuple[list[Item], list, dict, list[int]]:
    """A batch's contents from its records, by partition: its good messages (`Item`s), its dead letters
    (record, why), the offset after each partition's last record, and every record's timestamp. Yields
    now and then, so that the batches already in PostgreSQL get their round trips answered meanwhile."""
    items: list[Item] = []
    dead: list = []
    offsets: dict = {}
    stamps: list[int] = []
    for tp, recs in records.items():
        stamps.extend(r.timestamp for r in recs)
        for i, record in enumerate(recs):
            if i % 500 == 499:
                await asyncio.sleep(0)
            try:
                items.append(Item(record, *decode_rateable(record.value, max_bytes, record.headers)))
            except BadMessage as exc:
                dead.append((record, exc))
        offsets[tp] = recs[-1].offset + 1
    return items, dead, offsets, stamps


class PreviousBatchFailed(Behind):
    """The batch before this one rolled back: roll back too and go again after it (order is kept)."""


class Stage(enum.Enum):
    WAITING = "waiting"  # planned or attempting, its locks not yet held
    LOCKED = "locked"  # its locks held, not yet committed
    FAILED = "failed"  # its attempt rolled back; it goes again
    COMMITTED = "committed"
    ABANDONED = "abandoned"  # given up uncommitted (a stop, a rebalance, an error)


class Batch:
    """One batch in flight: its good messages (`items`, and `good`: their messages, in order), its dead
    letters (record, why), its offsets, and its stage in the chain."""

    def __init__(self, seq: int, prev: Batch | None, items: list[Item], dead: list, offsets: dict,
                 timestamps: list[int], started: float) -> None:
        self.seq = seq  # its number in this process, for its readiness reason
        self.prev = prev
        self.items, self.dead, self.offsets = items, dead, offsets
        self.good: list[Message] = [item.message for item in items]  # what the engine applies
        self.systems: list[RatingSystem] = [item.system for item in items]  # found while decoding
        self.timestamps = timestamps  # every record's timestamp (ms), for the record latency
        self.started = started
        self.stage = Stage.WAITING
        self.attempt = 0
        self.plan: Plan | None = None
        self.planned = asyncio.Event()
        self.task: asyncio.Task | None = None
        # Steps of its completion already done: a stop may cut the completion short, and the drain then
        # completes the batch again without doing them twice.
        self._published = asyncio.Event()  # its changes published (a sweep behind it waits for that)
        self.reported = self.published = False
        self._changed = asyncio.Event()
        self._prev_attempt: int | None = None

    # ---- moves (each wakes the batch behind) -------------------------------------------------------

    def _move(self, stage: Stage) -> None:
        self.stage = stage
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    def attempting(self) -> None:
        self.attempt += 1
        self._move(Stage.WAITING)

    def failed(self) -> None:
        self._move(Stage.FAILED)

    def committed(self) -> None:
        self._move(Stage.COMMITTED)
        self.planned.set()
        self.prev = None  # no chain of old batches stays in memory
        self.plan = None

    def abandon(self) -> None:
        self._move(Stage.ABANDONED)
        self.planned.set()

    @property
    def is_committed(self) -> bool:
        return self.stage is Stage.COMMITTED

    @property
    def is_abandoned(self) -> bool:
        return self.stage is Stage.ABANDONED

    # ---- the hooks the engine calls (worker.engine.batch.BatchHooks) -------------------------------

    async def before_lock(self) -> None:
        p = self.prev
        while p is not None and p.stage not in (Stage.COMMITTED, Stage.LOCKED):
            p._raise_if_abandoned()
            await p._changed.wait()
        self._prev_attempt = p.attempt if p is not None else None

    @property
    def published(self) -> bool:
        return self._published.is_set()

    @published.setter
    def published(self, value: bool) -> None:
        if value:
            self._published.set()

    async def after_previous(self) -> None:
        """Wait until the batch before this one committed and its changes were published (a batch that
        goes alone, a sweep, publishes as it goes: a player's changes must still go out in version order)."""
        p = self.prev
        while p is not None and p.stage is not Stage.COMMITTED:
            p._raise_if_abandoned()
            await p._changed.wait()
        while p is not None and not p.published:
            p._raise_if_abandoned()
            waits = [asyncio.ensure_future(p._published.wait()), asyncio.ensure_future(p._changed.wait())]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()

    async def after_lock(self) -> None:
        self._move(Stage.LOCKED)

    async def before_commit(self) -> None:
        p = self.prev
        while p is not None and p.stage is not Stage.COMMITTED:
            p._raise_if_abandoned()
            if p.stage is Stage.FAILED or p.attempt != self._prev_attempt:
                raise PreviousBatchFailed()
            await p._changed.wait()

    def _raise_if_abandoned(self) -> None:
        if self.stage is Stage.ABANDONED:
            raise Abandoned()  # the batches after an abandoned one are abandoned with it

    def earlier_plans(self) -> list[Plan]:
        """The plans of the batches before this one that have not committed yet, oldest first."""
        plans, p = [], self.prev
        while p is not None and not p.is_committed:
            if p.plan is not None:
                plans.append(p.plan)
            p = p.prev
        return plans[::-1]
