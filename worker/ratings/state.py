"""Plain values shared by every rating system: the state of one rating and one change of it.

Immutable NamedTuples rather than frozen dataclasses: several are built per rated game, and a
NamedTuple is built in a third of the time.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class StateKey(NamedTuple):
    """One rating: a player's rating in one category (speed, pool) of one system."""

    player_id: str
    system: str
    category: str


class RatingState(NamedTuple):
    """What the rules need to know about one rating between two messages.

    `rd` and `volatility` are None for systems that do not have them (Elo, US Chess).
    `peak` is the highest *established* rating (the source of floors), None until established.
    `last_at` is the time (epoch seconds, from the messages, never the wall clock) of the last rated message.
    `version` counts the changes of this rating, from 1; 0 means never changed.
    `extra` holds system-specific counters (US Chess W/D/L, ...) as a small JSON-able dict.
    """

    rating: float
    rd: float | None = None
    volatility: float | None = None
    games: int = 0
    peak: float | None = None
    last_at: float | None = None
    version: int = 0
    extra: dict[str, Any] | None = None


class RatingChange(NamedTuple):
    """One rating moved (or its RD, volatility or games did) because of one message."""

    key: StateKey
    before: RatingState
    after: RatingState
    provisional: bool
    floor: float | None

    @property
    def delta(self) -> float:
        return self.after.rating - self.before.rating


class Outcome(NamedTuple):
    """What a rating system decided about one message: the changes, or why nothing changed."""

    changes: tuple[RatingChange, ...] = ()
    unrated_reason: str | None = None
    # (player_id, closed_at): this message closed the account for fair play; every later message
    # treats it as frozen (docs/rules.md#fair-play).
    closure: tuple[str, float] | None = None
    # (player_id, reason) for each participant of a message whose rating did not change and why (TSR:
    # fewer than 10 votes; FIDE: no game of his counted, also when nobody's did): support's "why not me?".
    left_out: tuple[tuple[str, str], ...] = ()

    @property
    def rated(self) -> bool:
        return self.unrated_reason is None
