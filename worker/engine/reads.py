"""What a batch reads, in which order: whom it locks, the states it loads, the past games it needs.

`needs_of` is the batch's whole want list (the systems of its messages, the players to lock in sorted
order, the keys to load, the (source, id) pairs to dedupe, the history queries); the functions below
read it through the state port (worker.store.base), either a transaction or a lock-free reader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from worker.ratings.inputs import GameSide, Message
from worker.ratings.registry import system_for
from worker.ratings.state import RatingState, StateKey
from worker.ratings.system import HistoryQuery, RatingsQuery, RatingSystem

__all__ = ["Needs", "answers", "contexts", "load", "lock", "needs_of"]


@dataclass(slots=True)
class Needs:
    systems: list[RatingSystem]
    players: list[str]
    keys: set[StateKey]
    ids: list[tuple[str, str]]
    queries: dict[int, HistoryQuery] = field(default_factory=dict)  # message index -> games it needs


def needs_of(messages: Sequence[Message], systems: Sequence[RatingSystem] | None = None) -> Needs:
    """The batch's want list. `systems`: the systems that rate the messages, when the caller has them
    already (the worker found each one while decoding); else looked up."""
    systems = list(systems) if systems is not None else [system_for(m) for m in messages]
    players = sorted({p for m, s in zip(messages, systems, strict=True) for p in s.players(m.payload)})
    keys = {k for m, s in zip(messages, systems, strict=True) for k in s.state_keys(m.payload)}
    queries = {i: q for i, (m, s) in enumerate(zip(messages, systems, strict=True))
               if (q := s.history(m.payload)) is not None}
    return Needs(systems, players, keys, [(m.source, m.id) for m in messages], queries)


async def _read_history(tx, messages: Sequence[Message], needs: Needs) -> dict[int, list[GameSide]]:
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


async def lock(tx, messages: Sequence[Message], needs: Needs) -> dict[int, list[GameSide]]:
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


async def load(reader, messages: Sequence[Message], needs: Needs) -> tuple[dict[StateKey, RatingState], set]:
    """The states the batch reads: its keys, then, only where some are missing, what those need.

    Returns the states found and every key asked for (found or not).
    """
    loaded = await reader.load_states(needs.keys)
    asked = set(needs.keys)
    more = {k for m, s in zip(messages, needs.systems, strict=True) for k in s.more_keys(m.payload, loaded)} - asked
    if more:
        asked |= more
        loaded.update(await reader.load_states(more))
    return loaded, asked


def contexts(messages: Sequence[Message], needs: Needs, states: Mapping[StateKey, RatingState]) -> set[RatingsQuery]:
    """The category-wide reads the batch's messages ask for, given these states (RatingSystem.context)."""
    return {RatingsQuery(*q) for m, s in zip(messages, needs.systems, strict=True)
            if (q := s.context(m.payload, states)) is not None}


async def answers(tx, queries: set[RatingsQuery]) -> dict[RatingsQuery, dict[str, float]]:
    return {q: await tx.ratings_at_most(q) for q in queries}
