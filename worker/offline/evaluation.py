"""How well ratings predicted results: scores of (expected, observed) pairs. Pure: numbers in, numbers out.

For each (system, category), over the sides a system predicted before rating them (RatingSystem.predict):
- log-loss: the mean of -(s ln e + (1 - s) ln(1 - e)), a draw counting half each way (lower is better; a
  coin's 0.5 for every game scores ln 2 = 0.693);
- Brier score: the mean of (e - s)^2 (a coin: 0.25 at most);
- the favourite's accuracy: of the decisive results with a favourite (e != 0.5), how many he won;
- calibration: per tenth of the expected score, the mean expected against the mean observed;
- the mean expected against the mean observed (for CSR, White's score: is the +35 right?).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

BUCKETS = 10
EPSILON = 1e-12  # an expected score of exactly 0 or 1 would make a loss infinite
COIN_LOG_LOSS = math.log(2.0)


def tenth(expected: float) -> int:
    """The tenth of the expected score it falls in (1.0 in the last)."""
    return min(BUCKETS - 1, max(0, int(expected * BUCKETS)))


@dataclass(slots=True)
class Bucket:
    n: int = 0
    expected: float = 0.0
    observed: float = 0.0


@dataclass(slots=True)
class Tally:
    """The running sums of one (system, category)."""

    n: int = 0
    log_loss: float = 0.0
    brier: float = 0.0
    expected: float = 0.0
    observed: float = 0.0
    decisive: int = 0  # decisive results with a favourite
    favourite_won: int = 0
    buckets: list[Bucket] = field(default_factory=lambda: [Bucket() for _ in range(BUCKETS)])

    def add(self, expected: float, observed: float) -> None:
        e = min(1.0 - EPSILON, max(EPSILON, expected))
        self.n += 1
        self.log_loss -= observed * math.log(e) + (1.0 - observed) * math.log(1.0 - e)
        self.brier += (expected - observed) ** 2
        self.expected += expected
        self.observed += observed
        if observed != 0.5 and expected != 0.5:
            self.decisive += 1
            self.favourite_won += (expected > 0.5) == (observed == 1.0)
        bucket = self.buckets[tenth(expected)]
        bucket.n += 1
        bucket.expected += expected
        bucket.observed += observed


@dataclass(frozen=True, slots=True)
class Scores:
    system: str
    category: str
    n: int
    log_loss: float
    brier: float
    favourite_accuracy: float | None  # None: no decisive result with a favourite
    mean_expected: float
    mean_observed: float
    # (tenth, mean expected, mean observed, n) of the non-empty tenths of the expected score: 0 for 0 to 0.1, ...
    calibration: tuple[tuple[int, float, float, int], ...]


def scores(system: str, category: str, t: Tally) -> Scores:
    return Scores(
        system, category, t.n, t.log_loss / t.n, t.brier / t.n,
        t.favourite_won / t.decisive if t.decisive else None, t.expected / t.n, t.observed / t.n,
        tuple((i, b.expected / b.n, b.observed / b.n, b.n) for i, b in enumerate(t.buckets) if b.n),
    )
