"""Glicko-1, as in Glickman's "The Glicko system" (docs/rules.md#sources).

Pure functions on the rating scale (1500-centred points):

    q = ln(10) / 400
    g(RD) = 1 / sqrt(1 + 3 q^2 RD^2 / pi^2)
    E = 1 / (1 + 10^(-g(RD_j) (r - r_j) / 400))
    d^2 = [q^2 sum g(RD_j)^2 E_j (1 - E_j)]^-1
    r' = r + q / (1/RD^2 + 1/d^2) * sum g(RD_j) (s_j - E_j)
    RD' = sqrt((1/RD^2 + 1/d^2)^-1)

No floor, no cap and no inactivity step here: the systems that use it (Chess Tempo) apply their own
minimum RD and grow the rated player's RD with `rd_after_inactivity` before calling `rate`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Q = math.log(10.0) / 400.0  # 0.0057565 (Glickman, "The Glicko system")
_PI2 = math.pi * math.pi


@dataclass(frozen=True, slots=True)
class Encounter:
    """One result against one opponent, as the opponent's values were stored (never grown)."""

    opponent_rating: float
    opponent_rd: float
    score: float


def g(rd: float) -> float:
    """The weight an opponent's uncertainty takes off the result."""
    return 1.0 / math.sqrt(1.0 + 3.0 * Q * Q * rd * rd / _PI2)


def expected_score(rating: float, opponent_rating: float, opponent_rd: float) -> float:
    """E(s | r, r_j, RD_j)."""
    return 1.0 / (1.0 + 10.0 ** (-g(opponent_rd) * (rating - opponent_rating) / 400.0))


def rate(rating: float, rd: float, encounters: Sequence[Encounter]) -> tuple[float, float]:
    """One rating period for one player: (r', RD'). With no encounters nothing changes.

    `rd` is the player's RD at the start of the period (already grown for inactivity, if the system
    does that). Scores enter linearly, so a score above 1 (Chess Tempo's blitz 1.25) is allowed.
    """
    if not encounters:
        return rating, rd
    info = 0.0  # q^2 sum g^2 E (1 - E) = 1 / d^2
    score_sum = 0.0  # sum g (s - E)
    for e in encounters:
        g_j = g(e.opponent_rd)
        expected = 1.0 / (1.0 + 10.0 ** (-g_j * (rating - e.opponent_rating) / 400.0))
        info += g_j * g_j * expected * (1.0 - expected)
        score_sum += g_j * (e.score - expected)
    return _period_end(rating, rd, Q * Q * info, score_sum)


def rate_one(
    rating: float, rd: float, opponent_rating: float, opponent_rd: float, score: float
) -> tuple[float, float]:
    """`rate` for a single encounter, without the objects: the same numbers, bit for bit."""
    g_j = g(opponent_rd)
    expected = 1.0 / (1.0 + 10.0 ** (-g_j * (rating - opponent_rating) / 400.0))
    return _period_end(rating, rd, Q * Q * g_j * g_j * expected * (1.0 - expected), g_j * (score - expected))


def _period_end(rating: float, rd: float, inv_d2: float, score_sum: float) -> tuple[float, float]:
    precision = 1.0 / (rd * rd) + inv_d2  # 1/RD^2 + 1/d^2
    return rating + Q / precision * score_sum, math.sqrt(1.0 / precision)


def rd_after_inactivity(rd: float, c: float, periods: float, cap: float) -> float:
    """min(sqrt(RD^2 + c^2 t), cap) for t periods (Glickman, "The Glicko system", step 1).

    No growth for t <= 0; an RD already above the cap (after an import) is never lowered by it.
    """
    if periods <= 0.0 or rd >= cap:
        return rd
    return min(math.sqrt(rd * rd + c * c * periods), cap)
