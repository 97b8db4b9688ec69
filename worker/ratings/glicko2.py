"""Glicko-2, as in Glickman's "Example of the Glicko-2 system" (docs/rules.md#sources).

Works on the rating scale (1500-centred points); conversion to the Glicko-2 scale happens inside.
The weighted form (each encounter with a weight, used by TSR) reduces to Glickman's when every
weight is 1: v = 1 / sum(w g^2 E (1 - E)), delta = v * sum(w g (s - E)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

SCALE = 173.7178  # Glicko-2 to rating points (Glickman, step 2)
_PI2 = math.pi * math.pi


@dataclass(frozen=True, slots=True)
class Encounter:
    """One result against one opponent, as the opponent's values were stored (never grown).

    `advantage` shifts only the expected score: +35 for White in CSR means "as if 35 points stronger".
    """

    opponent_rating: float
    opponent_rd: float
    score: float
    weight: float = 1.0
    advantage: float = 0.0


@dataclass(frozen=True, slots=True)
class Glicko2Result:
    rating: float
    rd: float
    volatility: float


def g(phi: float) -> float:
    """Glickman step 3: the weight an opponent's uncertainty takes off the result."""
    return 1.0 / math.sqrt(1.0 + 3.0 * phi * phi / _PI2)


def expected_score(rating: float, opponent_rating: float, opponent_rd: float, advantage: float = 0.0) -> float:
    """E(mu, mu_j, phi_j) on the rating scale, with an optional advantage in rating points."""
    mu = (rating + advantage - 1500.0) / SCALE
    mu_j = (opponent_rating - 1500.0) / SCALE
    return 1.0 / (1.0 + math.exp(-g(opponent_rd / SCALE) * (mu - mu_j)))


def new_volatility(phi: float, sigma: float, delta: float, v: float, tau: float, epsilon: float = 1e-6) -> float:
    """Glickman step 5: sigma' by the Illinois iteration on
    f(x) = e^x (delta^2 - phi^2 - v - e^x) / (2 (phi^2 + v + e^x)^2) - (x - a) / tau^2.

    f is written out in the loop (no closure): this runs twice per rated game.
    """
    exp = math.exp
    a = math.log(sigma * sigma)
    phi2_v = phi * phi + v
    delta2 = delta * delta
    tau2 = tau * tau

    big_a = a
    if delta2 > phi2_v:
        big_b = math.log(delta2 - phi2_v)
    else:
        k = 1
        while True:
            x = a - k * tau
            ex = exp(x)
            d = phi2_v + ex
            if ex * (delta2 - phi2_v - ex) / (2.0 * d * d) - (x - a) / tau2 >= 0.0:
                break
            k += 1
        big_b = a - k * tau
    ex = exp(big_a)
    d = phi2_v + ex
    f_a = ex * (delta2 - phi2_v - ex) / (2.0 * d * d) - (big_a - a) / tau2
    ex = exp(big_b)
    d = phi2_v + ex
    f_b = ex * (delta2 - phi2_v - ex) / (2.0 * d * d) - (big_b - a) / tau2
    # f is monotone decreasing, so the bracket shrinks every step; the bound only guards against
    # a pathological input spinning forever (never reached in the property tests).
    for _ in range(200):
        if abs(big_b - big_a) <= epsilon:
            break
        c = big_a + (big_a - big_b) * f_a / (f_b - f_a)
        ex = exp(c)
        d = phi2_v + ex
        f_c = ex * (delta2 - phi2_v - ex) / (2.0 * d * d) - (c - a) / tau2
        if f_c * f_b <= 0.0:
            big_a, f_a = big_b, f_b
        else:
            f_a /= 2.0
        big_b, f_b = c, f_c
    return exp(big_a / 2.0)


def rate(
    rating: float, rd: float, volatility: float, encounters: Sequence[Encounter], tau: float
) -> Glicko2Result:
    """One rating period for one player (Glickman steps 2 to 8)."""
    mu = (rating - 1500.0) / SCALE
    phi = rd / SCALE
    if not encounters:
        # Step 6 for a player who did not compete: only the deviation grows.
        return Glicko2Result(rating, math.sqrt(phi * phi + volatility * volatility) * SCALE, volatility)
    inv_v = 0.0
    score_sum = 0.0
    for e in encounters:
        g_j = g(e.opponent_rd / SCALE)
        mu_j = (e.opponent_rating - 1500.0) / SCALE
        mu_e = mu + e.advantage / SCALE
        expected = 1.0 / (1.0 + math.exp(-g_j * (mu_e - mu_j)))
        inv_v += e.weight * g_j * g_j * expected * (1.0 - expected)
        score_sum += e.weight * g_j * (e.score - expected)
    return Glicko2Result(*_period_end(mu, phi, volatility, inv_v, score_sum, tau))


def rate_one(
    rating: float, rd: float, volatility: float, opponent_rating: float, opponent_rd: float, score: float,
    advantage: float, tau: float,
) -> tuple[float, float, float]:
    """`rate` for one encounter of weight 1 (a game), without the objects: bit for bit the same numbers."""
    mu = (rating - 1500.0) / SCALE
    phi = rd / SCALE
    phi_j = opponent_rd / SCALE
    g_j = 1.0 / math.sqrt(1.0 + 3.0 * phi_j * phi_j / _PI2)
    mu_e = mu + advantage / SCALE
    expected = 1.0 / (1.0 + math.exp(-g_j * (mu_e - (opponent_rating - 1500.0) / SCALE)))
    return _period_end(mu, phi, volatility, g_j * g_j * expected * (1.0 - expected), g_j * (score - expected), tau)


def _period_end(
    mu: float, phi: float, volatility: float, inv_v: float, score_sum: float, tau: float
) -> tuple[float, float, float]:
    """Glickman steps 3 to 8 from the sums over the period's encounters."""
    v = 1.0 / inv_v
    delta = v * score_sum
    sigma = new_volatility(phi, volatility, delta, v, tau)
    phi_star = math.sqrt(phi * phi + sigma * sigma)
    phi_new = 1.0 / math.sqrt(1.0 / (phi_star * phi_star) + 1.0 / v)
    mu_new = mu + phi_new * phi_new * score_sum
    return mu_new * SCALE + 1500.0, phi_new * SCALE, sigma


def rd_after_inactivity(rd: float, volatility: float, days: float, cap: float) -> float:
    """docs/rules.md#csr: sqrt(RD^2 + (sigma * 173.7178)^2 * days), at most `cap`.

    An RD already above the cap (Glicko-2's own phi* step is not capped) is never lowered.
    """
    if days <= 0.0 or rd >= cap:
        return rd
    grown = math.sqrt(rd * rd + (volatility * SCALE) ** 2 * days)
    return min(grown, cap)
