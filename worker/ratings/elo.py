"""The logistic Elo shared by the Elo-based systems (seed 001 "The Elo system").

Expected = 1 / (1 + 10^((R_opp - R) / 400)); change = K x (score - expected).
FIDE does not use the logistic expectation (it uses table 8.1.2, see `fide`); ChessKite does.
"""

from __future__ import annotations

SCALE = 400.0


def expected_score(rating: float, opponent: float, scale: float = SCALE) -> float:
    """The expected score of a player rated `rating` against one rated `opponent` (0..1)."""
    return 1.0 / (1.0 + 10.0 ** ((opponent - rating) / scale))


def elo_change(rating: float, opponent: float, score: float, k: float, scale: float = SCALE) -> float:
    """K x (score - expected): the unrounded rating change of one game (score 1, 0.5 or 0)."""
    return k * (score - expected_score(rating, opponent, scale))
