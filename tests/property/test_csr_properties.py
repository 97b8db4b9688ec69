"""Properties of the CSR engine over random games and states (hypothesis)."""

from __future__ import annotations

import asyncio
import io
import math

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.ratings import csr
from worker.ratings.csr import CsrParams
from worker.ratings.inputs import GameFinished, TimeControl
from worker.ratings.state import RatingState, StateKey

DAY = 86400.0
ratings = st.floats(100, 3500)
rds = st.floats(45, 350)
vols = st.floats(0.01, 0.2)
results = st.sampled_from(["1-0", "0-1", "1/2-1/2"])


@st.composite
def states(draw):
    rating = draw(ratings)
    peak = draw(st.none() | st.floats(100, 3500))
    return RatingState(rating, draw(rds), draw(vols), draw(st.integers(0, 500)), peak, draw(st.floats(0, 1000 * DAY)), 1)


@st.composite
def games_and_states(draw):
    tc = draw(st.sampled_from([TimeControl(60, 0), TimeControl(300, 0), TimeControl(900, 0), TimeControl(1800, 20),
                               TimeControl(None, None, 3)]))
    cat = csr.category(tc)
    at = draw(st.floats(0, 2000 * DAY))
    game = GameFinished("g", True, "standard", tc, "a", "b", draw(results), at)
    known = {}
    for p in ("a", "b"):
        if draw(st.booleans()):
            known[StateKey(p, "csr", cat)] = draw(states())
    return game, known


def after_of(outcome, player):
    return next(c for c in outcome.changes if c.key.player_id == player)


@given(games_and_states())
def test_colour_symmetry(case):
    """Swapping colours and the sign of the adjustment gives both players exactly the same result."""
    game, known = case
    flipped_result = {"1-0": "0-1", "0-1": "1-0", "1/2-1/2": "1/2-1/2"}[game.result]
    swapped = GameFinished("g", True, "standard", game.time_control, "b", "a", flipped_result, game.finished_at)
    mirror = CsrParams(white_advantage=-csr.PARAMS.white_advantage)
    o1 = csr.rate_game(game, known)
    o2 = csr.rate_game(swapped, known, params=mirror)
    for p in ("a", "b"):
        assert after_of(o1, p).after == after_of(o2, p).after


@given(games_and_states())
def test_a_win_never_lowers_and_a_loss_never_raises(case):
    game, known = case
    outcome = csr.rate_game(game, known)
    white, black = outcome.changes
    if game.result == "1-0":
        assert white.after.rating >= white.before.rating and black.after.rating <= black.before.rating
    elif game.result == "0-1":
        assert white.after.rating <= white.before.rating and black.after.rating >= black.before.rating


@given(games_and_states())
def test_rd_stays_in_range_and_numbers_are_finite(case):
    game, known = case
    for change in csr.rate_game(game, known).changes:
        s = change.after
        # docs/rules.md#csr: the inactivity cap is 350, but Glicko-2's own per-game phi* step is not capped, so an
        # RD at 350 facing a far-away opponent may end a hair above it: at most sqrt(350^2 + sigma'^2).
        assert 45 <= s.rd <= math.hypot(350, s.volatility * 173.7178)
        assert all(math.isfinite(x) for x in (s.rating, s.rd, s.volatility))
        assert s.rating >= 100 or s.rating >= change.before.rating


@st.composite
def game_lines(draw):
    players = [f"p{i}" for i in range(draw(st.integers(2, 8)))]
    lines = []
    for i in range(draw(st.integers(1, 40))):
        w, b = draw(st.permutations(players))[:2]
        base = draw(st.sampled_from([60, 180, 600, 1800]))
        event = {
            "specversion": "1.0", "id": f"m{i}", "source": "/prop", "type": "game.finished",
            "time": "2026-11-30T12:00:00Z",
            "data": {
                "game_id": f"g{i}", "rated": True, "variant": "standard",
                "time_control": {"base_seconds": base, "increment_seconds": 0},
                "white": {"player_id": w}, "black": {"player_id": b}, "result": draw(results),
                "finished_at": f"2026-{draw(st.integers(1, 12)):02d}-01T00:00:00Z",
            },
        }
        lines.append(orjson.dumps(event))
    return lines


@settings(max_examples=30, deadline=None)
@given(game_lines())
def test_replay_is_byte_for_byte_repeatable(lines):
    from worker.commands.replay import replay

    outputs = []
    for _ in range(2):
        out = io.BytesIO()
        asyncio.run(replay(list(lines), out, errors=io.StringIO()))
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1] and outputs[0].count(b"\n") == 2 * len(lines)


@given(ratings, rds, vols, ratings, rds, st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([35.0, -35.0, 0.0]))
def test_the_one_game_path_is_bit_for_bit_the_general_glicko2(r, rd, vol, r_opp, rd_opp, score, advantage):
    from worker.ratings import glicko2

    general = glicko2.rate(r, rd, vol, [glicko2.Encounter(r_opp, rd_opp, score, 1.0, advantage)], 0.5)
    assert glicko2.rate_one(r, rd, vol, r_opp, rd_opp, score, advantage, 0.5) == (
        general.rating, general.rd, general.volatility)
