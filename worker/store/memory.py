"""The in-memory state store: `replay` and fast tests. Same port as PostgreSQL, no locks needed."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import asynccontextmanager

from worker.contract.changed import ChangeRecord
from worker.ratings.inputs import GameSide
from worker.ratings.state import RatingState, StateKey
from worker.ratings.system import HistoryQuery, RatingsQuery
from worker.store.base import ProcessedMessage, Unpublished
from worker.store.packed import PackedStates


class _MemoryTx:
    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._pending: tuple | None = None

    async def lock_players(self, player_ids: Sequence[str]) -> None:
        return None

    async def processed(self, ids: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        return self._store.processed_among(ids)

    async def scan_states(self, system: str, after: StateKey | None, limit: int) -> list[tuple[StateKey, RatingState]]:
        keys = self._store.sorted_keys(system)
        start = 0 if after is None else bisect.bisect_right(keys, (after[0], system, after[2]))
        states = self._store.states
        return [(k, states[k]) for k in keys[start:start + limit]]

    async def closed_accounts(self, player_ids: Sequence[str]) -> dict[str, float]:
        return {p: self._store.closures[p] for p in player_ids if p in self._store.closures}

    async def load_states(self, keys: Iterable[StateKey]) -> dict[StateKey, RatingState]:
        get = self._store.states.get  # a dozen keys a CSR game, mostly missing: one lookup each, not two
        return {k: st for k in keys if (st := get(k)) is not None}

    async def versions_changed(self, expected: Mapping[StateKey, int]) -> set[StateKey]:
        get = self._store.states.get
        return {k for k, v in expected.items() if (0 if (st := get(k)) is None else st.version) != v}

    async def games_with(self, query: HistoryQuery) -> list[GameSide]:
        return self._store.games_with(query)

    async def ratings_at_most(self, query: RatingsQuery) -> dict[str, float]:
        return {
            player_id: st.rating for player_id, st in self._store.states_of(query.system, query.category)
            if st.rd is not None and st.rd <= query.rd_at_most
        }

    async def save(self, states, records, processed, closures) -> list[int]:
        await self.stage(states, records, processed, closures)
        return await self.write_staged()

    async def stage(self, states, records, processed, closures) -> None:
        # Applied only when the transaction ends normally, like a commit.
        self._pending = (dict(states), list(records), list(processed), dict(closures))

    async def write_staged(self) -> list[int]:
        if self._pending is None:
            return []
        return self._store.next_row_ids(len(self._pending[1]))

    def commit(self) -> None:
        if self._pending is not None:
            self._store.commit(*self._pending)


class MemoryStore:
    def __init__(self, packed: bool = False) -> None:
        # `packed`: the states in about a third of a dict's memory, the same answers (worker.store.packed),
        # for the stores that hold a whole history's players
        self.states: MutableMapping[StateKey, RatingState] = PackedStates() if packed else {}
        self.key_order: dict[str, list[StateKey]] = {}  # system -> its keys, sorted (a sweep's pages)
        self.history: list[ChangeRecord] = []
        # (source, id) -> the processed message, with why it changed nothing for whom
        self.messages: dict[tuple[str, str], ProcessedMessage] = {}
        self.closures: dict[str, float] = {}
        self.published: set[int] = set()

    def sorted_keys(self, system: str) -> list[StateKey]:
        """The system's stored keys in key order, kept until a new key is stored (a sweep adds none)."""
        keys = self.key_order.get(system)
        if keys is None:
            keys = self.key_order[system] = sorted(self.keys_of(system))
        return keys

    def keys_of(self, system: str) -> Iterator[StateKey]:
        states = self.states
        if isinstance(states, PackedStates):  # one system's tables, not every state
            return states.keys_of(system)
        return (k for k in states if k[1] == system)

    def states_of(self, system: str, category: str) -> Iterator[tuple[str, RatingState]]:
        """(player id, state) of every rating of one system and category."""
        states = self.states
        if isinstance(states, PackedStates):
            return states.of(system, category)
        return ((k[0], st) for k, st in states.items() if k[1] == system and k[2] == category)

    @property
    def processed_ids(self) -> set[tuple[str, str]]:
        return set(self.messages)

    # ---- what a transaction reads and keeps (worker.store.stream keeps less of it) ----------------

    def processed_among(self, ids: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        return {i for i in ids if i in self.messages}

    def games_with(self, query: HistoryQuery) -> list[GameSide]:
        history = self.history
        causes = {
            (r.cause_source, r.cause_id) for r in history
            if r.key.player_id == query.player_id and r.key.system == query.system
            and r.cause_type == query.cause_type and query.since <= r.changed_at <= query.until
        }
        return [
            GameSide(r.cause_source, r.cause_id, r.key.player_id, r.key.category, r.delta, r.changed_at)
            for r in history
            if r.key.system == query.system and (r.cause_source, r.cause_id) in causes
        ]

    def next_row_ids(self, n: int) -> list[int]:
        """The history row ids the next `n` records will have (from 1, in order)."""
        start = len(self.history)
        return list(range(start + 1, start + 1 + n))

    def commit(self, states: dict[StateKey, RatingState], records: list[ChangeRecord],
               processed: list[ProcessedMessage], closures: dict[str, float]) -> None:
        """A transaction's staged rows, applied when it ends normally."""
        self._update(states, closures)
        self.history.extend(records)
        messages = self.messages
        for p in processed:
            if p.outcome == "duplicate":
                first = messages[(p.source, p.id)]
                messages[(p.source, p.id)] = first._replace(duplicates=first.duplicates + p.duplicates)
            else:
                messages[(p.source, p.id)] = p

    def _update(self, states: dict[StateKey, RatingState], closures: dict[str, float]) -> None:
        """The states and closures a transaction wrote (every store keeps them whole)."""
        if not states.keys() <= self.states.keys():
            self.key_order.clear()  # a new key: the sorted keys of its system are made again
        self.states.update(states)
        self.closures.update(closures)

    @asynccontextmanager
    async def transaction(self):
        tx = _MemoryTx(self)
        yield tx
        tx.commit()

    @asynccontextmanager
    async def reader(self):
        yield _MemoryTx(self)

    async def mark_published(self, row_ids: Sequence[int]) -> None:
        self.published.update(row_ids)

    async def unpublished(self, limit: int, older_than_seconds: float) -> list[Unpublished]:
        rows = [
            Unpublished(i, r.key.player_id, r.payload)
            for i, r in enumerate(self.history, start=1)
            if i not in self.published
        ]
        return rows[:limit]

    async def outbox_backlog(self) -> int:
        return len(self.history) - len(self.published)

    def short_histories(self) -> dict[HistoryQuery, float]:
        return {}  # it keeps the whole history
