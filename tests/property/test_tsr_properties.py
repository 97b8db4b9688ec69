"""Properties of the TSR engine over random Turbo Live events and states (hypothesis)."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from worker.ratings import tsr
from worker.ratings.inputs import EventFinished, TeamGames, TurboPlayer
from worker.ratings.state import RatingState, StateKey

DAY = 86400.0

# Agreements on a 0.5-point grid as well as arbitrary floats: the grid makes exact 1-point gaps
# (0.65 vs 0.64) and draws common.
agreements = st.integers(0, 200).map(lambda i: i / 200) | st.floats(0, 1)
team_games = st.builds(TeamGames, st.integers(0, 5), st.integers(0, 3), st.integers(0, 5))


@st.composite
def events(draw, min_players=2, max_players=9):
    n = draw(st.integers(min_players, max_players))
    ids = [f"p{i}" for i in range(n)]
    at = draw(st.floats(0, 2000 * DAY))
    players = tuple(
        TurboPlayer(pid, draw(agreements), draw(st.sampled_from([0, 9, 10, 11, 30])), draw(team_games))
        for pid in ids
    )
    states = {}
    for pid in ids:
        if draw(st.booleans()):
            # Integral ratings now and then, so "nearest" has exact ties; RD up to above the cap.
            rating = draw(st.integers(1400, 1420).map(float) | st.floats(100, 3500))
            states[StateKey(pid, "tsr", "turbo")] = RatingState(
                rating,
                draw(st.sampled_from([45.0, 80.0, 80.0]) | st.floats(45, 400)),
                draw(st.floats(0.01, 0.2)),
                draw(st.integers(0, 500)),
                None,
                draw(st.floats(0, 2000 * DAY)),
                draw(st.integers(1, 500)),
            )
    closed = {pid: at for pid in ids if draw(st.integers(0, 9)) == 0}
    params = tsr.TsrParams(max_opponents=draw(st.sampled_from([200, 1, 2, 3])))
    event = EventFinished("tl", "turbo_live", True, at, players, format="10min")
    return event, states, closed, params


@settings(deadline=None)
@given(events(), st.randoms(use_true_random=False))
def test_player_order_does_not_matter(case, rnd):
    event, states, closed, params = case
    shuffled = list(event.players)
    rnd.shuffle(shuffled)
    other = EventFinished(event.competition_id, event.kind, True, event.finished_at, tuple(shuffled), format="10min")
    # repr: bit-identical floats (== would call 0.0 and -0.0 equal)
    assert repr(tsr.rate_event(other, states, closed, params)) == repr(tsr.rate_event(event, states, closed, params))


@settings(deadline=None)
@given(events(), st.data())
def test_raising_agreement_never_lowers_the_players_tsr(case, data):
    event, states, closed, params = case
    outcome = tsr.rate_event(event, states, closed, params)
    if not outcome.rated:
        return
    rated = [c.key.player_id for c in outcome.changes]
    pid = data.draw(st.sampled_from(rated))
    i = next(j for j, p in enumerate(event.players) if p.player_id == pid)
    old = event.players[i]
    higher = data.draw(st.floats(old.agreement, 1) | st.integers(0, 200).map(lambda x: x / 200).filter(
        lambda a: a >= old.agreement))
    players = list(event.players)
    players[i] = TurboPlayer(pid, higher, old.votes, old.team_games)
    raised = EventFinished("tl", "turbo_live", True, event.finished_at, tuple(players), format="10min")
    before = next(c for c in outcome.changes if c.key.player_id == pid).after.rating
    after = next(c for c in tsr.rate_event(raised, states, closed, params).changes if c.key.player_id == pid)
    assert after.after.rating >= before


@settings(deadline=None)
@given(events())
def test_rd_floor_finite_numbers_and_bookkeeping(case):
    event, states, closed, params = case
    outcome = tsr.rate_event(event, states, closed, params)
    expected = sorted(
        p.player_id for p in event.players if p.votes >= 10 and p.player_id not in closed
    )
    if len(expected) < 2:
        assert outcome.unrated_reason == "too_few_rated_players" and outcome.changes == ()
        return
    assert [c.key.player_id for c in outcome.changes] == expected
    for c in outcome.changes:
        a = c.after
        assert a.rd >= 45
        assert all(math.isfinite(x) for x in (a.rating, a.rd, a.volatility))
        assert a.volatility > 0
        assert a.games == c.before.games + 1 and a.version == c.before.version + 1
        assert a.last_at == max(c.before.last_at if c.before.last_at is not None else -math.inf, event.finished_at)
        assert a.peak is None and c.floor is None
        assert c.provisional == (a.rd > 110)
        plan_opponents = tsr.plan_event(event, states, closed, params)[c.key.player_id].opponents
        assert len(plan_opponents) == min(params.max_opponents, len(expected) - 1)
        assert c.key.player_id not in plan_opponents and not set(plan_opponents) & set(closed)


@given(events(min_players=1, max_players=9), st.data())
def test_a_player_alone_above_the_vote_line_is_never_rated(case, data):
    """Whatever the others did, one player with >= 10 votes among players with fewer gets no rating."""
    event, states, _, params = case  # nobody closed here: only the vote line decides
    lone = data.draw(st.sampled_from([p.player_id for p in event.players]))
    players = tuple(replace(p, votes=data.draw(st.integers(10, 50))) if p.player_id == lone
                    else replace(p, votes=data.draw(st.integers(0, 9))) for p in event.players)
    outcome = tsr.rate_event(replace(event, players=players), states, {}, params)
    assert outcome.changes == () and outcome.unrated_reason == "too_few_rated_players"
