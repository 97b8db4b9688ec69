"""The pure part of a batch: messages in order against the states, one outcome per message.

No I/O and no clock: the states, the processed ids and the closures come in, the new states, the
`rating.changed` records and the processed ids go out. The same loop serves both callers: `compute`
runs it to the end (under the locks), `compute_stepwise` lets other tasks run every so many messages
(a plan computed while the batch before it is in PostgreSQL, whose round trips must not wait).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import NamedTuple

from worker.contract.changed import ChangeRecord, change_record
from worker.ratings.inputs import GameSide, Message
from worker.ratings.state import Outcome, RatingChange, RatingState, StateKey
from worker.ratings.system import HistoryQuery, Prediction, RatingsQuery, RatingSystem
from worker.store.base import ProcessedMessage

__all__ = ["BatchResult", "Computed", "MessageResult", "compute", "compute_stepwise"]


class MessageResult(NamedTuple):
    """What became of one message of a batch."""

    status: str  # applied | unrated | duplicate | failed
    reason: str | None = None  # why an unrated message changed nothing (a casual game, ...)
    # failed: the rating code raised on a valid message; it is not applied nor marked processed, and
    # the pipeline dead-letters it so that it can be re-submitted after a fix.
    error: str | None = None


_APPLIED = MessageResult("applied")  # the result of nearly every message, built once


@dataclass(slots=True)
class BatchResult:
    """Per input message, in order, its result; plus what to publish."""

    messages: list[MessageResult] = field(default_factory=list)
    records: list[ChangeRecord] = field(default_factory=list)
    row_ids: list[int] = field(default_factory=list)
    planned: bool = False  # computed ahead of the locks, and the plan held
    # Asked for (`rating-worker evaluate`): per message, what its system expected of it just before it
    # was rated, against the states of every message before it (RatingSystem.predict); () for the others.
    predictions: list[tuple[Prediction, ...]] | None = None

    @property
    def outcomes(self) -> list[str]:
        return [m.status for m in self.messages]

    @property
    def failed(self) -> list[tuple[int, str]]:
        """(index in the batch, error) of the messages the rating code failed on."""
        return [(i, m.error) for i, m in enumerate(self.messages) if m.status == "failed"]

    def extend(self, part: BatchResult) -> None:
        """Append the result of the next messages (a run of them, or a sweep) to this one."""
        self.messages += part.messages
        self.records += part.records
        self.row_ids += part.row_ids
        if self.predictions is not None:
            self.predictions += part.predictions if part.predictions is not None else [()] * len(part.messages)


@dataclass(slots=True)
class Computed:
    result: BatchResult
    changed: dict[StateKey, RatingState]
    processed: list[ProcessedMessage]
    closures: dict[str, float] = field(default_factory=dict)  # accounts closed for fair play


def _check_changes(
    changes: Sequence[RatingChange], working: Mapping[StateKey, RatingState], read: Set[StateKey], locked: Set[str],
) -> None:
    """What the locks and a plan's check rest on, for every change a rating module returns:
    - its key was read for the batch (`state_keys`, `more_keys`: a state changed without being read
      would be written over whatever is stored), and its player is one the batch locks (`players`);
    - it makes the state's next version: `version` counts changes without gaps, and a plan's check
      under the locks compares versions only (worker.engine.plan).
    A module that breaks either has a bug: the message is left out like any other that fails to rate."""
    versions: dict[StateKey, int] = {}  # a message may change a key twice (a FIDE period close, then its event)
    for ch in changes:
        key = ch.key
        if key not in read or key[0] not in locked:
            raise ValueError(f"{tuple(key)}: changed without being read for the batch or its player locked")
        before = versions.get(key)
        if before is None:
            st = working.get(key)
            before = st.version if st is not None else 0
        if ch.after.version != before + 1:
            raise ValueError(f"{tuple(key)}: version {ch.after.version} does not follow {before}")
        versions[key] = ch.after.version


class _Computation:
    """One batch's computation, one message at a time: against `working` (updated in place) and `done`."""

    def __init__(
        self, working: dict[StateKey, RatingState], done: set[tuple[str, str]], closed: Mapping[str, float],
        history: Mapping[int, list[GameSide]] | None, queries: Mapping[int, HistoryQuery] | None,
        answers: Mapping[RatingsQuery, dict[str, float]] | None, read: Set[StateKey], locked: Set[str],
        predict: bool = False,
    ):
        self.working, self.done = working, done
        self.read, self.locked = read, locked  # the keys read for the batch, the players it locks
        self.closed = dict(closed)  # grows when a message of the batch closes an account
        self.history, self.queries = history or {}, queries or {}
        self.answers = answers or {}
        self.result = BatchResult(predictions=[] if predict else None)
        self.changed: dict[StateKey, RatingState] = {}
        self.processed: list[ProcessedMessage] = []
        self.repeats: dict[tuple[str, str], int] = {}  # deliveries of an already processed message
        self.closures: dict[str, float] = {}

    def _games_so_far(self, query: HistoryQuery) -> tuple[GameSide, ...]:
        """The games of this batch, already rated, that a history query asks for (not stored yet)."""
        return tuple(
            GameSide(r.cause_source, r.cause_id, r.key.player_id, r.key.category, r.delta, r.changed_at)
            for r in self.result.records
            if r.cause_type == query.cause_type and r.key.system == query.system
            and query.since <= r.changed_at <= query.until
        )

    def _ratings_now(self, query: RatingsQuery) -> dict[str, float]:
        """The store's answer (read before the batch) with the batch's changes so far laid over it."""
        ratings = dict(self.answers[query])
        for key, st in self.working.items():
            if key.system == query.system and key.category == query.category:
                if st.rd is not None and st.rd <= query.rd_at_most:
                    ratings[key.player_id] = st.rating
                else:
                    ratings.pop(key.player_id, None)
        return ratings

    def apply(self, message: Message, system: RatingSystem, index: int) -> None:
        predictions = self.result.predictions
        if predictions is not None:  # before the message changes anything: what the ratings expected
            predictions.append(() if (message.source, message.id) in self.done
                               else system.predict(message.payload, self.working))
        results = self.result.messages
        ident = (message.source, message.id)
        if ident in self.done:
            results.append(MessageResult("duplicate"))
            self.repeats[ident] = self.repeats.get(ident, 0) + 1
            return
        payload = message.payload
        query = self.queries.get(index)
        if query is not None:
            payload = system.with_history(payload, tuple(self.history.get(index, ())) + self._games_so_far(query))
        try:
            wanted = system.context(payload, self.working)
            if wanted is not None:
                payload = system.with_context(payload, self._ratings_now(RatingsQuery(*wanted)))
            outcome = system.rate(payload, self.working, self.closed)
            _check_changes(outcome.changes, self.working, self.read, self.locked)
        except Exception as exc:  # noqa: BLE001 - one message's bug must not stop every partition
            results.append(MessageResult("failed", error=f"{type(exc).__name__}: {exc}"))
            return
        self.done.add(ident)
        if outcome.closure is not None:
            player_id, closed_at = outcome.closure
            self.closed[player_id] = self.closures[player_id] = closed_at
        if outcome.changes:
            at = system.cause_time(message.payload)
            records = self.result.records
            for ch in outcome.changes:
                self.working[ch.key] = ch.after
                self.changed[ch.key] = ch.after
                if system.published(ch.key):
                    records.append(change_record(message, ch, at, system.shown_rating, system.starts_unrated,
                                                 system.inactive, system.parameters))
        results.append(_APPLIED if outcome.rated else MessageResult("unrated", outcome.unrated_reason))
        self.processed.append(_processed(message, system, outcome))

    def steps(self, messages: Sequence[Message], systems: Sequence[RatingSystem], every: int) -> Iterator[None]:
        """The one loop: every message in order; yields after each `every` messages."""
        for i, (message, system) in enumerate(zip(messages, systems, strict=True)):
            self.apply(message, system, i)
            if i % every == every - 1:
                yield

    def computed(self) -> Computed:
        return Computed(self.result, self.changed, self._with_repeats(), self.closures)

    def _with_repeats(self) -> list[ProcessedMessage]:
        """The processed ids with their repeated deliveries counted: on the row this batch writes, or as a
        `duplicate` entry for a message an earlier batch processed."""
        if not self.repeats:
            return self.processed
        repeats = dict(self.repeats)
        out = [
            p._replace(duplicates=repeats.pop((p.source, p.id))) if (p.source, p.id) in repeats else p
            for p in self.processed
        ]
        out += [ProcessedMessage(source, id_, "", "duplicate", duplicates=n) for (source, id_), n in repeats.items()]
        return out


def _processed(message: Message, system: RatingSystem, outcome: Outcome) -> ProcessedMessage:
    """The processed id with why it changed nothing for whom (`rating-worker message`, `player --history`)."""
    if outcome.rated:
        if not outcome.left_out:
            return ProcessedMessage(message.source, message.id, message.type, "applied", ref=message.ref)
        left_out = outcome.left_out
    elif outcome.left_out:  # each player's own reason (a FIDE event where no game counted)
        left_out = outcome.left_out
    else:
        reason = outcome.unrated_reason
        left_out = tuple((pid, reason) for pid in dict.fromkeys(system.players(message.payload)))
    return ProcessedMessage(
        message.source, message.id, message.type, "applied" if outcome.rated else "unrated",
        outcome.unrated_reason, left_out, system.cause_time(message.payload),
        system=getattr(message.payload, "system", None) or system.name, ref=message.ref,
    )


def compute(
    messages: Sequence[Message], systems: Sequence[RatingSystem], working: dict[StateKey, RatingState],
    done: set[tuple[str, str]], closed: Mapping[str, float], read: Set[StateKey], locked: Set[str],
    history: Mapping[int, list[GameSide]] | None = None, queries: Mapping[int, HistoryQuery] | None = None,
    answers: Mapping[RatingsQuery, dict[str, float]] | None = None, predict: bool = False,
) -> Computed:
    """Messages in order against `working` (updated in place) and `done`; `read` and `locked` are the
    keys read for the batch and the players it locks (see _check_changes); `predict`: the result also
    says what each message's system expected of it (BatchResult.predictions)."""
    c = _Computation(working, done, closed, history, queries, answers, read, locked, predict)
    for _ in c.steps(messages, systems, every=len(messages) + 1):
        pass
    return c.computed()


async def compute_stepwise(
    messages: Sequence[Message], systems: Sequence[RatingSystem], working: dict[StateKey, RatingState],
    done: set[tuple[str, str]], closed: Mapping[str, float], read: Set[StateKey], locked: Set[str],
    every: int = 250,
) -> Computed:
    """`compute`, letting other tasks run every `every` messages (a plan: worker.engine.plan)."""
    c = _Computation(working, done, closed, None, None, None, read, locked)
    for _ in c.steps(messages, systems, every):
        await asyncio.sleep(0)
    return c.computed()
