"""The one interface the engine reads and writes state through.

Two implementations: `postgres.PostgresStore` (row locks, one transaction per batch) and
`memory.MemoryStore` (the offline `replay` command and fast tests). The engine drives either through
these calls only, in these orders.

A batch (`worker.engine.apply_batch`), inside `store.transaction()`:

    [stage(the plan's rows)]                          a planned batch, before it asks for its locks
    lock_players(sorted ids)                          [games_with before and under them: a fair-play closure]
    -> processed(ids) -> closed_accounts(ids)
    -> versions_changed(the plan's keys)              a planned batch: nothing changed, its staged rows stand
       or: load_states(keys) [-> load_states(what they need)] -> ratings_at_most(queries)
           -> (pure engine) -> stage(states, records, processed, closures)
    -> write_staged()

A plan (`worker.engine.plan_batch`) reads ahead of the locks from `reader()`: load_states, processed,
closed_accounts; a batch with a fair-play closure or a category-wide read is not planned.

A sweep (`worker.engine.sweep`: FIDE's monthly list) is not one transaction:

    reader: processed(its id)                         already finished: saved as a duplicate, as any message
    reader: scan_states(system, after, page) ...      page by page, no locks
    for each chunk of states it changes, one transaction: lock_players -> load_states -> save
    last transaction: lock_players(an anchor no player has) -> processed(its id) -> save(its processed id)

`save` is `stage` then `write_staged` in one call. The first Chess Tempo attempt of a day asks
`ratings_at_most` for the established ratings of its mode, under the locks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from worker.contract.changed import ChangeRecord  # noqa: F401 - the store writes and reads them
from worker.ratings.inputs import GameSide
from worker.ratings.state import RatingState, StateKey
from worker.ratings.system import HistoryQuery, RatingsQuery


class ProcessedMessage(NamedTuple):
    """One processed (source, id), one per message a batch rated or left unrated (a NamedTuple: built for
    every message, in a third of a frozen dataclass's time)."""

    source: str
    id: str
    type: str
    # applied | unrated; or duplicate: more deliveries of a message processed by an earlier batch
    # (`duplicates` of them; the store counts them on the stored row)
    outcome: str
    reason: str | None = None  # why an unrated message changed nothing ("casual", ...)
    # (player_id, reason) for every player this message left unchanged, and why: all of its players
    # when it is unrated, the participants it left out when it is rated (Outcome.left_out)
    left_out: tuple[tuple[str, str], ...] = ()
    at: float | None = None  # the message's own time (finished_at, ...), for a player's history
    duplicates: int = 0  # deliveries of it after the first, ignored (`rating-worker message` shows them)
    system: str | None = None  # the system it belongs to (csr, fide, ...; fairplay), for its left_out rows
    ref: str | None = None  # its game, competition or puzzle id (`cause.ref` of the changes it caused)


@dataclass(frozen=True, slots=True)
class Unpublished:
    row_id: int
    player_id: str
    payload: bytes


class StoreTx(Protocol):
    async def lock_players(self, player_ids: Sequence[str]) -> None:
        """Lock every player's rows, in the given (sorted) order, until the transaction ends."""

    async def processed(self, ids: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which of these (source, id) pairs were already processed (rated or not)."""

    async def closed_accounts(self, player_ids: Sequence[str]) -> dict[str, float]:
        """Players among these closed for fair play, with the closure time (epoch seconds)."""

    async def load_states(self, keys: Iterable[StateKey]) -> dict[StateKey, RatingState]:
        """The stored states of these keys; keys never rated are absent."""

    async def scan_states(self, system: str, after: StateKey | None, limit: int) -> list[tuple[StateKey, RatingState]]:
        """The next `limit` stored states of a system after the key `after` (None: from the first), in
        key order (player_id, category): the pages of a sweep (worker.engine.sweep)."""

    async def versions_changed(self, expected: Mapping[StateKey, int]) -> set[StateKey]:
        """The keys whose stored version is not the one given (0: expected not stored). Every change of
        a state increments its version, so a committed (key, version) has one value only."""

    async def games_with(self, query: HistoryQuery) -> list[GameSide]:
        """The history rows of every participant of the causes that match `query` (see HistoryQuery)."""

    async def ratings_at_most(self, query: RatingsQuery) -> dict[str, float]:
        """player_id -> rating of the stored states that match `query` (see RatingsQuery)."""

    async def save(
        self,
        states: dict[StateKey, RatingState],
        records: Sequence[ChangeRecord],
        processed: Sequence[ProcessedMessage],
        closures: dict[str, float],
    ) -> list[int]:
        """Write new states, history/outbox rows, processed ids and fair-play closures: `stage` then
        `write_staged`.

        Returns the history row ids of `records`, in order (for marking them published).
        """

    async def stage(
        self,
        states: dict[StateKey, RatingState],
        records: Sequence[ChangeRecord],
        processed: Sequence[ProcessedMessage],
        closures: dict[str, float],
    ) -> None:
        """Hand over what `write_staged` will write, replacing whatever was staged before in this
        transaction. Needs no locks: a planned batch stages its plan's rows before it asks for them."""

    async def write_staged(self) -> list[int]:
        """Write what was staged (every player written must be locked by now); returns the history row
        ids of its records, in order."""


class StateStore(Protocol):
    def transaction(self) -> AbstractAsyncContextManager[StoreTx]:
        """One transaction: commits when the block exits normally, rolls back on an exception."""

    def reader(self) -> AbstractAsyncContextManager[StoreTx]:
        """Reads without a transaction or locks (processed, closed_accounts, load_states only): the
        snapshot a batch is planned from before it takes its locks."""

    async def mark_published(self, row_ids: Sequence[int]) -> None: ...

    async def unpublished(self, limit: int, older_than_seconds: float) -> list[Unpublished]:
        """History rows not yet marked published, oldest first, created at least that long ago."""

    async def outbox_backlog(self) -> int:
        """How many history rows are not published yet (the relay's gauge)."""

    def short_histories(self) -> dict[HistoryQuery, float]:
        """The history queries answered from less than they asked for since the last call, each with the
        time its rows were kept from (-inf: none kept), and forgets them: only an offline store that keeps
        a window of the past (`stream.StreamStore`) has any; `replay` reports them."""
