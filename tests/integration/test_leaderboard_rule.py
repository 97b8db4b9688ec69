"""Each system's "established" rule (RatingSystem.established, from its parameters) and the leaderboard view's
rule in SQL (the newest migration that defines it, as PostgreSQL runs it) say the same of every state, so
that the two owners of one rule cannot drift apart: a parameter set that moves CSR's provisional line, say,
fails here until a migration moves the view and its index with it (issue 39, item 3)."""

from __future__ import annotations

import itertools

import asyncpg
import orjson

from worker.ratings.registry import RATINGS, TIMELINES
from worker.ratings.state import RatingState

RDS = [None, 45.0, 109.5, 110.0, 110.5, *map(float, range(50, 351))]
GAMES = [0, 1, 24, 25, 26, 27, 30, 100]
EXTRAS = [None, {"published": 1800}, {"published": None}, {"published": 1800, "inactive": True},
          {"birth_year": 2009}]


def states() -> list[tuple[float | None, int, dict | None]]:
    return list(itertools.product(RDS, GAMES, EXTRAS))


def established(system, rd, games, extra) -> bool | None:
    """What the system says of this state; None for a state it cannot hold (an RD-less CSR rating)."""
    try:
        return system.established(RatingState(1500.0, rd, None, games, None, None, 1, extra))
    except TypeError:
        return None


async def test_the_view_and_every_system_agree_on_who_is_established(database_url):
    conn = await asyncpg.connect(database_url)
    try:
        rows, expected = [], {}
        for name, categories in RATINGS.items():
            for i, (rd, games, extra) in enumerate(states()):
                # every parameter set in effect now or later: the view can follow only one line
                said = {established(s, rd, games, extra) for s in TIMELINES[name].items()} - {None}
                if not said:
                    continue
                assert len(said) == 1, f"{name}'s parameter sets disagree on ({rd}, {games}, {extra})"
                pid = f"p{i}"
                expected[(name, pid)] = said.pop()
                rows.append((pid, name, categories[0], 1500.0, rd, None, games, None, None, 1,
                             None if extra is None else orjson.dumps(extra).decode()))
        await conn.copy_records_to_table("ratings", records=rows, columns=[
            "player_id", "system", "category", "rating", "rd", "volatility", "games", "peak", "last_at", "version",
            "extra"])
        on_board = {(r["system"], r["player_id"]) for r in await conn.fetch("SELECT system, player_id FROM leaderboard")}
    finally:
        await conn.close()
    assert set(RATINGS) == {name for name, _ in expected}
    disagree = [(key, rule) for key, rule in expected.items() if (key in on_board) != rule]
    assert disagree == [], f"{len(disagree)} states, e.g. {disagree[:5]}"
    assert 0 < len(on_board) < len(expected)  # both sides of every rule were tried
