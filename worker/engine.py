"""Messages + states -> new states + changes, for a whole batch, through the state port.

The registry maps a message to the rating system that rates it; `apply_batch` is the one place
that drives a store (PostgreSQL in the worker, memory in `replay`), so both paths are the same code.
"""

from __future__ import annotations

import asyncio
import dataclasses
import operator
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, Protocol

from worker.contract.changed import change_record
from worker.ratings import chesskite, chesstempo, csr, fairplay, fide, imports, tsr, uscf
from worker.ratings.inputs import GameSide, Message
from worker.ratings.state import Outcome, RatingChange, RatingState, StateKey
from worker.store.base import ChangeRecord, HistoryQuery, ProcessedMessage, RatingsQuery, StateStore


class BatchHooks(Protocol):
    """How a caller orders concurrent batches: called around the locks and before the commit."""

    async def before_lock(self) -> None: ...

    async def after_lock(self) -> None: ...

    async def before_commit(self) -> None: ...


class RatingSystem(Protocol):
    def players(self, payload) -> list[str]: ...

    def state_keys(self, payload) -> list[StateKey]: ...

    def more_keys(self, payload, loaded: Mapping[StateKey, RatingState]) -> list[StateKey]: ...

    def cause_time(self, payload) -> float: ...

    def rate(self, payload, states: Mapping[StateKey, RatingState], closed: Mapping[str, float]) -> Outcome: ...

    def shown_rating(self, state: RatingState) -> float | None: ...

    def history(self, payload) -> HistoryQuery | None: ...

    def with_history(self, payload, games: tuple[GameSide, ...]): ...

    def published(self, key: StateKey) -> bool: ...

    def context(self, payload, states: Mapping[StateKey, RatingState]) -> tuple[str, str, float] | None: ...

    def with_context(self, payload, ratings: Mapping[str, float]): ...


@dataclass(frozen=True)
class Adapter:
    """How the engine drives one rating module: its functions, named.

    `rate(payload, states, closed) -> Outcome` is the module's pure rating function; `more_keys` names
    states needed only when some of `state_keys` are not stored yet; `shown_rating` is the rating that
    `rating.changed` publishes (None for a FIDE rating that is not listed). A message that needs the
    games of the past (a fair-play closure) names them with `history`; the engine reads them through
    the store, adds those of the batch so far, and hands them to `rate` by `with_history`. Likewise a
    message that needs the ratings of a whole category at that moment (Chess Tempo's daily top group)
    asks with `context` (system, category, RD at most), given the states as they are; the engine lays
    the batch's changes over the store's answer and hands it over by `with_context`. `published` says
    which changed states are published as `rating.changed` (the others are the system's own records).
    """

    players: Callable[[Any], list[str]]
    state_keys: Callable[[Any], list[StateKey]]
    rate: Callable[[Any, Mapping[StateKey, RatingState], Mapping[str, float]], Outcome]
    cause_time: Callable[[Any], float] = operator.attrgetter("finished_at")
    more_keys: Callable[[Any, Mapping[StateKey, RatingState]], list[StateKey]] = lambda payload, loaded: []
    shown_rating: Callable[[RatingState], float | None] = operator.attrgetter("rating")
    history: Callable[[Any], HistoryQuery | None] = lambda payload: None
    with_history: Callable[[Any, tuple[GameSide, ...]], Any] = lambda payload, games: payload
    published: Callable[[StateKey], bool] = lambda key: True
    context: Callable[[Any, Mapping[StateKey, RatingState]], tuple[str, str, float] | None] = (
        lambda payload, states: None)
    with_context: Callable[[Any, Mapping[str, float]], Any] = lambda payload, ratings: payload


_rating = operator.attrgetter("rating")


def _closure_games(closure) -> HistoryQuery | None:
    if closure.reason != fairplay.FAIR_PLAY:
        return None
    since, until = fairplay.window(closure)
    return HistoryQuery(closure.player_id, fairplay.PARAMS.system, fairplay.PARAMS.cause_type, since, until)

# Adding a system: a module in worker/ratings/ and one line here.
REGISTRY: dict[str, RatingSystem] = {
    "game.finished": Adapter(csr.players, csr.state_keys, csr.rate_game, more_keys=csr.more_keys),
    "event.finished/turbo_live": Adapter(tsr.players, tsr.state_keys, tsr.rate_event),
    "event.finished/uscf": Adapter(uscf.players, uscf.state_keys, uscf.rate_event),
    "event.finished/fide": Adapter(fide.players, fide.state_keys, fide.rate_event, shown_rating=fide.listed_rating),
    "puzzle.attempted/chesskite": Adapter(chesskite.players, chesskite.state_keys, chesskite.rate_attempt,
                                          cause_time=operator.attrgetter("attempted_at")),
    "puzzle.attempted/chesstempo": Adapter(chesstempo.lock_ids, chesstempo.engine_state_keys,
                                           chesstempo.rate_attempt_in_day, cause_time=operator.attrgetter("attempted_at"),
                                           published=chesstempo.is_published, context=chesstempo.top_group_query,
                                           with_context=chesstempo.with_established),
    **{f"rating.imported/{system}": Adapter(imports.players, imports.state_keys, imports.rate_import,
                                            cause_time=operator.attrgetter("imported_at"),
                                            shown_rating=fide.listed_rating if system == "fide" else _rating)
       for system in ("csr", "tsr", "uscf", "fide", "chesskite", "chesstempo")},
    "account.closed": Adapter(fairplay.players, fairplay.state_keys, fairplay.rate_closure,
                              cause_time=operator.attrgetter("closed_at"), history=_closure_games,
                              with_history=lambda closure, games: dataclasses.replace(closure, games=games)),
}


def registry_key(message: Message) -> str:
    payload = message.payload
    if message.type == "event.finished":
        return f"event.finished/{payload.kind}"
    if message.type in ("puzzle.attempted", "rating.imported"):
        return f"{message.type}/{payload.system}"
    return message.type


def system_for(message: Message) -> RatingSystem | None:
    """The system that rates this message, or None when this version of the worker has none."""
    return REGISTRY.get(registry_key(message))


@dataclass(slots=True)
class BatchResult:
    """Per input message, in order: applied | unrated | duplicate; plus what to publish."""

    outcomes: list[str] = field(default_factory=list)
    unrated_reasons: list[str | None] = field(default_factory=list)
    records: list[ChangeRecord] = field(default_factory=list)
    row_ids: list[int] = field(default_factory=list)
    planned: bool = False  # computed ahead of the locks, and the plan held
    # (index in the batch, error) of messages the rating code failed on: not applied, not marked
    # processed; the pipeline dead-letters them so that they can be re-submitted after a fix.
    failed: list[tuple[int, str]] = field(default_factory=list)


@dataclass(slots=True)
class Computed:
    result: BatchResult
    changed: dict[StateKey, RatingState]
    processed: list[ProcessedMessage]
    closures: dict[str, float] = field(default_factory=dict)  # accounts closed for fair play


@dataclass(slots=True)
class _Needs:
    systems: list[RatingSystem]
    players: list[str]
    keys: set[StateKey]
    ids: list[tuple[str, str]]
    queries: dict[int, HistoryQuery] = field(default_factory=dict)  # message index -> games it needs


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
    the earlier batch's failed attempt and sends this one round again, see pipeline._Batch.)
    """

    versions: dict[StateKey, int]  # every key read -> its version (0: not stored)
    done: frozenset[tuple[str, str]]
    closed: dict[str, float]
    computed: Computed
    needs: _Needs
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


def _needs(messages: Sequence[Message]) -> _Needs:
    systems = [system_for(m) for m in messages]
    players = sorted({p for m, s in zip(messages, systems, strict=True) for p in s.players(m.payload)})
    keys = {k for m, s in zip(messages, systems, strict=True) for k in s.state_keys(m.payload)}
    queries = {i: q for i, (m, s) in enumerate(zip(messages, systems, strict=True))
               if (q := s.history(m.payload)) is not None}
    return _Needs(systems, players, keys, [(m.source, m.id) for m in messages], queries)


async def _read_history(tx, messages: Sequence[Message], needs: _Needs) -> dict[int, list[GameSide]]:
    """The stored games each history-reading message needs; their players and keys join `needs`."""
    history: dict[int, list[GameSide]] = {}
    players = set(needs.players)
    for i, query in needs.queries.items():
        history[i] = await tx.games_with(query)
        system = needs.systems[i]
        attached = system.with_history(messages[i].payload, tuple(history[i]))
        players.update(system.players(attached))
        needs.keys.update(system.state_keys(attached))
    needs.players = sorted(players)
    return history


async def _lock(tx, messages: Sequence[Message], needs: _Needs) -> dict[int, list[GameSide]]:
    """Lock the batch's players in sorted order; returns the stored games its messages need.

    Whom a fair-play closure refunds depends on the games the account played: read them, lock the
    account and its opponents with everyone else, then read them again under the locks (a game that
    committed in between adds a player, locked last: if that ever closes a cycle with another
    worker, PostgreSQL reports a deadlock, which is transient, and the batch is retried).
    """
    if not needs.queries:
        await tx.lock_players(needs.players)
        return {}
    await _read_history(tx, messages, needs)
    locked = list(needs.players)
    await tx.lock_players(locked)
    history = await _read_history(tx, messages, needs)
    late = sorted(set(needs.players) - set(locked))
    if late:
        await tx.lock_players(late)
    return history


async def _load(reader, messages: Sequence[Message], needs: _Needs) -> tuple[dict[StateKey, RatingState], set]:
    """The states the batch reads: its keys, then, only where some are missing, what those need.

    Returns the states found and every key asked for (found or not).
    """
    loaded = await reader.load_states(needs.keys)
    asked = set(needs.keys)
    return await _load_more(reader, messages, needs, loaded, asked), asked


async def _load_more(reader, messages, needs: _Needs, loaded: dict, asked: set) -> dict[StateKey, RatingState]:
    more = {k for m, s in zip(messages, needs.systems, strict=True) for k in s.more_keys(m.payload, loaded)} - asked
    if more:
        asked |= more
        loaded.update(await reader.load_states(more))
    return loaded


def _check_changes(
    changes: Sequence[RatingChange], working: Mapping[StateKey, RatingState], read: Set[StateKey], locked: Set[str],
) -> None:
    """What the locks and a plan's check rest on, for every change a rating module returns:
    - its key was read for the batch (`state_keys`, `more_keys`: a state changed without being read
      would be written over whatever is stored), and its player is one the batch locks (`players`);
    - it makes the state's next version: `version` counts changes without gaps, and a plan's check
      under the locks compares versions only (Plan).
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
    """The pure part of a batch, one message at a time: against `working` (updated in place) and `done`."""

    def __init__(
        self, working: dict[StateKey, RatingState], done: set[tuple[str, str]], closed: Mapping[str, float],
        history: Mapping[int, list[GameSide]] | None = None, queries: Mapping[int, HistoryQuery] | None = None,
        answers: Mapping[RatingsQuery, dict[str, float]] | None = None,
        read: Set[StateKey] = frozenset(), locked: Set[str] = frozenset(),
    ):
        self.working, self.done = working, done
        self.read, self.locked = read, locked  # the keys read for the batch, the players it locks
        self.closed = dict(closed)  # grows when a message of the batch closes an account
        self.history, self.queries = history or {}, queries or {}
        self.answers = answers or {}
        self.result = BatchResult()
        self.changed: dict[StateKey, RatingState] = {}
        self.processed: list[ProcessedMessage] = []
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
        result = self.result
        ident = (message.source, message.id)
        if ident in self.done:
            result.outcomes.append("duplicate")
            result.unrated_reasons.append(None)
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
            result.failed.append((len(result.outcomes), f"{type(exc).__name__}: {exc}"))
            result.outcomes.append("failed")
            result.unrated_reasons.append(None)
            return
        self.done.add(ident)
        if outcome.closure is not None:
            player_id, closed_at = outcome.closure
            self.closed[player_id] = self.closures[player_id] = closed_at
        if outcome.changes:
            at = system.cause_time(message.payload)
            for ch in outcome.changes:
                self.working[ch.key] = ch.after
                self.changed[ch.key] = ch.after
                if system.published(ch.key):
                    result.records.append(change_record(message, ch, at, system.shown_rating))
        status = "applied" if outcome.rated else "unrated"
        result.outcomes.append(status)
        result.unrated_reasons.append(outcome.unrated_reason)
        self.processed.append(ProcessedMessage(message.source, message.id, message.type, status))

    def computed(self) -> Computed:
        return Computed(self.result, self.changed, self.processed, self.closures)


def compute(
    messages: Sequence[Message], systems: Sequence[RatingSystem], working: dict[StateKey, RatingState],
    done: set[tuple[str, str]], closed: Mapping[str, float], read: Set[StateKey], locked: Set[str],
    history: Mapping[int, list[GameSide]] | None = None, queries: Mapping[int, HistoryQuery] | None = None,
    answers: Mapping[RatingsQuery, dict[str, float]] | None = None,
) -> Computed:
    """The pure part of a batch: messages in order against `working` (updated in place) and `done`;
    `read` and `locked` are the keys read for it and the players it locks (see _check_changes)."""
    c = _Computation(working, done, closed, history, queries, answers, read, locked)
    for i, (message, system) in enumerate(zip(messages, systems, strict=True)):
        c.apply(message, system, i)
    return c.computed()


async def compute_yielding(
    messages: Sequence[Message], systems: Sequence[RatingSystem], working: dict[StateKey, RatingState],
    done: set[tuple[str, str]], closed: Mapping[str, float], read: Set[StateKey], locked: Set[str],
    every: int = 250,
) -> Computed:
    """`compute`, letting other tasks run every `every` messages: a plan is computed while the batch
    before it is in PostgreSQL, and that batch's round trips must not wait for the whole plan."""
    c = _Computation(working, done, closed, read=read, locked=locked)
    for i, (message, system) in enumerate(zip(messages, systems, strict=True)):
        c.apply(message, system, i)
        if i % every == every - 1:
            await asyncio.sleep(0)
    return c.computed()


def _contexts(messages: Sequence[Message], needs: _Needs, states: Mapping[StateKey, RatingState]) -> set[RatingsQuery]:
    """The category-wide reads the batch's messages ask for, given these states (see Adapter)."""
    return {RatingsQuery(*q) for m, s in zip(messages, needs.systems, strict=True)
            if (q := s.context(m.payload, states)) is not None}


async def _answers(tx, queries: set[RatingsQuery]) -> dict[RatingsQuery, dict[str, float]]:
    return {q: await tx.ratings_at_most(q) for q in queries}


async def plan_batch(store: StateStore, messages: Sequence[Message], earlier: Sequence[Plan]) -> Plan | None:
    """Compute a batch ahead of its locks from a snapshot, with the batches in flight before it on top.

    None for a batch that reads the games of the past (a fair-play closure: rare, and whom it locks
    is only known under the locks): it is computed under its locks.
    """
    needs = _needs(messages)
    if needs.queries:
        return None
    async with store.reader() as r:
        working, asked = await _load(r, messages, needs)
        done = await r.processed(needs.ids)
        closed = await r.closed_accounts(needs.players)
    ids = set(needs.ids)
    for plan in earlier:
        changed = plan.computed.changed
        for key in asked:
            st = changed.get(key)
            if st is not None:
                working[key] = st
        done.update(i for i in ((p.source, p.id) for p in plan.computed.processed) if i in ids)
    if _contexts(messages, needs, working):
        return None  # a category-wide read (rare: once a day) is made under the locks
    versions = {k: (st.version if (st := working.get(k)) is not None else 0) for k in asked}
    assumed_done = frozenset(done)
    computed = await compute_yielding(messages, needs.systems, working, done, closed, asked, set(needs.players))
    return Plan(versions, assumed_done, dict(closed), computed, needs, tuple(p.outcome for p in earlier))


async def apply_batch(
    store: StateStore, messages: Sequence[Message], hooks: BatchHooks | None = None, plan: Plan | None = None
) -> BatchResult:
    """Apply messages in order in one store transaction (every message must have a system).

    Lock first, then dedupe: a message being applied by another worker holds its players' locks,
    so its processed id is visible by the time ours are granted. `hooks` let the pipeline keep
    several batches in flight without reordering them (see pipeline._Batch); a `plan` that still
    holds under the locks saves computing inside them.
    """
    needs = plan.needs if plan is not None else _needs(messages)
    async with store.transaction() as tx:
        if hooks is not None:
            await hooks.before_lock()
        history = await _lock(tx, messages, needs)
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
            working, asked = await _load(tx, messages, needs)
            answers = await _answers(tx, _contexts(messages, needs, working))
            computed = compute(messages, needs.systems, working, done, closed, asked, set(needs.players), history,
                               needs.queries, answers)
        computed.result.row_ids = await tx.save(
            computed.changed, computed.result.records, computed.processed, computed.closures
        )
        if hooks is not None:
            await hooks.before_commit()
    return computed.result
