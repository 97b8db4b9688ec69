"""Seed 000's TSR five-account table and the TSR decisions of docs/rules.md#tsr."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from worker.ratings import glicko2, tsr
from worker.ratings.inputs import EventFinished, TeamGames, TurboPlayer
from worker.ratings.state import RatingState, StateKey

DAY = 86400.0
AT = 1796040600.0  # 2026-11-30T12:10:00Z, the contract's example event


def player(pid, agreement, votes=20, team=(1, 0, 1)):
    return TurboPlayer(pid, agreement, votes, TeamGames(*team))


def event(*players, rated=True, fmt="10min", at=AT):
    return EventFinished("tl-1", "turbo_live", rated, at, tuple(players), format=fmt)


def stored(rating, rd, days_ago=1.0, games=20, volatility=0.06):
    return RatingState(rating, rd, volatility, games, None, AT - days_ago * DAY, games)


def k(pid):
    return StateKey(pid, "tsr", "turbo")


def by_player(outcome):
    return {c.key.player_id: c for c in outcome.changes}


# --- the seed's five-account table -------------------------------------------------------------

SEED_EVENT = event(
    player("anna", 0.72, 31, (2, 0, 1)),
    player("ben", 0.65, 28, (1, 0, 2)),
    player("cleo", 0.645, 25, (2, 0, 1)),
    player("dev", 0.50, 12, (1, 0, 2)),
    player("eve", 0.80, 9, (2, 0, 1)),
)
# docs/rules.md#tsr: Anna new; Ben, Cleo, Dev stored at the "TSR before" values, last rated event 3, 10, 1 days before.
SEED_STATES = {
    k("ben"): stored(1620, 90, 3),
    k("cleo"): stored(1480, 120, 10),
    k("dev"): stored(1550, 70, 1),
}


def signed(x: float) -> str:
    n = round(x)
    return f"+{n}" if n > 0 else f"−{-n}" if n < 0 else "0"


@pytest.mark.parametrize(
    "pid,before,field,after,delta",
    [
        ("anna", "1500 ±350", (3, 0, 0), "1809 ±150", "+309"),
        ("ben", "1620 ±90", (1, 1, 1), "1600 ±83", "−20"),
        ("cleo", "1480 ±120", (1, 1, 1), "1530 ±103", "+50"),
        ("dev", "1550 ±70", (0, 0, 3), "1501 ±67", "−49"),
    ],
)
def test_seed_five_account_table(pid, before, field, after, delta):
    outcome = tsr.rate_event(SEED_EVENT, SEED_STATES)
    assert outcome.rated
    ch = by_player(outcome)[pid]
    assert f"{round(ch.before.rating)} ±{round(ch.before.rd)}" == before
    assert tsr.field_wdl(SEED_EVENT, SEED_STATES)[pid] == field
    assert f"{round(ch.after.rating)} ±{round(ch.after.rd)}" == after
    assert signed(ch.delta) == delta
    assert ch.key == StateKey(pid, "tsr", "turbo")
    assert ch.floor is None and ch.after.peak is None
    assert ch.provisional == (ch.after.rd > 110)
    assert ch.after.games == ch.before.games + 1
    assert ch.after.version == ch.before.version + 1
    assert ch.after.last_at == AT


def test_seed_table_eve_is_not_rated_and_changes_nothing():
    outcome = tsr.rate_event(SEED_EVENT, SEED_STATES)
    assert [c.key.player_id for c in outcome.changes] == ["anna", "ben", "cleo", "dev"]
    without_eve = event(*(p for p in SEED_EVENT.players if p.player_id != "eve"))
    assert tsr.rate_event(without_eve, SEED_STATES).changes == outcome.changes
    assert outcome.left_out == (("eve", "too_few_votes"),)  # said, for support (issue 20, item 2)


def test_seed_table_annas_results():
    plan = tsr.plan_event(SEED_EVENT, SEED_STATES)["anna"]
    assert plan.opponents == ("ben", "cleo", "dev")
    assert f"{plan.field_weight:.2f}" == "1.33"  # 4 / 3 opponents
    assert f"{plan.team_score:.2f}" == "0.67"  # 2 wins of 3
    rating, rd = plan.team_opponent
    assert (round(rating), round(rd)) == (1550, 93)
    assert plan.own_rd == 350  # new: nothing to grow
    assert [e.weight for e in plan.encounters] == [4 / 3, 4 / 3, 4 / 3, 1.0]
    assert [e.score for e in plan.encounters] == [1.0, 1.0, 1.0, 2 / 3]


def test_seed_table_own_rd_grows_opponents_and_team_average_use_stored_values():
    plans = tsr.plan_event(SEED_EVENT, SEED_STATES)
    assert plans["ben"].own_rd == glicko2.rd_after_inactivity(90, 0.06, 3, 350)
    assert plans["cleo"].own_rd == glicko2.rd_after_inactivity(120, 0.06, 10, 350)
    assert plans["dev"].own_rd == glicko2.rd_after_inactivity(70, 0.06, 1, 350)
    # Ben's opponents enter as stored: Anna 1500/350, Cleo 1480/120, Dev 1550/70; team (1510, 180).
    assert [(e.opponent_rating, e.opponent_rd) for e in plans["ben"].encounters] == [
        (1500, 350), (1480, 120), (1550, 70), (1510, 180),
    ]


def test_seed_table_unrounded_numbers():
    """The exact floats, so that a change in summation order or growth shows up here first."""
    ch = by_player(tsr.rate_event(SEED_EVENT, SEED_STATES))
    expected = {
        "anna": (1809.2494923333036, 149.51630137500658),
        "ben": (1599.9895069318989, 82.7082740475723),
        "cleo": (1529.8713337034633, 103.03775402277996),
        "dev": (1501.3288734472862, 66.5802721223692),
    }
    for pid, (rating, rd) in expected.items():
        assert ch[pid].after.rating == pytest.approx(rating, abs=1e-9)
        assert ch[pid].after.rd == pytest.approx(rd, abs=1e-9)


# --- rated or not ------------------------------------------------------------------------------


def test_casual_event_is_unrated():
    outcome = tsr.rate_event(event(player("a", 0.7), player("b", 0.6), rated=False), {})
    assert outcome.unrated_reason == "casual" and outcome.changes == ()


def test_free_event_is_unrated():
    outcome = tsr.rate_event(event(player("a", 0.7), player("b", 0.6), fmt="free"), {})
    assert outcome.unrated_reason == "free" and outcome.changes == ()
    assert tsr.plan_event(event(player("a", 0.7), player("b", 0.6), fmt="free"), {}) == {}


@pytest.mark.parametrize("fmt", ["5min", "10min", "15min", "30min", "weekly_marathon"])
def test_paid_formats_are_rated(fmt):
    assert tsr.rate_event(event(player("a", 0.7), player("b", 0.6), fmt=fmt), {}).rated


def test_fewer_than_two_rated_players_is_unrated():
    assert tsr.rate_event(event(player("a", 0.7)), {}).unrated_reason == "too_few_rated_players"
    assert tsr.rate_event(event(), {}).unrated_reason == "too_few_rated_players"


def test_a_player_alone_above_the_vote_line_gets_no_rating():
    e = event(player("a", 0.9, votes=10), player("b", 0.5, votes=9), player("c", 0.2, votes=0))
    outcome = tsr.rate_event(e, {k("a"): stored(1600, 80)})
    assert outcome.unrated_reason == "too_few_rated_players"
    assert outcome.changes == ()


def test_exactly_ten_votes_is_rated_nine_is_not():
    e = event(player("a", 0.9, votes=10), player("b", 0.5, votes=10), player("c", 0.2, votes=9))
    assert [c.key.player_id for c in tsr.rate_event(e, {}).changes] == ["a", "b"]


def test_a_closed_player_is_left_out():
    states = {k("a"): stored(1600, 80), k("b"): stored(1500, 90), k("x"): stored(1550, 60)}
    with_x = event(player("a", 0.7), player("x", 0.9), player("b", 0.6))
    without_x = event(player("a", 0.7), player("b", 0.6))
    closed = {"x": AT - DAY}
    outcome = tsr.rate_event(with_x, states, closed)
    assert [c.key.player_id for c in outcome.changes] == ["a", "b"]
    assert outcome.changes == tsr.rate_event(without_x, states).changes
    assert outcome.left_out == (("x", "closed_account"),)
    plans = tsr.plan_event(with_x, states, closed)
    assert plans["a"].opponents == ("b",) and plans["a"].team_opponent == (1500, 90)
    # Closed after the event's own time: still left out (docs/rules.md#tsr: whatever its own time).
    assert tsr.rate_event(with_x, states, {"x": AT + DAY}) == outcome


def test_a_closed_player_does_not_count_towards_two_rated_players():
    e = event(player("a", 0.7), player("x", 0.9))
    assert tsr.rate_event(e, {}, {"x": AT}).unrated_reason == "too_few_rated_players"


# --- field part --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mine,theirs,score",
    [
        (0.65, 0.64, 0.5),  # 0.65 - 0.64 is 0.010000000000000009 in floating point: still a draw
        (0.66, 0.65, 0.5),
        (0.64, 0.65, 0.5),
        (0.30, 0.29, 0.5),
        (0.6501, 0.64, 1.0),
        (0.64, 0.6501, 0.0),
        (0.65, 0.645, 0.5),
        (1.0, 0.0, 1.0),
        (0.5, 0.5, 0.5),
    ],
)
def test_field_comparison_is_exact(mine, theirs, score):
    e = event(player("a", mine), player("b", theirs))
    plan = tsr.plan_event(e, {})["a"]
    assert plan.encounters[0].score == score
    assert plan.field == {1.0: (1, 0, 0), 0.5: (0, 1, 0), 0.0: (0, 0, 1)}[score]


def test_065_vs_064_draw_in_the_ratings():
    # Both new and equal in everything but agreement: a draw leaves them level.
    e = event(player("a", 0.65, team=(0, 0, 0)), player("b", 0.64, team=(0, 0, 0)))
    ch = by_player(tsr.rate_event(e, {}))
    assert ch["a"].after.rating == ch["b"].after.rating == 1500.0


def test_weights_split_four_games_equally():
    e = event(*(player(f"p{i}", i / 10) for i in range(6)))
    plan = tsr.plan_event(e, {})["p0"]
    field = [enc for enc in plan.encounters[:-1]]
    assert len(field) == 5 and all(enc.weight == 4 / 5 for enc in field)
    assert plan.encounters[-1].weight == 1.0


def test_no_team_part_without_team_games():
    e = event(player("a", 0.7, team=(0, 0, 0)), player("b", 0.6))
    plans = tsr.plan_event(e, {})
    assert plans["a"].team_opponent is None and plans["a"].team_score is None
    assert len(plans["a"].encounters) == 1
    assert len(plans["b"].encounters) == 2


def test_team_score_counts_draws_half():
    e = event(player("a", 0.7, team=(1, 2, 1)), player("b", 0.6))
    assert tsr.plan_event(e, {})["a"].team_score == 0.5


def test_team_opponent_is_the_mean_of_all_other_rated_players_even_beyond_200():
    rng = random.Random(7)
    states = {k(f"p{i:03}"): stored(rng.uniform(1000, 2500), rng.uniform(45, 350)) for i in range(250)}
    e = event(*(player(f"p{i:03}", rng.random()) for i in range(250)))
    plan = tsr.plan_event(e, states)["p000"]
    others = [s for key, s in states.items() if key.player_id != "p000"]
    assert len(plan.opponents) == 200
    assert plan.team_opponent[0] == pytest.approx(sum(s.rating for s in others) / 249, abs=1e-9)
    assert plan.team_opponent[1] == pytest.approx(sum(s.rd for s in others) / 249, abs=1e-9)


def brute_nearest(states, me, k=200):
    mine = states[tsr.key(me)]
    others = [(key.player_id, s) for key, s in states.items() if key.player_id != me]
    others.sort(key=lambda o: (abs(o[1].rating - mine.rating), o[1].rd, o[0]))  # integral: exact
    return sorted(pid for pid, _ in others[:k])


def test_the_200_nearest_cap():
    rng = random.Random(2026)
    # Integral ratings in a narrow band and few RDs: many exact ties on both sides of the cut.
    states = {k(f"p{i:03}"): stored(float(rng.randint(1400, 1520)), float(rng.choice([60, 80, 80, 120])))
              for i in range(250)}
    e = event(*(player(f"p{i:03}", rng.random()) for i in range(250)))
    plans = tsr.plan_event(e, states)
    assert len(plans) == 250
    for pid, plan in plans.items():
        assert len(plan.opponents) == 200
        assert sum(plan.field) == 200
        assert plan.field_weight == 4 / 200
        assert list(plan.opponents) == brute_nearest(states, pid)


def test_the_200_nearest_with_distinct_ratings():
    states = {k(f"p{i:03}"): stored(1000.0 + 10 * i, 80) for i in range(250)}
    e = event(*(player(f"p{i:03}", 0.5) for i in range(250)))
    plans = tsr.plan_event(e, states)
    assert plans["p000"].opponents == tuple(f"p{i:03}" for i in range(1, 201))
    assert plans["p249"].opponents == tuple(f"p{i:03}" for i in range(49, 249))
    assert plans["p124"].opponents == tuple(f"p{i:03}" for i in range(24, 225) if i != 124)
    assert all(plan.field == (0, 200, 0) for plan in plans.values())


def test_nearest_ties_by_smaller_rd_then_player_id():
    params = tsr.TsrParams(max_opponents=3)
    states = {
        k("me"): stored(1500, 80),
        k("near1"): stored(1490, 300), k("near2"): stored(1510, 300),  # distance 10
        k("far_a"): stored(1520, 70), k("far_x"): stored(1480, 50), k("far_w"): stored(1480, 50),  # 20
        k("far_b"): stored(1520, 50),
    }
    e = event(*(player(key.player_id, 0.5) for key in states))
    assert tsr.plan_event(e, states, params=params)["me"].opponents == ("far_b", "near1", "near2")
    del states[k("far_b")]
    e = event(*(player(key.player_id, 0.5) for key in states))
    assert tsr.plan_event(e, states, params=params)["me"].opponents == ("far_w", "near1", "near2")


def test_nearest_is_exact_for_non_integral_ratings():
    # 1500.3 - 1500.2 and 1500.2 - 1500.1 differ in binary; the nearer one is taken regardless of RD.
    params = tsr.TsrParams(max_opponents=1)
    states = {k("me"): stored(1500.2, 80), k("lo"): stored(1500.1, 45), k("hi"): stored(1500.3, 300)}
    e = event(*(player(key.player_id, 0.5) for key in states))
    exact_lo = Fraction(1500.2) - Fraction(1500.1)
    exact_hi = Fraction(1500.3) - Fraction(1500.2)
    assert exact_lo != exact_hi
    expected = ("lo",) if exact_lo < exact_hi else ("hi",)
    assert tsr.plan_event(e, states, params=params)["me"].opponents == expected


# --- RD, time, state ---------------------------------------------------------------------------


def test_own_rd_growth_is_capped_and_never_lowers_an_rd_above_the_cap():
    assert tsr.own_rd(stored(1500, 300, days_ago=10_000), AT) == 350
    assert tsr.own_rd(stored(1500, 360, days_ago=10), AT) == 360


def test_negative_days_count_as_zero_and_last_at_only_moves_forward():
    late = RatingState(1600, 80, 0.06, 5, None, AT + 5 * DAY, 5)
    states = {k("a"): late}
    e = event(player("a", 0.7), player("b", 0.6))
    plans = tsr.plan_event(e, states)
    assert plans["a"].own_rd == 80
    ch = by_player(tsr.rate_event(e, states))
    assert ch["a"].after.last_at == AT + 5 * DAY
    assert ch["b"].after.last_at == AT


def test_rd_floor_and_new_player_start():
    # Many strong-signal events in a row never take the RD under 45.
    states = {k("a"): stored(1500, 45, days_ago=0), k("b"): stored(1500, 45, days_ago=0)}
    e = event(player("a", 0.7), player("b", 0.6))
    for _ in range(30):
        for c in tsr.rate_event(e, states).changes:
            states[c.key] = c.after
            assert c.after.rd >= 45
    new = by_player(tsr.rate_event(e, {}))["a"]
    assert new.before == RatingState(1500.0, 350.0, 0.06)
    assert new.after.games == 1 and new.after.version == 1 and new.provisional


def test_every_rated_player_gets_a_change_and_extra_is_kept():
    states = {k("a"): RatingState(1500, 80, 0.06, 3, None, AT, 7, {"note": 1})}
    e = event(player("a", 0.5, team=(0, 0, 0)), player("b", 0.5, team=(0, 0, 0)))
    ch = by_player(tsr.rate_event(e, states))
    assert set(ch) == {"a", "b"}
    assert ch["a"].after.version == 8 and ch["a"].after.games == 4 and ch["a"].after.extra == {"note": 1}


def test_state_keys_and_players():
    assert tsr.state_keys(SEED_EVENT) == [StateKey(p, "tsr", "turbo") for p in ("anna", "ben", "cleo", "dev", "eve")]
    assert tsr.players(SEED_EVENT) == ["anna", "ben", "cleo", "dev", "eve"]
    assert tsr.NAME == "tsr" and tsr.CATEGORY == "turbo"


def test_params_are_the_seed_table():
    p = tsr.PARAMS
    assert (p.votes_needed, p.field_weight, p.team_weight, p.draw_margin, p.max_opponents, p.min_rated_players) == (
        10, 4.0, 1.0, 0.01, 200, 2
    )
    assert (p.start_rating, p.start_rd, p.start_volatility, p.tau, p.rd_floor, p.rd_cap, p.provisional_above) == (
        1500.0, 350.0, 0.06, 0.5, 45.0, 350.0, 110.0
    )
    with pytest.raises(AttributeError):
        p.votes_needed = 5  # frozen


def test_input_order_does_not_matter_for_the_seed_table():
    rng = random.Random(1)
    base = tsr.rate_event(SEED_EVENT, SEED_STATES)
    for _ in range(10):
        shuffled = list(SEED_EVENT.players)
        rng.shuffle(shuffled)
        assert repr(tsr.rate_event(event(*shuffled), SEED_STATES)) == repr(base)
