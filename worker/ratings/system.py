"""How a rating system declares itself to the engine: one `RatingSystem`, at the end of its module.

    SYSTEM = RatingSystem(NAME, rates=("game.finished",), players=..., state_keys=..., rate=..., ...)

The engine (worker.engine) drives every system through these functions and nothing else; the registry
(worker.ratings.registry) finds the declarations by itself, so that adding a system is adding a module
(and its name to the `system` enum of schemas/rating.imported.json, which a test checks).

- `rate(payload, states, closed) -> Outcome` is the module's pure rating function; `players` are whom
  it locks, `state_keys` the states it reads; `more_keys` names states needed only when some of
  `state_keys` are not stored yet (CSR's start from the other speeds).
- `shown_rating` is the rating that `rating.changed` publishes (None for a FIDE rating not listed);
  `published` says which changed states are published at all (the others are the system's own records).
- A message that needs the games of the past (a fair-play closure) names them with `history`; the engine
  reads them through the store, adds those of the batch so far, and hands them over by `with_history`.
- A message that needs the ratings of a whole category at that moment (Chess Tempo's daily top group)
  asks with `context` (system, category, RD at most), given the states as they are; the engine lays the
  batch's changes over the store's answer and hands it over by `with_context`.
- `imports` says how the system takes a `rating.imported` (docs/rules.md#common-to-all-systems): the state an import stands
  for, the state before it when none is stored (from the player's other states, loaded by its
  `more_keys`), and the imported state's provisional mark and floor.
- `starts_unrated`: a player has no rating in the system before his first (FIDE, US Chess): the `before`
  of a rating's first change is published as `rating` null (docs/rules.md#common-to-all-systems), whatever state the maths
  starts from.
- `sweep` declares a message that concerns every stored state of the system (FIDE's monthly list,
  `rating.period_closed`): the engine applies it state by state in bounded chunks (worker.engine.sweep),
  not as one message of a batch; `rate_state` says what it changes in one state (nothing, mostly).
- `inactive` is what a system's records say of a state's activity (FIDE: marked inactive at a list),
  None for a system that has no such mark (the record then has no `inactive` field).
- `established` says whether a rating stands on the system's leaderboards (CSR: RD at most the line of
  its provisional mark, from its parameters). The leaderboard view applies the same rule in SQL (the
  newest migration that defines it); tests/integration/test_leaderboard_rule.py holds the two together,
  so that a parameter set that moves the line fails the suite until a migration follows it.
- `predict` says what the ratings expected of a message before it was rated (`rating-worker evaluate`
  scores the ratings by it): one `Prediction` per side it forecasts, none for a message it does not rate.
- `docs` writes the system's section of docs/ratings.md (`rating-worker docs`), every number computed by the
  module's own functions; None for a system without one (fair play).
- `hypothetical_game` builds the message one rated game between two players would be, in one of its
  categories: (category, white, black, result "1-0" | "1/2-1/2" | "0-1", time) -> the payload `rate`
  takes (it must need no `history` nor `context`). The read API's points at stake rate it like any
  message, writing nothing (worker.engine.preview); None for a system with no such game (puzzles, TSR).
- `parameters` names the parameter set the system was declared from (worker.ratings.parameters: a module
  with dated sets declares its system once per set, and each message is rated by the one in effect at its
  time); every `rating.changed` it causes carries the name.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from worker.ratings.inputs import GameSide, RatingImported
from worker.ratings.state import Outcome, RatingChange, RatingState, StateKey

__all__ = ["HistoryQuery", "Imports", "Prediction", "RatingSystem", "RatingsQuery", "Sweep"]


class Prediction(NamedTuple):
    """What the ratings expected of one side of a message before it was rated, and what happened."""

    category: str
    expected: float  # the side's expected score, 0 to 1 (CSR: White's)
    observed: float  # his score: 1, 1/2 or 0


class HistoryQuery(NamedTuple):
    """Both sides of every game (history rows of one cause type) that changed this player's rating in
    this system, with the cause's time between `since` and `until` (epoch seconds, both included)."""

    player_id: str
    system: str
    cause_type: str
    since: float
    until: float


class HistoryKept(NamedTuple):
    """The history rows a system's `history` queries can ask for: the rows of `system` whose cause is a
    `cause_type` message, at most `seconds` before the asking message's own time. An offline replay keeps
    only these of the past (worker.store.stream)."""

    system: str
    cause_type: str
    seconds: float


class RatingsQuery(NamedTuple):
    """The stored ratings of one system and category whose RD is at most `rd_at_most`."""

    system: str
    category: str
    rd_at_most: float


def _not_flagged(state: RatingState) -> tuple[bool, float | None]:
    return False, None


@dataclass(frozen=True)
class Imports:
    """How a system takes a `rating.imported`: what the import leaves out takes the system's start values."""

    state: Callable[[RatingImported, int], RatingState]  # the state it stands for, at this version
    # "before" when nothing is stored, given the states loaded (the player's others, by `more_keys`)
    start: Callable[[RatingImported, Mapping[StateKey, RatingState]], RatingState]
    provisional_and_floor: Callable[[RatingState], tuple[bool, float | None]] = _not_flagged
    more_keys: Callable[[RatingImported, Mapping[StateKey, RatingState]], list[StateKey]] = (
        lambda imp, loaded: [])
    # what the stored state carries into the imported one (FIDE: the earlier lists' ratings), given
    # (stored state or None, imported state)
    carried: Callable[[RatingState | None, RatingState], RatingState] = lambda stored, imported: imported


@dataclass(frozen=True)
class Sweep:
    """A message applied to every stored state of a system, one state at a time (see the module docstring)."""

    kind: str  # its message type: "rating.period_closed"
    # (payload, key, stored state) -> its changes, in order (each the state's next version); () for none
    rate_state: Callable[[Any, StateKey, RatingState], tuple[RatingChange, ...]]
    # (payload, stored state) -> whether rate_state changes it: a cheap look at every state scanned
    concerns: Callable[[Any, RatingState], bool] = lambda payload, state: True
    cause_time: Callable[[Any], float] = operator.attrgetter("closed_at")


@dataclass(frozen=True)
class RatingSystem:
    """One rating system as the engine sees it (the module docstring says what each function is for)."""

    name: str  # the `system` of rating.changed and rating.imported ("csr", ...)
    rates: tuple[str, ...]  # the messages it rates: "game.finished", "event.finished/fide", ...
    players: Callable[[Any], list[str]]
    state_keys: Callable[[Any], list[StateKey]]
    rate: Callable[[Any, Mapping[StateKey, RatingState], Mapping[str, float]], Outcome]
    title: str = ""  # its name for people: the heading of its section of docs/ratings.md
    docs: Callable[[], str] | None = None  # its section of docs/ratings.md (see the module docstring)
    categories: tuple[str, ...] = ()  # its ratings per player (none: it rates no rating of its own)
    cause_time: Callable[[Any], float] = operator.attrgetter("finished_at")
    more_keys: Callable[[Any, Mapping[StateKey, RatingState]], list[StateKey]] = lambda payload, loaded: []
    shown_rating: Callable[[RatingState], float | None] = operator.attrgetter("rating")
    history: Callable[[Any], HistoryQuery | None] = lambda payload: None
    history_kept: HistoryKept | None = None  # what `history` may ask for (required with `history`)
    with_history: Callable[[Any, tuple[GameSide, ...]], Any] = lambda payload, games: payload
    published: Callable[[StateKey], bool] = lambda key: True
    context: Callable[[Any, Mapping[StateKey, RatingState]], tuple[str, str, float] | None] = (
        lambda payload, states: None)
    with_context: Callable[[Any, Mapping[str, float]], Any] = lambda payload, ratings: payload
    imports: Imports | None = None
    starts_unrated: bool = False
    sweep: Sweep | None = None
    inactive: Callable[[RatingState], bool | None] = lambda state: None
    established: Callable[[RatingState], bool] = lambda state: True  # on the leaderboards (see the docstring)
    predict: Callable[[Any, Mapping[StateKey, RatingState]], tuple[Prediction, ...]] = lambda payload, states: ()
    parameters: str | None = None  # the parameter set it was declared from ("csr-1"), None: a system without
    # (category, white, black, result, at) -> the payload of one rated game (see the docstring); None: none
    hypothetical_game: Callable[[str, str, str, str, float], Any] | None = None
