"""The rating code's own speed, no I/O: Glicko-2 updates/s against the `glicko2` package from PyPI on the
same inputs, and whole CSR games/s (`./dev bench engine`, bench/engine.py; the suite; bench/replay_speed.py)."""

from __future__ import annotations

import random
import time

from worker.ratings import csr, glicko2
from worker.ratings.inputs import GameFinished, TimeControl
from worker.ratings.state import RatingState, StateKey


def glicko_inputs(n: int):
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
