"""ChessKite puzzle ratings: plain logistic Elo (seed 001 "Puzzle ratings"; docs/rules.md#chesskite).

Everyone starts at 1000. Only challenge cards (`challenge: true`) are rated, with K = 32, as one game
against the puzzle's own rating, which comes with the attempt (`puzzle_rating`) and is never changed
by the worker. Other attempts are consumed and counted, unrated ("not_challenge"). No RD: `rd` and
`volatility` are None; no floor, no provisional period.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

from worker.ratings import elo
from worker.ratings.doctext import signed
from worker.ratings.inputs import PuzzleAttempted
from worker.ratings.parameters import ParameterSet
from worker.ratings.state import Outcome, RatingChange, RatingState, StateKey
from worker.ratings.system import Imports, Prediction, RatingSystem

NAME = "chesskite"
CATEGORY = "puzzle"


@dataclass(frozen=True, slots=True)
class ChessKiteParams:
    """The seed's numbers; each a documented setting (docs/rules.md#chesskite)."""

    start_rating: float = 1000.0
    k: float = 32.0
    scale: float = elo.SCALE


PARAMS = ChessKiteParams()


def key(player_id: str) -> StateKey:
    return StateKey(player_id, NAME, CATEGORY)


def players(attempt: PuzzleAttempted) -> list[str]:
    """The one player of the attempt (the puzzle is not a rated entity here)."""
    return [attempt.player_id]


def state_keys(attempt: PuzzleAttempted) -> list[StateKey]:
    return [key(attempt.player_id)]


def start_state(params: ChessKiteParams = PARAMS) -> RatingState:
    return RatingState(params.start_rating)


def current_state(
    player_id: str, states: Mapping[StateKey, RatingState], params: ChessKiteParams = PARAMS
) -> RatingState:
    st = states.get(key(player_id))
    return st if st is not None else start_state(params)


def unrated_reason(attempt: PuzzleAttempted, closed: Mapping[str, float] = {}) -> str | None:  # noqa: B006
    """A fair-play-closed account is frozen; only challenge cards are rated."""
    if attempt.player_id in closed:
        return "closed_account"
    if not attempt.challenge:
        return "not_challenge"
    return None


def updated_state(
    before: RatingState, puzzle_rating: float, correct: bool, at: float, params: ChessKiteParams = PARAMS
) -> RatingState:
    """One Elo game against the puzzle: solved = 1, missed = 0."""
    score = 1.0 if correct else 0.0
    rating = before.rating + elo.elo_change(before.rating, puzzle_rating, score, params.k, params.scale)
    last_at = at if before.last_at is None else max(before.last_at, at)
    return RatingState(
        rating, None, None, before.games + 1, before.peak, last_at, before.version + 1, before.extra
    )


def rate_attempt(
    attempt: PuzzleAttempted,
    states: Mapping[StateKey, RatingState],
    closed: Mapping[str, float] = {},  # noqa: B006 - read-only
    params: ChessKiteParams = PARAMS,
) -> Outcome:
    """Rate one ChessKite attempt: a challenge card moves the player's rating, anything else is unrated."""
    if attempt.system != NAME:
        raise ValueError(f"not a ChessKite attempt: system {attempt.system!r}")
    reason = unrated_reason(attempt, closed)
    if reason is not None:
        return Outcome(unrated_reason=reason)
    if attempt.puzzle_rating is None:
        raise ValueError(f"ChessKite attempt on {attempt.puzzle_id} has no puzzle_rating")
    before = current_state(attempt.player_id, states, params)
    after = updated_state(before, attempt.puzzle_rating, attempt.correct, attempt.attempted_at, params)
    return Outcome(changes=(RatingChange(key(attempt.player_id), before, after, False, None),))


def predict(
    attempt: PuzzleAttempted, states: Mapping[StateKey, RatingState], params: ChessKiteParams = PARAMS
) -> tuple[Prediction, ...]:
    """The player's expected score against the puzzle before a rated attempt (the Elo expectation the
    rating moves by), against whether he solved it; nothing for an attempt that is not rated."""
    if unrated_reason(attempt) is not None or attempt.puzzle_rating is None:
        return ()
    rating = current_state(attempt.player_id, states, params).rating
    expected = elo.expected_score(rating, attempt.puzzle_rating, params.scale)
    return (Prediction(CATEGORY, expected, 1.0 if attempt.correct else 0.0),)


def imported_state(imp, version: int) -> RatingState:
    return RatingState(imp.rating, None, None, imp.games or 0, None, imp.last_played_at, version)


def docs() -> str:
    """ChessKite's section of docs/ratings.md, with the seed's example computed by worker.ratings.elo."""
    e = elo.expected_score(1500, 1700)
    changes = ", ".join(signed(elo.elo_change(1500, 1700, s, 20)) for s in (1.0, 0.5, 0.0))
    p = PARAMS
    return (f"## ChessKite puzzles\n\nElo on the 400 scale: start {p.start_rating:g}, K {p.k:g}; only challenge "
            f"cards are rated, against the puzzle's own rating (which the worker does not change). The seed's "
            f"example: 1500 against 1700 expects {e:.2f}; with K 20 a win, a draw and a loss give {changes}.")


def declare(chosen: ParameterSet) -> RatingSystem:
    """ChessKite as this parameter set declares it (worker.ratings.parameters)."""
    p = chosen.params
    return RatingSystem(
        NAME, ("puzzle.attempted/chesskite",), players, state_keys, partial(rate_attempt, params=p),
        title="ChessKite", docs=docs, categories=(CATEGORY,), cause_time=operator.attrgetter("attempted_at"),
        imports=Imports(imported_state, lambda imp, states: start_state(p)), parameters=chosen.name,
        predict=partial(predict, params=p),
    )


#: Every set ChessKite's parameters have had, each in effect from its date on (docs/ratings.md lists them).
PARAMETER_SETS = (
    ParameterSet("chesskite-1", None, PARAMS, "the seed's values (docs/rules.md#chesskite)."),
)
SYSTEM = declare(PARAMETER_SETS[-1])
