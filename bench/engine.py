"""Updates per second of one CSR game, against the `glicko2` package from PyPI on the same inputs."""

from __future__ import annotations

import random
import time

from worker.ratings import csr, glicko2
from worker.ratings.inputs import GameFinished, TimeControl
from worker.ratings.state import RatingState, StateKey


def _inputs(n: int):
    rng = random.Random(1)
    return [(rng.uniform(1000, 2500), rng.uniform(45, 350), rng.uniform(1000, 2500), rng.uniform(45, 350),
             rng.choice([0.0, 0.5, 1.0])) for _ in range(n)]


def ours(inputs) -> float:
    start = time.perf_counter()
    for r, rd, orating, ord_, s in inputs:
        glicko2.rate(r, rd, 0.06, (glicko2.Encounter(orating, ord_, s),), 0.5)
    return len(inputs) / (time.perf_counter() - start)


def reference(inputs) -> float | None:
    try:
        import glicko2 as ref  # the PyPI package (sublee/glicko2 style API)
    except ImportError:
        return None
    start = time.perf_counter()
    for r, rd, orating, ord_, s in inputs:
        p = ref.Player(rating=r, rd=rd, vol=0.06)
        p.update_player([orating], [ord_], [s])
    return len(inputs) / (time.perf_counter() - start)


def agreement(inputs) -> float | None:
    """Largest rating difference between ours and the package on the same inputs (a like-for-like check)."""
    try:
        import glicko2 as ref
    except ImportError:
        return None
    worst = 0.0
    for r, rd, orating, ord_, s in inputs[:1000]:
        p = ref.Player(rating=r, rd=rd, vol=0.06)
        p.update_player([orating], [ord_], [s])
        worst = max(worst, abs(p.getRating() - glicko2.rate_one(r, rd, 0.06, orating, ord_, s, 0.0, 0.5)[0]))
    return worst


def whole_game(n: int) -> float:
    states = {StateKey("w", "csr", "blitz"): RatingState(1843, 60, 0.06, 50, 1843, 0.0, 50),
              StateKey("b", "csr", "blitz"): RatingState(1700, 80, 0.06, 50, 1700, 0.0, 50)}
    game = GameFinished("g", True, "standard", TimeControl(300, 0), "w", "b", "1-0", 86400.0)
    start = time.perf_counter()
    for _ in range(n):
        csr.rate_game(game, states)
    return n / (time.perf_counter() - start)


def main() -> None:
    inputs = _inputs(50_000)
    a, b = ours(inputs), reference(inputs)
    print(f"engine: Glicko-2 player updates/s, ours: {a:,.0f}")
    if b:
        print(f"engine: Glicko-2 player updates/s, glicko2 package: {b:,.0f} (ours is {a / b:.1f}x; "
              f"largest rating difference on the same inputs {agreement(inputs):.1e})")
    print(f"engine: whole CSR games/s (both players, floors, inactivity): {whole_game(50_000):,.0f}")
