"""`./dev bench engine`: Glicko-2 updates per second against the `glicko2` package from PyPI on the same
inputs, and whole CSR games per second (bench/engine_speed.py measures them)."""

from __future__ import annotations

from bench.engine_speed import agreement, glicko_inputs, ours, reference, whole_game


def main() -> None:
    inputs = glicko_inputs(50_000)
    a, b = ours(inputs), reference(inputs)
    print(f"engine: Glicko-2 player updates/s, ours: {a:,.0f}")
    if b:
        print(f"engine: Glicko-2 player updates/s, glicko2 package: {b:,.0f} (ours is {a / b:.1f}x; "
              f"largest rating difference on the same inputs {agreement(inputs):.1e})")
    print(f"engine: whole CSR games/s (both players, floors, inactivity): {whole_game(50_000):,.0f}")
