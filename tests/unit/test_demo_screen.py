"""The demo's screen (worker.terminal.demo_screen) fits the terminal it is drawn for, every section in it."""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console

from worker.ratings.csr import CATEGORIES
from worker.terminal.demo_screen import Entry, Mover, Snapshot, screen


def _snapshot(log_path: str = "/tmp/rating-worker-demo-4242.log", established: int = 10) -> Snapshot:
    rng = random.Random(4)
    return Snapshot(
        games_sent=123_456, sent_per_s=200.0, duplicates=1_234, bad=617, handled=125_000, handled_per_s=201.0,
        lag=17, unpublished=42, dead_letters=617,
        last_dead_letter="invalid_json: record value: invalid JSON (unexpected character: line 1 column 2 (char 1))",
        metrics_url="http://127.0.0.1:40123/metrics", log_path=log_path,
        boards={c: [Entry(f"player-{rng.randrange(300):04d}", rng.gauss(1700, 150), rng.uniform(45, 110))
                    for _ in range(established)] for c in CATEGORIES},
        movers=[Mover(f"player-{i:04d}", "correspondence", rng.gauss(0, 200), rng.gauss(1500, 200), 250.0)
                for i in range(8)])


@pytest.mark.parametrize(("width", "height"), [(80, 24), (80, 30), (100, 40), (132, 43), (160, 50), (240, 70)])
@pytest.mark.parametrize("log_path", ["/tmp/rating-worker-demo-4242.log", "/var/tmp/" + "x" * 150 + "/demo.log"])
@pytest.mark.parametrize("established", [0, 2, 10])
def test_the_screen_fits_the_terminal_with_every_section(width, height, log_path, established):
    out = io.StringIO()
    Console(file=out, width=width, height=height, color_system=None).print(
        screen(_snapshot(log_path, established), list(CATEGORIES), width, height))
    lines = out.getvalue().splitlines()
    assert len(lines) <= height and max(len(line) for line in lines) <= width, (len(lines), out.getvalue())
    text = out.getvalue()
    for part in ("stream", "worker", "outbox", "dead letters", "metrics", "log", "Leaderboards:", "Provisional (?)",
                 "consumer lag 17", "42 changes awaiting publication", "last: invalid_json"):
        assert part in text, (part, text)
    for category in CATEGORIES:
        assert category.upper() in text
    assert len([line for line in lines if "->" in line]) >= 1  # at least one mover, however small the screen


def test_room_the_leaderboards_leave_goes_to_the_movers():
    early, late = (io.StringIO(), io.StringIO())
    for out, established in ((early, 0), (late, 10)):
        Console(file=out, width=80, height=24, color_system=None).print(
            screen(_snapshot(established=established), list(CATEGORIES), 80, 24))
    movers = [len([line for line in out.getvalue().splitlines() if "->" in line]) for out in (early, late)]
    assert movers[0] > movers[1], movers
