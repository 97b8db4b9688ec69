"""Properties of the US Chess engine over random histories and events (hypothesis)."""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from worker.ratings import uscf
from worker.ratings.inputs import EventFinished, EventGame, EventPlayer
from worker.ratings.state import RatingState, StateKey

DAY = 86400.0
PRIOR_START = dataclasses.replace(uscf.PARAMS, special_start="prior")

# Integral ratings on a coarse grid now and then, so knots coincide (Ri - 400 == Rj + 400, ...).
ratings = st.integers(1, 27).map(lambda i: i * 100.0) | st.floats(100, 2800)


@st.composite
def special_cases(draw):
    r0 = draw(ratings)
    games = draw(st.integers(0, 30))
    n_eff = uscf.effective_games(r0, games)
    history = "mixed" if games == 0 else draw(st.sampled_from(["mixed", "wins", "losses"]))
    m = draw(st.integers(1, 8))
    opponents = [draw(ratings) for _ in range(m)]
    results = [draw(st.sampled_from([0.0, 0.5, 1.0])) for _ in range(m)]
    if 0.0 not in results:
        results[draw(st.integers(0, m - 1))] = 0.0
    losses = [i for i, r in enumerate(results) if r == 0.0]
    turned = draw(st.sampled_from(losses))
    return r0, n_eff, history, opponents, results, turned


@settings(max_examples=3000, deadline=None)
@given(special_cases(), st.sampled_from([uscf.PARAMS, PRIOR_START]))
def test_turning_a_loss_into_a_win_never_lowers_a_special_rating(case, params):
    r0, n_eff, history, opponents, results, turned = case
    before = uscf.special_rating(r0, n_eff, opponents, sum(results), history, params)
    better = list(results)
    better[turned] = 1.0
    after = uscf.special_rating(r0, n_eff, opponents, sum(better), history, params)
    assert math.isfinite(before) and math.isfinite(after)
    assert after >= before - 1e-6
    assert before <= params.special_cap and after <= params.special_cap
    if before < params.special_cap:  # below the cap the result is a root of f
        assert abs(objective(r0, n_eff, history, opponents, sum(results), before)) <= 1e-6


def objective(r0, n_eff, history, opponents, score, r):
    prior, target = {"wins": (r0 - 400, score + n_eff), "losses": (r0 + 400, score)}.get(
        history, (r0, score + n_eff / 2))
    return n_eff * uscf.provisional_expectancy(r, prior) + sum(
        uscf.provisional_expectancy(r, o) for o in opponents) - target


@st.composite
def states_for(draw, ids, cats):
    states = {}
    for pid in ids:
        for cat in cats:
            if draw(st.integers(0, 3)) == 0:
                continue  # unrated in this category
            games = draw(st.integers(0, 80))
            wins = draw(st.integers(0, games))
            draws = draw(st.integers(0, games - wins))
            rating = draw(ratings)
            peak = draw(st.none() | st.floats(1000, 2800)) if games > 25 else None
            states[StateKey(pid, "uscf", cat)] = RatingState(
                rating, None, None, games, peak, draw(st.none() | st.floats(0, 2000 * DAY)), draw(st.integers(1, 50)),
                {"wins": wins, "draws": draws, "losses": games - wins - draws, "events3": draw(st.integers(0, 20))},
            )
    return states


@st.composite
def events(draw):
    n = draw(st.integers(2, 7))
    ids = [f"p{i}" for i in range(n)]
    minutes, increment = draw(st.sampled_from([(3, 2), (10, 0), (25, 0), (45, 5), (60, 0), (90, 30)]))
    at = draw(st.floats(1.5e9, 1.9e9))
    games = []
    for rnd in range(1, draw(st.integers(1, 12)) + 1):
        a, b = draw(st.lists(st.sampled_from(ids), min_size=2, max_size=2, unique=True))
        games.append(EventGame(rnd, a, b, draw(st.sampled_from(["1-0", "0-1", "1/2-1/2"]))))
    players = tuple(
        EventPlayer(pid, draw(st.none() | st.integers(4, 70)), draw(st.none() | st.integers(1940, 2020))) for pid in ids
    )
    event = EventFinished("e", "uscf", True, at, players, tuple(games),
                          time_control_minutes=minutes, time_control_increment=increment)
    cats = uscf.categories_for(minutes, increment)
    states = draw(states_for(ids, cats))
    closed = {pid: at for pid in ids if draw(st.integers(0, 9)) == 0}
    return event, states, closed


@settings(max_examples=1000, deadline=None)
@given(events())
def test_event_ratings_are_finite_and_at_least_100(case):
    event, states, closed = case
    out = uscf.rate_event(event, states, closed)
    games = uscf.rated_games(event, closed)
    if not out.rated:
        assert out.unrated_reason == "no_games" and not games
        return
    played = {}
    for g in games:
        played[g.white] = played.get(g.white, 0) + 1
        played[g.black] = played.get(g.black, 0) + 1
    cats = uscf.event_categories(event)
    assert sorted((c.key.player_id, c.key.category) for c in out.changes) == sorted(
        (p, c) for p in played for c in cats)
    for c in out.changes:
        assert c.key.player_id not in closed
        r = c.after.rating
        assert math.isfinite(r) and r >= 100.0
        assert c.after.games == c.before.games + played[c.key.player_id]
        assert c.after.rd is None and c.after.volatility is None
        assert c.provisional == (c.after.games <= 25)
        assert c.after.version == c.before.version + 1
        e = c.after.extra
        assert e["wins"] + e["draws"] + e["losses"] >= played[c.key.player_id]
        if c.after.games > 25:
            assert c.after.peak >= r  # the peak established rating
        else:
            assert c.after.peak == c.before.peak
        assert c.floor >= 100.0
        floor = uscf.floor_of(c.before)
        assert r >= floor - 1e-9


@settings(max_examples=100, deadline=None)
@given(events())
def test_event_rating_does_not_depend_on_message_order(case):
    event, states, closed = case
    other = dataclasses.replace(event, players=tuple(reversed(event.players)), games=tuple(reversed(event.games)))
    assert repr(uscf.rate_event(other, states, closed)) == repr(uscf.rate_event(event, states, closed))
