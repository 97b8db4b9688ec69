"""A message that concerns every stored state of a system (FIDE's monthly list, `rating.period_closed`),
applied in bounded chunks, each one transaction, and the messages around it in order.

A list publication changes tens of thousands of ratings: one transaction holding all their locks would
stall every other batch that touches any of those players for as long as it takes. So a sweep reads the
system's states page by page without locks (`scan_states`), keeps the states its `rate_state` would
change, and applies those in a transaction of their own: their players locked in sorted order, the
states loaded again under the locks and rated again from what is stored then, the changes saved with
their history and outbox rows. A transaction holds at most `chunk` states' locks.

Exactly once, resumable: a state a sweep has changed is no longer one it changes (a closed period is
not open, an inactive mark is not set twice), so a sweep cut short by a crash, delivered again, goes
over the pages again and changes only what is left. Its (source, id) is recorded processed in its last
transaction, after every page: a second delivery after that is a duplicate, as for any message.

A run of messages that may hold sweeps is cut into `steps`: the messages between two sweeps go as one
batch (`apply_batch`), each sweep on its own, in order. `apply_messages` applies them one after the other
(replay, backfill); the worker's database stage retries each step until it commits.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial

from worker.contract.changed import ChangeRecord, change_record
from worker.engine.batch import apply_batch
from worker.engine.compute import BatchResult, MessageResult
from worker.ratings.inputs import Message
from worker.ratings.registry import system_for
from worker.ratings.state import RatingChange, RatingState, StateKey
from worker.ratings.system import RatingSystem
from worker.store.base import ProcessedMessage, StateStore

__all__ = ["CHUNK", "Step", "SweepProgress", "apply_messages", "apply_sweep", "is_sweep", "segments", "steps"]

CHUNK = 1000  # states per transaction: the longest any other batch waits for a sweep's locks
# The lock anchor of a sweep's last transaction: no player has an empty id (the schemas' minLength 1).
END_LOCK = ""

# Called after each chunk's commit with its result (records and their history row ids): the worker
# publishes them at once; without it they are returned with the sweep's result (replay).
Published = Callable[[BatchResult], Awaitable[None]]


@dataclass(slots=True)
class SweepProgress:
    """What a sweep did so far (for its log line and the benchmark)."""

    scanned: int = 0
    changed: int = 0
    chunks: int = 0
    longest_chunk_s: float = 0.0


def is_sweep(message: Message, system: RatingSystem | None = None) -> bool:
    """A message its system applies as a sweep (its type is the sweep's, not one the system rates);
    `system`: the one that rates it, when the caller has it."""
    system = system if system is not None else system_for(message)
    return system is not None and system.sweep is not None and message.type == system.sweep.kind


def segments(messages: Sequence[Message], systems: Sequence[RatingSystem] | None = None
             ) -> list[tuple[bool, list[Message], list[RatingSystem]]]:
    """The messages cut into runs, in order: (False, a batch of ordinary messages, their systems) or (True,
    [one sweep], [its system]). `systems`: the systems that rate them, when the caller has them."""
    systems = list(systems) if systems is not None else [system_for(m) for m in messages]
    out: list[tuple[bool, list[Message], list[RatingSystem]]] = []
    for m, s in zip(messages, systems, strict=True):
        if is_sweep(m, s):
            out.append((True, [m], [s]))
        elif out and not out[-1][0]:
            out[-1][1].append(m)
            out[-1][2].append(s)
        else:
            out.append((False, [m], [s]))
    return out


@dataclass(frozen=True, slots=True)
class Step:
    """One piece of a run of messages: a batch of ordinary messages, or one sweep (`sweep`, with its
    `progress`). `apply()` applies it; again after a rollback, it changes only what is left."""

    messages: list[Message]
    apply: Callable[[], Awaitable[BatchResult]]
    sweep: Message | None = None
    progress: SweepProgress | None = None


def steps(store: StateStore, messages: Sequence[Message], published: Published | None = None,
          chunk: int = CHUNK, after_chunk: Callable[[int], None] | None = None, predict: bool = False,
          systems: Sequence[RatingSystem] | None = None) -> list[Step]:
    """The messages' steps, in order: runs of ordinary messages as batches, each sweep in chunks (its
    chunks handed to `published` as they commit, when given). `systems` as for `segments`."""
    out = []
    for sweep, run, rated_by in segments(messages, systems):
        if sweep:
            progress = SweepProgress()
            out.append(Step(run, partial(apply_sweep, store, run[0], published, chunk, progress, after_chunk,
                                         rated_by[0]), run[0], progress))
        else:
            out.append(Step(run, partial(apply_batch, store, run, predict=predict, systems=rated_by)))
    return out


async def apply_messages(store: StateStore, messages: Sequence[Message], published: Published | None = None,
                         chunk: int | None = None, predict: bool = False) -> BatchResult:
    """Apply messages in order, step after step. One result, in the messages' order (a sweep's records only
    when `published` is not given); with `predict`, what each message's system expected of it (a sweep:
    nothing)."""
    result = BatchResult(predictions=[] if predict else None)
    for step in steps(store, messages, published, chunk or CHUNK, predict=predict):
        result.extend(await step.apply())
    return result


async def apply_sweep(store: StateStore, message: Message, published: Published | None = None,
                      chunk: int = CHUNK, progress: SweepProgress | None = None,
                      after_chunk: Callable[[int], None] | None = None,
                      system: RatingSystem | None = None) -> BatchResult:
    """Apply one sweep message (see the module docstring). `after_chunk(n)` is called after the n-th
    chunk's commit (the test-only fault seam); `system`: its system, when the caller has it."""
    system = system if system is not None else system_for(message)
    assert system is not None and system.sweep is not None
    progress = progress if progress is not None else SweepProgress()
    ident = (message.source, message.id)
    async with store.reader() as reader:
        if await reader.processed([ident]):
            async with store.transaction() as tx:  # counted on its row, as for any repeated delivery
                await tx.save({}, [], [ProcessedMessage(message.source, message.id, "", "duplicate", duplicates=1)], {})
            return BatchResult(messages=[MessageResult("duplicate")])
    result = BatchResult()
    after: StateKey | None = None
    while True:
        async with store.reader() as reader:
            page = await reader.scan_states(system.name, after, chunk)
        if not page:
            break
        after = page[-1][0]
        progress.scanned += len(page)
        try:
            wanted = _wanted(system, message, page)
            started = time.perf_counter()
            done = await _apply_chunk(store, message, system, wanted) if wanted else None
        except _RatingFailed as exc:  # a bug of the rating code: said, dead-lettered, the rest goes on
            result.messages.append(MessageResult("failed", error=str(exc)))
            return result  # with the chunks committed before it
        if done is not None:
            progress.longest_chunk_s = max(progress.longest_chunk_s, time.perf_counter() - started)
            progress.changed += len(done.records)
            progress.chunks += 1
            if published is not None:
                await published(done)
            else:
                result.records += done.records
                result.row_ids += done.row_ids
            if after_chunk is not None:
                after_chunk(progress.chunks)
    async with store.transaction() as tx:
        await tx.lock_players([END_LOCK])  # two deliveries of one sweep (a rebalance) end one after the other
        if await tx.processed([ident]):  # another worker finished the same sweep meanwhile
            return BatchResult(messages=[MessageResult("duplicate")])
        processed = ProcessedMessage(message.source, message.id, message.type, "applied", system=system.name,
                                     ref=message.ref)
        await tx.save({}, [], [processed], {})
    result.messages.append(MessageResult("applied"))
    return result


def _wanted(system: RatingSystem, message: Message, page: list[tuple[StateKey, RatingState]]) -> list[StateKey]:
    try:
        concerns = system.sweep.concerns
        return [k for k, st in page if concerns(message.payload, st)]
    except Exception as exc:  # noqa: BLE001 - see _RatingFailed
        raise _RatingFailed(f"{type(exc).__name__}: {exc}") from exc


async def _apply_chunk(store: StateStore, message: Message, system: RatingSystem, keys: list[StateKey]) -> BatchResult:
    """One chunk in one transaction: lock, load, rate each state again from what is stored now, save."""
    at = system.sweep.cause_time(message.payload)
    async with store.transaction() as tx:
        await tx.lock_players(sorted({k.player_id for k in keys}))
        stored = await tx.load_states(keys)
        states: dict[StateKey, RatingState] = {}
        records: list[ChangeRecord] = []
        try:
            for key in keys:
                st = stored.get(key)
                if st is None:
                    continue
                for ch in system.sweep.rate_state(message.payload, key, st):
                    _check(ch, st)
                    st = states[key] = ch.after
                    records.append(change_record(message, ch, at, system.shown_rating, system.starts_unrated,
                                                 system.inactive, system.parameters))
        except Exception as exc:  # noqa: BLE001 - rolled back with the chunk; the message is dead-lettered
            raise _RatingFailed(f"{type(exc).__name__}: {exc}") from exc
        row_ids = await tx.save(states, records, [], {}) if states else []
    return BatchResult(records=records, row_ids=row_ids)


class _RatingFailed(Exception):
    """The rating code failed on a sweep (a bug): the chunk rolls back, the message is dead-lettered as
    `rating_error` like any message the rating code fails on; re-submitted after a fix, it resumes."""


def _check(change: RatingChange, before: RatingState) -> None:
    """A sweep's change makes the state's next version, as every change does (worker.engine.compute)."""
    if change.after.version != before.version + 1:
        raise ValueError(f"{tuple(change.key)}: version {change.after.version} does not follow {before.version}")
