"""The states of a whole history, packed: a mapping StateKey -> RatingState in about a third of a dict's
memory, for the stores that hold every player of one (replay's StreamStore, backfill's BulkStore).

A replay of a platform's history keeps one state per player, system and category for the whole run
(issue 22 item 1: memory flat in the stream's length), and Chess Tempo keeps one more per (user, mode,
problem) attempted (docs/rules.md#chess-tempo counts repeats over all earlier attempts), so the states are most of its
memory. As a dict of NamedTuples a state costs about 365 bytes (the StateKey, the RatingState, its five
floats, the dict's slot); here, about 140 (docs/performance.md, "`rating-worker replay` of long histories"):

- one table per system and category, player id -> value: no key tuple is kept, the system and
  category strings are kept once per table, and a player's id once for all his tables (interned);
- a value is the state's fields packed into 49 bytes (`_RECORD`), read back exactly: a float is a C double
  both ways, and a bit per optional field says which were None.

A state the record cannot hold exactly (an `extra` dict, an int rating from an import, a count past 32
bits) is kept as the RatingState itself: the mapping gives back exactly what it was given, whatever it is.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from sys import intern

from worker.ratings.state import RatingState, StateKey

__all__ = ["PackedStates"]

# rating, rd, volatility, peak, last_at (doubles), games, version (32-bit), which optional fields are None
_RECORD = struct.Struct("<dddddiiB")
_pack, _unpack = _RECORD.pack, _RECORD.unpack
_INT32 = range(-2**31, 2**31)
_RD, _VOLATILITY, _PEAK, _LAST_AT = 1, 2, 4, 8  # the None bits


def pack(state: RatingState) -> bytes | RatingState:
    """The state's record, or the state itself when a record would not give it back exactly."""
    rating, rd, volatility, games, peak, last_at, version, extra = state
    if not (extra is None and type(rating) is float and type(games) is int and type(version) is int
            and games in _INT32 and version in _INT32):
        return state
    nones = 0
    if rd is None:
        nones, rd = _RD, 0.0
    elif type(rd) is not float:
        return state
    if volatility is None:
        nones, volatility = nones | _VOLATILITY, 0.0
    elif type(volatility) is not float:
        return state
    if peak is None:
        nones, peak = nones | _PEAK, 0.0
    elif type(peak) is not float:
        return state
    if last_at is None:
        nones, last_at = nones | _LAST_AT, 0.0
    elif type(last_at) is not float:
        return state
    return _pack(rating, rd, volatility, peak, last_at, games, version, nones)


def unpack(value: bytes | RatingState) -> RatingState:
    if type(value) is not bytes:
        return value
    rating, rd, volatility, peak, last_at, games, version, nones = _unpack(value)
    if nones:
        if nones & _RD:
            rd = None
        if nones & _VOLATILITY:
            volatility = None
        if nones & _PEAK:
            peak = None
        if nones & _LAST_AT:
            last_at = None
    return RatingState(rating, rd, volatility, games, peak, last_at, version)


class PackedStates(MutableMapping[StateKey, RatingState]):
    """StateKey -> RatingState, as a dict would keep them but packed; iterated table by table (a dict's
    insertion order is not kept: nothing that reads the states depends on it, sweeps sort their keys)."""

    def __init__(self, states: Mapping[StateKey, RatingState] | Iterable[tuple[StateKey, RatingState]] = ()) -> None:
        self._tables: dict[str, dict[str, dict[str, bytes | RatingState]]] = {}  # system -> category -> player
        self._len = 0
        self.update(states)

    def get(self, key: StateKey, default: RatingState | None = None) -> RatingState | None:
        # The replay's hottest read (a dozen keys a CSR game, most of them missing): no exception raised.
        categories = self._tables.get(key[1])
        if categories is None:
            return default
        players = categories.get(key[2])
        if players is None:
            return default
        value = players.get(key[0])
        return default if value is None else unpack(value)

    def __getitem__(self, key: StateKey) -> RatingState:
        state = self.get(key)
        if state is None:
            raise KeyError(key)
        return state

    def __contains__(self, key: object) -> bool:
        try:
            player_id, system, category = key  # type: ignore[misc]
        except (TypeError, ValueError):
            return False
        return player_id in self._tables.get(system, {}).get(category, ())

    def __setitem__(self, key: StateKey, state: RatingState) -> None:
        player_id, system, category = key
        value = pack(state)  # before anything changes: a value that is no state leaves the mapping as it was
        # Every message brings its own copy of the id: the tables keep one string per player, not one per
        # rating (a player has several: his time controls, his puzzles' repeat records).
        player_id = intern(player_id)
        players = self._tables.setdefault(system, {}).setdefault(category, {})
        if player_id not in players:
            self._len += 1
        players[player_id] = value

    def __delitem__(self, key: StateKey) -> None:
        player_id, system, category = key
        categories = self._tables.get(system, {})
        players = categories.get(category, {})
        del players[player_id]  # KeyError when missing, as a dict's
        self._len -= 1
        if not players:
            del categories[category]
            if not categories:
                del self._tables[system]

    def __iter__(self) -> Iterator[StateKey]:
        for system in self._tables:
            yield from self.keys_of(system)

    def keys_of(self, system: str) -> Iterator[StateKey]:
        """The keys of one system's ratings, without visiting the others."""
        for category, players in self._tables.get(system, {}).items():
            for player_id in players:
                yield StateKey(player_id, system, category)

    def __len__(self) -> int:
        return self._len

    def update(self, states=(), /, **ignored) -> None:  # type: ignore[override]
        # A transaction's states, from a dict: one call, not MutableMapping's generic loop. (Keywords would
        # be strings, never StateKeys.)
        if ignored:
            raise TypeError("PackedStates keys are StateKeys, not keywords")
        for key, state in (states.items() if isinstance(states, Mapping) else states):
            self[key] = state

    def of(self, system: str, category: str) -> Iterator[tuple[str, RatingState]]:
        """(player id, state) of every rating of one system and category, without visiting the others."""
        for player_id, value in self._tables.get(system, {}).get(category, {}).items():
            yield player_id, unpack(value)
