"""Seed 004 (US Chess), worked numbers for Glickman & Doan's "The US Chess Rating System", and the US Chess
decisions of docs/rules.md#us-chess."""

from __future__ import annotations

import calendar
import dataclasses
import math

import pytest

from worker.ratings import uscf
from worker.ratings.inputs import EventFinished, EventGame, EventPlayer
from worker.ratings.state import RatingState, StateKey

AT_2022 = float(calendar.timegm((2022, 6, 1, 18, 0, 0)))  # B = 14: the seed's numbers
AT_2024 = float(calendar.timegm((2024, 6, 1, 18, 0, 0)))  # B = 12
AT_2026 = float(calendar.timegm((2026, 11, 29, 20, 0, 0)))  # B = 10 (the contract's example)

SEED_OPPONENTS = [1400.0, 1550.0, 1600.0, 1700.0]


def k(pid, cat="regular"):
    return StateKey(pid, "uscf", cat)


def mixed(games, rating, peak=None, wins=None, draws=0, events3=0, last_at=None, version=3):
    """An established-style state whose history is neither all wins nor all losses."""
    wins = games // 2 if wins is None else wins
    extra = {"wins": wins, "draws": draws, "losses": games - wins - draws, "events3": events3}
    return RatingState(rating, None, None, games, peak, last_at, version, extra)


def event(games, players=None, minutes=90, increment=30, at=AT_2026, rated=True):
    ids = sorted({g[1] for g in games} | {g[2] for g in games})
    players = players or {}
    return EventFinished(
        "e-1", "uscf", rated, at,
        tuple(players.get(pid, EventPlayer(pid)) for pid in ids),
        tuple(EventGame(*g) for g in games),
        time_control_minutes=minutes, time_control_increment=increment,
    )


# --- seed: expected score -------------------------------------------------------------------------


@pytest.mark.parametrize("gap, expected", [(0, 0.50), (100, 0.64), (200, 0.76), (400, 0.91)])
def test_seed_expected_score_table(gap, expected):
    assert round(uscf.expected_score(1500 + gap, 1500), 2) == expected
    assert uscf.expected_score(1500 + gap, 1500) + uscf.expected_score(1500, 1500 + gap) == pytest.approx(1.0)


def test_expected_score_has_no_400_point_cap():
    assert uscf.expected_score(2300, 1500) > uscf.expected_score(1900, 1500) > 0.909


def test_seed_worked_example_expected_scores():
    es = [uscf.expected_score(1500, r) for r in SEED_OPPONENTS]
    assert [round(e, 2) for e in es] == [0.64, 0.43, 0.36, 0.24]
    assert round(sum(es), 2) == 1.67
    assert sum(es) == pytest.approx(1.6688, abs=1e-4)  # Glickman & Doan, the standard formula


# --- seed + Glickman & Doan: N* and K -------------------------------------------------------------


@pytest.mark.parametrize(
    "r0, cap, k4",
    [(400, 8.4, 64.5), (800, 10.3, 56.1), (1200, 13.1, 46.7), (1600, 18.1, 36.1), (2000, 28.6, 24.5),
     (2355, 50.0, 14.8), (2400, 50.0, 14.8), (2800, 50.0, 14.8)],
)
def test_seed_cap_on_n_eff_and_k_in_a_four_round_event(r0, cap, k4):
    assert round(uscf.n_star(r0), 1) == cap
    assert round(uscf.k_factor(uscf.effective_games(r0, 1000), 4), 1) == k4


@pytest.mark.parametrize("r0, cap, k4", [(1500, 16.57, 38.89), (1700, 20.01, None), (2300, 45.71, 16.09)])
def test_specs_n_star_vectors(r0, cap, k4):
    assert round(uscf.n_star(r0), 2) == cap
    if k4 is not None:
        assert round(uscf.k_factor(uscf.n_star(r0), 4), 2) == k4


def test_n_star_above_2355_is_50_and_continuous_at_the_boundary():
    assert uscf.n_star(2355.0001) == 50.0
    assert uscf.n_star(2355) == pytest.approx(49.989, abs=1e-3)


def test_seed_k_80_for_n_eff_6_over_4_games():
    assert uscf.k_factor(6, 4) == 80.0


@pytest.mark.parametrize(
    "n_eff, m, full_k",
    [(6, 4, 80), (6, 6, 66.67), (6, 10, 50), (20, 4, 33.33), (20, 6, 30.77), (20, 10, 26.67),
     (50, 4, 14.81), (50, 6, 14.29), (50, 10, 13.33)],
)
def test_specs_k_table(n_eff, m, full_k):
    assert round(uscf.k_factor(n_eff, m), 2) == full_k


@pytest.mark.parametrize(
    "r0, games, n_eff", [(600, 5, 5.0), (600, 20, 9.235), (1500, 12, 12.0), (2000, 40, 28.608), (1500, 0, 0.0)]
)
def test_specs_n_eff_examples(r0, games, n_eff):
    assert round(uscf.effective_games(r0, games), 3) == n_eff


# --- seed: standard formula and bonus -------------------------------------------------------------


def seed_example(score, multiplier=14.0):
    n_eff = uscf.effective_games(1500, 40)
    return uscf.standard_rating(1500, n_eff, SEED_OPPONENTS, score, multiplier, eligible=True)


def test_seed_worked_example_k():
    assert round(uscf.effective_games(1500, 40), 2) == 16.57
    assert round(seed_example(2).k, 2) == 38.89


def test_seed_worked_example_score_2_gains_12_9():
    r = seed_example(2)
    assert round(2 - r.expected, 3) == 0.331
    assert round(r.plain, 1) == 12.9
    assert r.bonus == 0.0
    assert round(r.rating - 1500, 1) == 12.9
    assert round(r.rating) == 1513


def test_seed_bonus_threshold_is_28_in_a_four_round_event():
    assert 14 * math.sqrt(4) == 28
    assert uscf.bonus(28.0, 4, 14) == 0.0
    assert uscf.bonus(30.0, 4, 14) == pytest.approx(2.0)


def test_seed_worked_example_score_2_5_bonus_4_3_total_36_7():
    r = seed_example(2.5)
    assert round(r.plain, 1) == 32.3
    assert round(r.bonus, 1) == 4.3
    assert round(r.rating - 1500, 1) == 36.7


def test_seed_worked_example_score_4_bonus_62_7_total_153_3():
    r = seed_example(4)
    assert round(r.plain, 1) == 90.7
    assert round(r.bonus, 1) == 62.7
    assert round(r.rating - 1500, 1) == 153.3


@pytest.mark.parametrize("multiplier, total_2_5, total_4", [(12, 40.7, 157.3), (10, 44.7, 161.3)])
def test_specs_worked_example_with_later_multipliers(multiplier, total_2_5, total_4):
    assert round(seed_example(2.5, multiplier).rating - 1500, 1) == total_2_5
    assert round(seed_example(4, multiplier).rating - 1500, 1) == total_4
    assert round(seed_example(2, multiplier).rating - 1500, 1) == 12.9


def test_seed_falling_short_costs_exactly_k_times_the_shortfall():
    r = seed_example(0)
    assert r.bonus == 0.0
    assert r.rating - 1500 == pytest.approx(r.k * (0 - r.expected))


def test_bonus_only_when_eligible():
    n_eff = uscf.effective_games(1500, 40)
    r = uscf.standard_rating(1500, n_eff, SEED_OPPONENTS, 4, 14, eligible=False)
    assert r.bonus == 0.0 and round(r.rating - 1500, 1) == 90.7


def test_specs_three_round_event_counts_as_four_in_the_threshold():
    n_eff = uscf.effective_games(1200, 30)
    assert round(n_eff, 2) == 13.13
    r = uscf.standard_rating(1200, n_eff, [1400, 1450, 1500], 3, 10, eligible=True)
    assert round(r.k, 2) == 49.61
    assert round(r.plain, 2) == 119.92
    assert round(r.bonus, 2) == 99.92
    assert round(r.rating, 2) == 1419.83


@pytest.mark.parametrize(
    "when, multiplier",
    [((2022, 6, 1, 0, 0, 0), 14), ((2023, 1, 31, 23, 59, 59), 14), ((2023, 2, 1, 0, 0, 0), 12),
     ((2024, 12, 31, 23, 59, 59), 12), ((2025, 1, 1, 0, 0, 0), 10), ((2026, 11, 29, 20, 0, 0), 10),
     ((2010, 1, 1, 0, 0, 0), 14)],
)
def test_bonus_multiplier_by_event_end(when, multiplier):
    assert uscf.bonus_multiplier(float(calendar.timegm(when))) == multiplier


def test_bonus_multiplier_change_dates_are_midnight_utc():
    assert uscf.FEB_1_2023 == calendar.timegm((2023, 2, 1, 0, 0, 0))
    assert uscf.JAN_1_2025 == calendar.timegm((2025, 1, 1, 0, 0, 0))


@pytest.mark.parametrize(
    "opponents, eligible",
    [(["a", "b"], False), (["a", "b", "c"], True), (["a", "a", "b"], True), (["a", "a", "a"], False),
     (["a", "b", "a", "b"], True), (["a", "b", "a", "c", "a"], False), ([], False)],
)
def test_bonus_eligibility(opponents, eligible):
    assert uscf.bonus_eligible(opponents) is eligible


# --- dual-rated events ----------------------------------------------------------------------------


@pytest.mark.parametrize("r0, factor", [(2000, 1.0), (2200, 1.0), (2300, 0.75), (2400, 0.5), (2499, 0.2525),
                                        (2500, 0.25), (2700, 0.25)])
def test_dual_rated_regular_k_factor(r0, factor):
    assert uscf.dual_factor(r0) == pytest.approx(factor)


def test_specs_dual_rated_example():
    n_eff = uscf.effective_games(2300, 100)
    opponents = [2200, 2350, 2400, 2250]
    normal = uscf.standard_rating(2300, n_eff, opponents, 3, 10, False)
    dual = uscf.standard_rating(2300, n_eff, opponents, 3, 10, False, dual_regular=True)
    assert round(normal.expected, 3) == 2.0
    assert round(normal.k, 2) == 16.09 and round(normal.rating, 2) == 2316.09
    assert round(dual.k, 2) == 12.07 and round(dual.rating, 2) == 2312.07


@pytest.mark.parametrize(
    "minutes, increment, cats",
    [(4, 0, ()), (3, 1, ()), (4, 1, ("blitz",)), (5, 0, ("blitz",)), (3, 2, ("blitz",)), (10, 0, ("blitz",)),
     (5, 5, ("blitz",)), (10, 1, ("quick",)), (15, 10, ("quick",)), (29, 0, ("quick",)), (30, 0, ("regular", "quick")),
     (45, 5, ("regular", "quick")), (60, 5, ("regular", "quick")), (65, 1, ("regular",)), (66, 0, ("regular",)),
     (90, 30, ("regular",))],
)
def test_categories_by_minutes_plus_increment(minutes, increment, cats):
    assert uscf.categories_for(minutes, increment) == cats


def test_seed_g45_d5_is_50_and_dual_rated():
    assert uscf.is_dual(45, 5)
    assert not uscf.is_dual(90, 30)


# --- special formula ------------------------------------------------------------------------------


def test_seed_1500_over_5_games_beating_a_500_stays_1500():
    assert uscf.old_provisional_rating(1500, 5, [500], 1) == pytest.approx(1400)  # the old formula
    assert uscf.special_rating(1500, 5, [500], 1) == pytest.approx(1500)


@pytest.mark.parametrize(
    "r0, n_eff, opponents, score, history, result",
    [
        (1500, 6, [1400, 1550, 1650], 1.5, "mixed", 1511.111),
        (1500, 5, [500], 1, "mixed", 1500.0),
        (1200, 4, [1300, 1350, 1400], 3, "wins", 1800.0),
        (1200, 4, [1100, 1150, 1000], 0, "losses", 600.0),
        (1300, 1, [1400, 1600, 1500, 1200], 2.5, "mixed", 1480.0),
        (1300, 0, [1400, 1600, 1500, 1200], 2.5, "mixed", 1525.0),
        (2600, 3, [2700, 2700, 2700], 3, "mixed", 2700.0),
        (2500, 0, [1500], 1, "mixed", 1900.0),
        (1000, 0, [1500], 1, "mixed", 1900.0),
    ],
)
def test_specs_special_formula_vectors(r0, n_eff, opponents, score, history, result):
    assert round(uscf.special_rating(r0, n_eff, opponents, score, history), 3) == result


def test_specs_special_formula_flat_zero_set_depends_on_the_start():
    # zero set [1196.38, 1244.7]: closed-form start gives its upper end, the prior start its lower end
    args = (796.38, 6, [1644.7, 1954.9, 2563.9, 1857.1], 3)
    assert uscf.special_rating(*args) == pytest.approx(1244.7, abs=1e-6)
    prior_start = dataclasses.replace(uscf.PARAMS, special_start="prior")
    assert uscf.special_rating(*args, params=prior_start) == pytest.approx(1196.38, abs=1e-6)
    assert uscf.special_rating(2500, 0, [1500], 1, params=prior_start) == pytest.approx(2500)
    assert uscf.special_rating(1000, 0, [1500], 1, params=prior_start) == pytest.approx(1900)


def test_special_formula_result_is_a_root():
    r = uscf.special_rating(1430, 7, [1200, 1890, 1610, 1500, 1333], 3.5)
    f = 7 * uscf.provisional_expectancy(r, 1430) + sum(
        uscf.provisional_expectancy(r, o) for o in [1200, 1890, 1610, 1500, 1333]) - (3.5 + 3.5)
    assert abs(f) <= 1e-7


@pytest.mark.parametrize(
    "games, extra, history",
    [(0, None, "mixed"), (3, {"wins": 3, "draws": 0, "losses": 0}, "wins"),
     (4, {"wins": 0, "draws": 0, "losses": 4}, "losses"), (4, {"wins": 2, "draws": 0, "losses": 2}, "mixed"),
     (4, None, "mixed"), (30, {"wins": 30, "draws": 0, "losses": 0}, "wins")],
)
def test_history(games, extra, history):
    assert uscf.history_of(games, extra) == history


def test_which_formula():
    assert uscf.uses_special(0, "mixed") and uscf.uses_special(8, "mixed")
    assert not uscf.uses_special(9, "mixed")
    assert uscf.uses_special(40, "wins") and uscf.uses_special(40, "losses")
    # Glickman & Doan: 500-rated with 20 games has N' about 8 but is rated by the standard formula
    assert uscf.effective_games(500, 20) < 9 and not uscf.uses_special(20, "mixed")


# --- initial ratings and floors -------------------------------------------------------------------


@pytest.mark.parametrize("age, rating", [(0, 100), (1, 100), (2, 100), (3, 150), (10, 500), (15, 750),
                                         (26, 1300), (27, 1300), (60, 1300), (None, 1300)])
def test_initial_rating_by_age(age, rating):
    assert uscf.initial_rating(age) == rating


def test_age_from_birth_year_at_the_event():
    assert uscf.age_at(12, 1900, AT_2026) == 12
    assert uscf.age_at(None, 2014, AT_2026) == 12
    assert uscf.age_at(None, None, AT_2026) is None


def test_seed_personal_floor_124():
    assert uscf.personal_floor(3, 1, 10) == 124
    assert uscf.personal_floor(0, 0, 0) == 100
    assert uscf.personal_floor(20, 0, 0) == 150  # capped


@pytest.mark.parametrize("peak, floor", [(1941, 1700), (1399.9, None), (1400, 1200), (1588, 1300), (1653, 1400),
                                         (2299, 2000), (2300, 2100), (2650, 2100), (None, None)])
def test_seed_and_specs_earned_floor(peak, floor):
    assert uscf.earned_floor(peak) == floor


# --- unrated events -------------------------------------------------------------------------------


def test_unrated_reasons():
    games = [(1, "a", "b", "1-0")]
    assert uscf.rate_event(event(games, rated=False), {}).unrated_reason == "casual"
    assert uscf.rate_event(event(games, minutes=3, increment=1), {}).unrated_reason == "too_fast"
    assert uscf.rate_event(event([], minutes=90, increment=0), {}).unrated_reason == "no_games"
    assert uscf.rate_event(event(games), {}, closed={"b": AT_2026}).unrated_reason == "no_games"
    assert uscf.rate_event(event(games), {}).rated


def test_keys_and_players():
    e = event([(1, "a", "b", "1-0")], minutes=45, increment=5)
    assert uscf.players(e) == ["a", "b"]
    assert uscf.state_keys(e) == [k("a", "regular"), k("a", "quick"), k("b", "regular"), k("b", "quick"),
                                  k("a", "blitz"), k("b", "blitz")]  # the other type: a first rating starts from it
    assert uscf.state_keys(event([(1, "a", "b", "1-0")], minutes=3, increment=0)) == []


# --- whole events through rate_event --------------------------------------------------------------


SEED_IDS = ["o1400", "o1550", "o1600", "o1700"]


def seed_event(results, at=AT_2022):
    """The seed's player 'me' (1500, 40 games) against four established opponents who play only him."""
    games = [(i + 1, "me", o, r) for i, (o, r) in enumerate(zip(SEED_IDS, results, strict=True))]
    states = {k("me"): mixed(40, 1500.0, peak=1520.0, last_at=at - 86400)}
    for o, r in zip(SEED_IDS, SEED_OPPONENTS, strict=True):
        states[k(o)] = mixed(100, r, peak=r)
    return event(games, at=at), states


def test_seed_example_first_pass_and_second_pass():
    e, states = seed_event(["1-0", "0-1", "1/2-1/2", "1/2-1/2"])  # score 2
    plan = uscf.plan_category(e, "regular", states)["me"]
    assert round(plan.step4 - 1500, 1) == 12.9  # the calculator's (first-pass) number
    # Step 5: against each opponent's first-pass rating (each rated from his one game against 1500)
    firsts = {}
    for o, r, s in zip(SEED_IDS, SEED_OPPONENTS, [0, 1, 0.5, 0.5], strict=True):
        firsts[o] = uscf.standard_rating(r, uscf.effective_games(r, 100), [1500.0], s, 14, False).rating
        assert uscf.plan_category(e, "regular", states)[o].step4 == pytest.approx(firsts[o])
    second = uscf.standard_rating(1500, uscf.effective_games(1500, 40), [firsts[o] for o in SEED_IDS], 2, 14, True)
    assert plan.step5 == pytest.approx(second.rating)
    assert plan.final == plan.step5
    assert abs(plan.step5 - plan.step4) < 5  # "usually within a few points"


def test_seed_example_full_event_state():
    e, states = seed_event(["1-0", "1-0", "1-0", "1/2-1/2"])  # 3.5 / 4 with bonus
    out = uscf.rate_event(e, states)
    assert out.rated
    assert [c.key for c in out.changes] == [k("me")] + [k(o) for o in SEED_IDS]
    me = out.changes[0]
    plan = uscf.plan_category(e, "regular", states)["me"]
    assert plan.step4 > 1500 + 60  # bonus included in the first pass
    assert me.after.rating == plan.final
    assert me.before == states[k("me")]
    assert me.after.games == 44
    assert me.after.extra == {"wins": 23, "draws": 1, "losses": 20, "events3": 1}
    assert me.after.rd is None and me.after.volatility is None
    assert me.after.peak == max(1520.0, me.after.rating)
    assert me.after.last_at == AT_2022 and me.after.version == 4
    assert me.provisional is False
    # personal floor capped at 150 (20 wins); the new peak (about 1600) earns 1400
    assert 1590 < me.after.peak < 1700
    assert me.floor == 1400.0


def test_unrated_players_enter_the_first_pass_with_their_step3_estimate():
    # 'new' (adult, unrated) beats two established players; 'x' and 'y' also play each other
    games = [(1, "new", "x", "1-0"), (2, "new", "y", "1/2-1/2"), (3, "x", "y", "0-1")]
    states = {k("x"): mixed(60, 1600.0, peak=1650.0), k("y"): mixed(30, 1450.0, peak=1500.0)}
    e = event(games)
    plans = uscf.plan_category(e, "regular", states)
    step3 = max(100, uscf.special_rating(1300, 1, [1600, 1450], 1.5))
    assert plans["new"].step3 == pytest.approx(step3)
    assert plans["x"].step3 is None
    # x's first pass uses 'new' at his step-3 estimate, y at 1450
    x4 = uscf.standard_rating(1600, uscf.effective_games(1600, 60), [step3, 1450], 0, 10, False).rating
    assert plans["x"].step4 == pytest.approx(x4)
    # 'new' is rated by the special formula with N' = 0 from 1300, against the pre-event ratings ...
    new4 = uscf.special_rating(1300, 0, [1600, 1450], 1.5)
    assert plans["new"].step4 == pytest.approx(new4)
    # ... and then against the opponents' first-pass ratings
    new5 = uscf.special_rating(1300, 0, [plans["x"].step4, plans["y"].step4], 1.5)
    assert plans["new"].step5 == pytest.approx(new5)
    out = {c.key.player_id: c for c in uscf.rate_event(e, states).changes}
    assert out["new"].before.rating == 1300 and out["new"].before.games == 0
    assert out["new"].after.games == 2 and out["new"].provisional
    assert out["new"].after.extra == {"wins": 1, "draws": 1, "losses": 0, "events3": 0}
    assert out["new"].after.peak is None
    assert out["new"].after.version == 1


def test_a_junior_starts_from_50_times_age():
    games = [(1, "kid", "x", "0-1")]
    e = event(games, players={"kid": EventPlayer("kid", birth_year=2016)})  # 10 in 2026
    plans = uscf.plan_category(e, "regular", {k("x"): mixed(60, 1000.0)})
    assert plans["kid"].before.rating == 500


def test_earned_floor_holds_a_collapsing_established_player():
    # peak 1941 -> floor 1700; a 1720 player losing three games to much weaker players stops at 1700
    games = [(1, "p", "a", "0-1"), (2, "p", "b", "0-1"), (3, "p", "c", "0-1")]
    states = {k("p"): mixed(80, 1720.0, peak=1941.0)}
    for o in "abc":
        states[k(o)] = mixed(50, 1200.0)
    out = {c.key.player_id: c for c in uscf.rate_event(event(games), states).changes}
    plan = uscf.plan_category(event(games), "regular", states)["p"]
    assert plan.step5 < 1700
    assert out["p"].after.rating == 1700.0
    assert out["p"].floor == 1700.0
    assert out["p"].after.peak == 1941.0


def test_personal_floor_and_absolute_floor():
    # 3 wins, 1 draw, 10 events of 3+ games: floor 124 (seed); a 130 who loses a lot ends at 124
    games = [(1, "p", "a", "0-1"), (2, "p", "b", "0-1"), (3, "p", "c", "0-1")]
    states = {k("p"): mixed(30, 130.0, wins=3, draws=1, events3=10)}
    for o in "abc":
        states[k(o)] = mixed(50, 130.0)
    plan = uscf.plan_category(event(games), "regular", states)["p"]
    assert plan.step4 == plan.step5 == 100.0  # steps 4 and 5 are raised to 100 only
    assert plan.floor == 124.0
    out = {c.key.player_id: c for c in uscf.rate_event(event(games), states).changes}
    assert out["p"].after.rating == 124.0
    assert out["p"].after.extra["events3"] == 11  # the event itself counts only for the next floor
    assert out["p"].floor == 125.0
    # and nobody ever goes below 100
    assert all(c.after.rating >= 100 for c in out.values())


def test_floor_uses_the_counters_before_the_event():
    games = [(1, "p", "a", "1-0"), (2, "p", "b", "0-1"), (3, "p", "c", "0-1")]
    states = {k("p"): mixed(30, 101.0, wins=0, draws=0, events3=0)}
    for o in "abc":
        states[k(o)] = mixed(50, 900.0)
    out = {c.key.player_id: c for c in uscf.rate_event(event(games), states).changes}
    plan = uscf.plan_category(event(games), "regular", states)["p"]
    assert plan.floor == 100.0
    assert out["p"].after.rating == max(100.0, plan.step5)
    assert out["p"].floor == 105.0  # after: 1 win, 1 event


def test_peak_is_set_once_established():
    games = [(1, "p", "a", "1-0"), (2, "p", "b", "1-0")]
    states = {k("p"): mixed(24, 1400.0), k("a"): mixed(50, 1400.0), k("b"): mixed(50, 1400.0)}
    out = {c.key.player_id: c for c in uscf.rate_event(event(games), states).changes}
    assert out["p"].after.games == 26 and not out["p"].provisional
    assert out["p"].after.peak == out["p"].after.rating
    states[k("p")] = mixed(23, 1400.0)
    out = {c.key.player_id: c for c in uscf.rate_event(event(games), states).changes}
    assert out["p"].after.games == 25 and out["p"].provisional and out["p"].after.peak is None


def test_dual_rated_event_rates_both_and_reduces_regular_k_above_2200():
    games = [(1, "gm", "a", "1-0"), (2, "gm", "b", "1-0"), (3, "gm", "c", "1-0"), (4, "gm", "d", "0-1")]
    states = {}
    for cat in ("regular", "quick"):
        states[k("gm", cat)] = mixed(200, 2300.0, peak=2350.0)
        for o, r in zip("abcd", [2200, 2350, 2400, 2250], strict=True):
            states[k(o, cat)] = mixed(200, float(r))
    e = event(games, minutes=45, increment=5)
    out = uscf.rate_event(e, states)
    assert [c.key for c in out.changes if c.key.player_id == "gm"] == [k("gm", "regular"), k("gm", "quick")]
    reg = uscf.plan_category(e, "regular", states)["gm"]
    quick = uscf.plan_category(e, "quick", states)["gm"]
    n_eff = uscf.effective_games(2300, 200)
    assert reg.step4 == pytest.approx(
        uscf.standard_rating(2300, n_eff, [2200, 2350, 2400, 2250], 3, 10, True, dual_regular=True).rating)
    assert quick.step4 == pytest.approx(2316.09, abs=0.01)  # the dual-rated example: normal K
    assert reg.step4 == pytest.approx(2312.07, abs=0.01)  # dual-rated Regular K


def test_a_closed_player_is_left_out():
    games = [(1, "a", "b", "1-0"), (2, "a", "cheat", "0-1"), (3, "b", "cheat", "0-1")]
    states = {k(p): mixed(50, 1500.0) for p in ("a", "b", "cheat")}
    out = uscf.rate_event(event(games), states, closed={"cheat": AT_2026 - 10})
    assert [c.key.player_id for c in out.changes] == ["a", "b"]
    a = out.changes[0]
    assert a.after.games == 51 and a.after.extra["wins"] == 26
    without = uscf.rate_event(event(games[:1]), states)
    assert repr(out) == repr(without)


def test_last_at_only_moves_forward_and_blitz_event():
    games = [(1, "a", "b", "1/2-1/2")]
    later = AT_2026 + 5000
    states = {k("a", "blitz"): mixed(50, 1500.0, last_at=later), k("b", "blitz"): mixed(50, 1500.0, last_at=1.0)}
    out = {c.key.player_id: c for c in uscf.rate_event(event(games, minutes=5, increment=0), states).changes}
    assert out["a"].key.category == "blitz"
    assert out["a"].after.last_at == later and out["b"].after.last_at == AT_2026
    assert out["a"].after.rating == pytest.approx(1500.0)  # a flat change still emits a RatingChange
    assert out["a"].after.games == 51


def test_bonus_multiplier_follows_the_event_date():
    e22, states = seed_event(["1-0", "1-0", "1-0", "1-0"], at=AT_2022)
    e24, _ = seed_event(["1-0", "1-0", "1-0", "1-0"], at=AT_2024)
    me22 = uscf.plan_category(e22, "regular", states)["me"]
    me24 = uscf.plan_category(e24, "regular", states)["me"]
    assert round(me22.step4 - 1500, 1) == 153.3
    assert round(me24.step4 - 1500, 1) == 157.3


def test_player_order_does_not_matter():
    games = [(1, "a", "b", "1-0"), (1, "c", "d", "1/2-1/2"), (2, "a", "c", "0-1"), (2, "b", "d", "1-0")]
    states = {k("a"): mixed(50, 1700.0), k("c"): mixed(5, 1200.0)}
    e1 = event(games)
    e2 = dataclasses.replace(e1, players=tuple(reversed(e1.players)), games=tuple(reversed(e1.games)))
    assert repr(uscf.rate_event(e1, states)) == repr(uscf.rate_event(e2, states))


# --- issue 20, item 9: a first rating in one type starts from the player's other ratings ----------------


def test_first_rating_in_one_type_starts_from_the_other_us_chess_ratings():
    """docs/rules.md#us-chess (US Chess initializes from other ratings; the published system's section 2 is not
    citable here): Quick from Regular, else Blitz; from Regular on min(N, 10) games, counted in N."""
    reg = mixed(40, 1850.0)
    start = uscf.start_from_other("p", "quick", {k("p"): reg})
    assert (start.rating, start.games, start.version) == (1850.0, 10, 0)
    few = uscf.start_from_other("p", "quick", {k("p"): mixed(6, 1700.0)})
    assert few.games == 6
    # from Blitz (no Regular): on 0 games; Blitz from Quick before Regular; Regular from Quick before Blitz
    blitz = mixed(30, 1600.0)
    assert uscf.start_from_other("p", "quick", {k("p", "blitz"): blitz}).games == 0
    both = {k("p", "quick"): mixed(30, 1500.0), k("p"): reg, k("p", "blitz"): blitz}
    assert uscf.start_from_other("p", "blitz", both).rating == 1500.0
    assert uscf.start_from_other("p", "regular", both).rating == 1500.0
    assert uscf.start_from_other("p", "regular", {}) is None


def test_a_regular_player_s_first_quick_event_starts_from_his_regular_rating():
    """A Quick event (G/15): p (Regular 1850, 40 games) is rated from 1850 on 10 games, not from 1300."""
    states = {k("p"): mixed(40, 1850.0), k("o", "quick"): mixed(40, 1800.0)}
    out = uscf.rate_event(event([(1, "p", "o", "1/2-1/2")], minutes=15, increment=0), states)
    p = next(c for c in out.changes if c.key == k("p", "quick"))
    assert p.before.rating == 1850.0 and p.before.games == 10 and p.after.games == 11
    assert 1800.0 < p.after.rating < 1850.0  # a draw against a lower-rated player, from 1850
    assert p.after.extra["started_from"] == "regular"


def test_dual_event_quick_side_starts_from_regular_as_it_was_before_the_event():
    """docs/rules.md#us-chess: the types as they were before the event: in a dual-rated event (G/45) the new Quick rating
    starts from the Regular rating the player had before it, not from the one the same event changed."""
    states = {k("p"): mixed(40, 1850.0), k("o"): mixed(40, 1850.0), k("o", "quick"): mixed(40, 1850.0)}
    out = uscf.rate_event(event([(1, "p", "o", "1-0")], minutes=45, increment=0), states)
    by_key = {c.key: c for c in out.changes}
    assert by_key[k("p", "quick")].before.rating == 1850.0
    assert by_key[k("p")].after.rating > 1850.0  # the Regular side moved; the Quick side started before it
