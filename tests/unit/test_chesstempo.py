"""Chess Tempo problem ratings: seed 002's examples, Glickman's "The Glicko system" and the decisions of docs/rules.md#chess-tempo."""

from __future__ import annotations

import copy
import math
import statistics

import pytest

from worker.ratings import chesstempo, glicko1
from worker.ratings.chesstempo import ChessTempoParams
from worker.ratings.inputs import PuzzleAttempted
from worker.ratings.state import RatingState, StateKey

AT = 1796040000.0  # 2026-11-30T12:00:00Z
DAY = 86400.0


def attempt(correct=True, mode="standard", seconds=None, after=0.0, pid="anna", puzzle="p-1", at=AT,
            system="chesstempo"):
    if mode == "blitz" and seconds is None:
        seconds = 10.0
    return PuzzleAttempted(system, pid, puzzle, correct, at, mode=mode, seconds=seconds,
                           seconds_after_first_move=after if seconds is not None else None)


def user_key(mode="standard", pid="anna"):
    return StateKey(pid, "chesstempo", mode)


def problem_key(mode="standard", puzzle="p-1"):
    return StateKey("problem:" + puzzle, "chesstempo-problem", mode)


def seen_key(mode="standard", pid="anna", puzzle="p-1"):
    return StateKey(pid, "chesstempo-seen", mode + "/" + puzzle)


def stats_of(times):
    extra = None
    for t in times:
        extra = chesstempo.with_solve(extra, t)
    return extra


def rate(a, states=None, **kw):
    out = chesstempo.rate_attempt(a, states or {}, **kw)
    assert out.rated
    return {c.key: c for c in out.changes}


def user_after(a, states=None, **kw):
    return chesstempo.rate_attempt(a, states or {}, **kw).changes[0].after


# --- keys and interface ---------------------------------------------------------------------------


def test_keys_players_and_what_is_published():
    for mode in ("standard", "blitz"):
        a = attempt(mode=mode)
        assert chesstempo.players(a) == ["anna"]
        assert chesstempo.state_keys(a) == [user_key(mode), problem_key(mode), seen_key(mode)]
        assert chesstempo.category(a) == mode
    assert chesstempo.is_published(user_key())
    assert not chesstempo.is_published(problem_key())
    assert not chesstempo.is_published(seen_key())


def test_changes_come_user_first_then_problem_then_repeat_record():
    out = chesstempo.rate_attempt(attempt(mode="blitz"), {})
    assert [c.key for c in out.changes] == [user_key("blitz"), problem_key("blitz"), seen_key("blitz")]
    assert [chesstempo.is_published(c.key) for c in out.changes] == [True, False, False]


def test_a_problem_id_equal_to_a_user_id_does_not_collide():
    keys = chesstempo.state_keys(attempt(pid="p-1", puzzle="p-1"))
    assert len(set(keys)) == 3
    assert keys[0] != keys[1] and keys[0].player_id != keys[1].player_id


def test_new_user_and_problem_start_at_1500_350():
    changes = rate(attempt())
    user, problem, seen = changes[user_key()], changes[problem_key()], changes[seen_key()]
    assert (user.before.rating, user.before.rd) == (1500.0, 350.0)
    assert (problem.before.rating, problem.before.rd) == (1500.0, 350.0)
    assert user.after.rating > 1500.0 > problem.after.rating
    # Equal 1500/350 on both sides: a zero-sum first attempt with equal RDs.
    assert user.after.rating - 1500.0 == pytest.approx(1500.0 - problem.after.rating)
    assert user.after.rd == problem.after.rd < 350.0
    assert user.after.volatility is None and user.after.peak is None and user.floor is None
    assert user.provisional is True
    assert (user.after.games, user.after.version, user.after.last_at) == (1, 1, AT)
    assert (problem.after.games, problem.after.version) == (1, 1)
    assert (seen.after.games, seen.after.version, seen.after.last_at) == (1, 1, AT)
    assert seen.provisional is False


def test_standard_and_blitz_are_separate_ratings():
    states = {user_key("standard"): RatingState(1900.0, 60.0, games=50, last_at=AT, version=50)}
    changes = rate(attempt(mode="blitz"), states)
    assert changes[user_key("blitz")].before.rating == 1500.0


def test_closed_account_is_unrated_and_changes_nothing():
    out = chesstempo.rate_attempt(attempt(), {}, closed={"anna": AT - 10})
    assert not out.rated
    assert out.unrated_reason == "closed_account" and out.changes == ()


def test_other_system_and_bad_mode_rejected():
    with pytest.raises(ValueError):
        chesstempo.rate_attempt(attempt(system="chesskite"), {})
    with pytest.raises(ValueError):
        chesstempo.rate_attempt(attempt(mode=None), {})
    with pytest.raises(ValueError):
        chesstempo.state_keys(attempt(mode="rapid"))


def test_blitz_without_times_rejected():
    a = PuzzleAttempted("chesstempo", "anna", "p-1", True, AT, mode="blitz")
    with pytest.raises(ValueError):
        chesstempo.rate_attempt(a, {})


def test_last_played_time_only_moves_forward():
    states = {
        user_key(): RatingState(1600.0, 80.0, games=5, last_at=AT, version=5),
        seen_key(): RatingState(0.0, games=1, last_at=AT, version=1),
    }
    changes = rate(attempt(at=AT - 3 * DAY), states)
    assert changes[user_key()].after.last_at == AT
    assert changes[seen_key()].after.last_at == AT
    # ... and a late message grows nobody's RD: same as an attempt at the stored time.
    assert changes[user_key()].after == rate(attempt(at=AT), states)[user_key()].after._replace(last_at=AT)


# --- Glicko-1 (Glickman, "The Glicko system") -----------------------------------------------------


def test_glickman_example():
    """A player at 1500/200 beats 1400/30 and loses to 1550/100 and 1700/300 (Glickman's example)."""
    assert [round(glicko1.g(rd), 4) for rd in (30, 100, 300)] == [0.9955, 0.9531, 0.7242]
    assert [round(glicko1.expected_score(1500, r, rd), 3) for r, rd in ((1400, 30), (1550, 100), (1700, 300))] == [
        0.639, 0.432, 0.303,
    ]
    games = [glicko1.Encounter(1400, 30, 1.0), glicko1.Encounter(1550, 100, 0.0), glicko1.Encounter(1700, 300, 0.0)]
    rating, rd = glicko1.rate(1500, 200, games)
    assert rating == pytest.approx(1464.11, abs=0.005)
    assert rd == pytest.approx(151.40, abs=0.005)
    assert round(rating) == 1464 and round(rd, 1) == 151.4


def test_glicko1_without_games_changes_nothing():
    assert glicko1.rate(1500, 200, []) == (1500, 200)


def test_rate_one_is_rate_with_one_encounter():
    assert glicko1.rate_one(1623.5, 87.0, 1490.0, 140.0, 0.25) == glicko1.rate(
        1623.5, 87.0, [glicko1.Encounter(1490.0, 140.0, 0.25)]
    )


# Seed 002's scores in Glicko-1, computed independently of this module: user 1500 / RD 100 against a
# problem at 1500 / RD 50.
VECTOR = [  # (s, user after, problem's score, problem after)
    (1.25, 1539.45, 0.0, 1493.27),
    (1.0, 1526.30, 0.0, 1493.27),
    (0.5, 1500.00, 0.5, 1500.00),
    (0.25, 1486.85, 0.75, 1503.37),
    (0.0, 1473.70, 1.0, 1506.73),
]


@pytest.mark.parametrize(("s", "user", "problem_s", "problem"), VECTOR)
def test_specs_vector_glicko1(s, user, problem_s, problem):
    rating, rd = glicko1.rate_one(1500, 100, 1500, 50, s)
    assert rating == pytest.approx(user, abs=0.005)
    assert rd == pytest.approx(96.19, abs=0.005)
    assert chesstempo.problem_score(s) == problem_s
    p_rating, p_rd = glicko1.rate_one(1500, 50, 1500, 100, problem_s)
    assert p_rating == pytest.approx(problem, abs=0.005)
    assert p_rd == pytest.approx(49.54, abs=0.005)  # below 50: Chess Tempo's minimum RD lifts it


def test_a_score_of_1_25_gains_one_and_a_half_times_a_win_at_equal_ratings():
    win = glicko1.rate_one(1500, 100, 1500, 50, 1.0)[0] - 1500
    bonus = glicko1.rate_one(1500, 100, 1500, 50, 1.25)[0] - 1500
    assert bonus == pytest.approx(1.5 * win)


# --- scores (seed 002) ----------------------------------------------------------------------------

TEN = stats_of([8.0, 12.0])  # two earlier correct solves: mean 10 s, population sd 2 s


def test_solve_statistics_are_mean_and_population_sd():
    times = [12.5, 7.0, 30.25, 9.5, 11.0, 8.75, 15.0]
    n, mean, sd = chesstempo.solve_stats(stats_of(times))
    assert n == 7
    assert mean == pytest.approx(statistics.fmean(times), rel=1e-12)
    assert sd == pytest.approx(statistics.pstdev(times), rel=1e-12)
    assert chesstempo.solve_stats(TEN) == (2, 10.0, 2.0)
    assert chesstempo.solve_stats(None) == (0, 0.0, 0.0)


def test_time_after_the_first_move_counts_twice():
    """Seed: "a solve time of 10 seconds where 5 of those seconds were on the moves after the first ... 15 seconds"."""
    assert chesstempo.effective_time(10.0, 5.0) == 15.0
    assert chesstempo.effective_time(10.0, 0.0) == 10.0


@pytest.mark.parametrize(
    ("t", "s"),
    [
        (20.0, 0.5),  # seed: "if you took 20 seconds, and the average was 10 seconds ... 0.5-0.5"
        (40.0, 0.25),  # seed: "if you take 40 seconds and the average was 10 seconds ... 0.25-0.75"
        (15.0, 10.0 / 15.0),
        (10.0, 1.0),  # t <= mean: a full point
        (9.0, 1.0),
        (8.0, 1.0),  # exactly mean - sd: not faster than it
        (7.99, 1.25),  # faster than one sd below the mean: the bonus
        (0.0, 1.25),
    ],
)
def test_blitz_score_against_the_average(t, s):
    assert chesstempo.blitz_score(t, TEN) == pytest.approx(s, abs=1e-12)


def test_blitz_uses_the_population_sd_not_the_sample_sd():
    # mean 10, population sd 2 (sample sd 2.83): 7.5 is more than one population sd below the mean.
    assert chesstempo.blitz_score(7.5, TEN) == 1.25


def test_blitz_with_fewer_than_two_earlier_solves_scores_1():
    assert chesstempo.blitz_score(1000.0, None) == 1.0
    assert chesstempo.blitz_score(1000.0, stats_of([5.0])) == 1.0
    assert chesstempo.blitz_score(1000.0, stats_of([5.0, 5.0])) == pytest.approx(0.005)


def test_seed_examples_through_the_rating():
    """10 s with 5 s after the first move counts as 15 s; 20 s and 40 s against 10 s give 0.5 and 0.25."""
    states = {
        user_key("blitz"): RatingState(1500.0, 100.0, games=30, last_at=AT, version=30),
        problem_key("blitz"): RatingState(1500.0, 50.0, games=2, last_at=AT, version=2, extra=TEN),
    }
    solves = [  # (correct, seconds, after the first move), one per row of VECTOR
        (True, 5.0, 2.0),  # 7 s < 10 - 2: the bonus
        (True, 9.0, 0.0),  # under the average: 1
        (True, 20.0, 0.0),  # 0.5
        (True, 40.0, 0.0),  # 0.25
        (False, 3.0, 0.0),  # wrong, however fast: 0
    ]
    for (correct, seconds, after), (s, user, _, problem) in zip(solves, VECTOR, strict=True):
        a = attempt(correct, mode="blitz", seconds=seconds, after=after)
        assert chesstempo.user_score(a, states[problem_key("blitz")]) == s
        changes = rate(a, states)
        assert changes[user_key("blitz")].after.rating == pytest.approx(user, abs=0.005)
        assert changes[user_key("blitz")].after.rd == pytest.approx(96.19, abs=0.005)
        assert changes[problem_key("blitz")].after.rating == pytest.approx(problem, abs=0.005)
        assert changes[problem_key("blitz")].after.rd == 50.0  # 49.54 lifted to the minimum
    slow = attempt(mode="blitz", seconds=10.0, after=5.0)
    assert chesstempo.user_score(slow, states[problem_key("blitz")]) == pytest.approx(10.0 / 15.0)


def test_the_problem_score_has_a_floor_at_0():
    assert chesstempo.problem_score(1.25) == 0.0
    assert chesstempo.problem_score(1.0) == 0.0
    assert chesstempo.problem_score(0.25) == 0.75
    assert chesstempo.problem_score(0.0) == 1.0
    states = {
        user_key("blitz"): RatingState(1500.0, 100.0, last_at=AT, version=1),
        problem_key("blitz"): RatingState(1500.0, 80.0, games=2, version=2, extra=TEN),
    }
    bonus = rate(attempt(mode="blitz", seconds=5.0), states)
    full = rate(attempt(mode="blitz", seconds=9.0), states)
    assert bonus[user_key("blitz")].after.rating > full[user_key("blitz")].after.rating
    assert bonus[problem_key("blitz")].after.rating == full[problem_key("blitz")].after.rating < 1500.0


def test_standard_ignores_time_and_wrong_scores_0():
    slow = attempt(mode="standard", seconds=1000.0, after=500.0)
    assert chesstempo.user_score(slow, RatingState(1500.0, 50.0, extra=TEN)) == 1.0
    assert chesstempo.user_score(attempt(correct=False), RatingState(1500.0, 50.0)) == 0.0
    assert chesstempo.user_score(attempt(correct=False, mode="blitz", seconds=1.0), RatingState(1500.0, 50.0, extra=TEN)) == 0.0


def test_the_attempts_time_joins_the_statistics_after_scoring_if_correct():
    one = stats_of([10.0])
    states = {problem_key("blitz"): RatingState(1500.0, 100.0, games=1, version=1, extra=one)}
    # One earlier solve: a very slow solve still scores 1 (its own time is not yet in the statistics).
    a = attempt(mode="blitz", seconds=90.0, after=10.0)
    assert chesstempo.user_score(a, states[problem_key("blitz")]) == 1.0
    after = rate(a, states)[problem_key("blitz")].after
    assert chesstempo.solve_stats(after.extra) == (2, 55.0, 45.0)  # 10 s and 100 s
    # A wrong answer adds nothing; nor does a standard solve.
    wrong = rate(attempt(correct=False, mode="blitz", seconds=3.0), states)[problem_key("blitz")].after
    assert wrong.extra == one
    standard = rate(attempt(mode="standard", seconds=3.0))[problem_key("standard")].after
    assert standard.extra is None


def test_extra_dicts_are_never_mutated():
    extra = stats_of([8.0, 12.0])
    kept = copy.deepcopy(extra)
    states = {problem_key("blitz"): RatingState(1500.0, 100.0, games=2, version=2, extra=extra)}
    after = rate(attempt(mode="blitz", seconds=11.0), states)[problem_key("blitz")].after
    assert extra == kept
    assert after.extra is not extra and after.extra["solves"] == 3
    assert chesstempo.with_solve(extra, 1.0) is not extra and extra == kept


# --- repeats (seed 002 "Duplicate Problem Rating Adjustment"; docs/rules.md#chess-tempo) ----------------------------


@pytest.mark.parametrize(
    ("repeats", "credit"),
    [(0, 1.0), (1, 0.70), (2, 0.55), (3, 0.45), (4, 0.35), (5, 0.25), (6, 0.15), (7, 0.15), (20, 0.15)],
)
def test_repeat_credit_table(repeats, credit):
    assert chesstempo.repeat_credit(repeats, 0.0) == credit
    assert chesstempo.repeat_credit(repeats, 182.99) == credit


@pytest.mark.parametrize(
    ("repeats", "days", "credit"),
    [
        (6, 183.0, 0.45),  # "not seen for at least 6 months receive a minimum of 45%"
        (4, 200.0, 0.45),
        (3, 183.0, 0.45),
        (2, 183.0, 0.55),  # a minimum, not a replacement
        (1, 183.0, 0.70),
        (6, 364.99, 0.45),
        (6, 365.0, 0.75),  # "not seen for a year are given 75% of full credit"
        (1, 365.0, 0.75),
        (30, 3000.0, 0.75),
        (0, 400.0, 1.0),
    ],
)
def test_repeat_credit_decay_minimums(repeats, days, credit):
    assert chesstempo.repeat_credit(repeats, days) == credit


TOP = RatingState(2400.0, 60.0, games=900, last_at=AT, version=900)
THRESHOLD = 2300.0


def repeat_states(repeats, last_seen_days=1.0, user=TOP, mode="standard"):
    states = {
        user_key(mode): user,
        problem_key(mode): RatingState(2000.0, 80.0, games=40, last_at=AT, version=40),
    }
    if repeats:
        states[seen_key(mode)] = RatingState(0.0, games=repeats, last_at=AT - last_seen_days * DAY, version=repeats)
    return states


@pytest.mark.parametrize(
    ("repeats", "days", "credit"),
    [(0, 1.0, 1.0), (1, 1.0, 0.70), (2, 1.0, 0.55), (3, 1.0, 0.45), (4, 1.0, 0.35), (5, 1.0, 0.25),
     (6, 1.0, 0.15), (9, 1.0, 0.15), (6, 183.0, 0.45), (6, 365.0, 0.75)],
)
def test_a_top_users_gain_on_a_repeat_is_multiplied_by_the_credit(repeats, days, credit):
    states = repeat_states(repeats, days)
    full = rate(attempt(), states)  # no threshold: nobody is in the top group
    reduced = rate(attempt(), states, threshold=THRESHOLD)
    full_gain = full[user_key()].after.rating - TOP.rating
    assert full_gain > 0
    assert reduced[user_key()].after.rating - TOP.rating == pytest.approx(credit * full_gain, rel=1e-12)
    # RD and the problem's update are never reduced.
    assert reduced[user_key()].after.rd == full[user_key()].after.rd
    assert reduced[problem_key()].after == full[problem_key()].after
    assert reduced[seen_key()].after.games == repeats + 1


def test_repeat_credit_in_blitz_too():
    states = repeat_states(2, mode="blitz")
    full = user_after(attempt(mode="blitz", seconds=5.0), states).rating - TOP.rating
    reduced = user_after(attempt(mode="blitz", seconds=5.0), states, threshold=THRESHOLD).rating - TOP.rating
    assert reduced == pytest.approx(0.55 * full)


def test_repeats_count_per_user_mode_and_problem_right_or_wrong():
    states: dict = {user_key(): TOP}
    script = [(False, "p-1"), (True, "p-2"), (False, "p-1"), (True, "p-1")]
    for i, (correct, puzzle) in enumerate(script):
        for c in chesstempo.rate_attempt(attempt(correct, puzzle=puzzle, at=AT + i), states).changes:
            states[c.key] = c.after
    assert states[seen_key(puzzle="p-1")].games == 3
    assert states[seen_key(puzzle="p-2")].games == 1
    assert states[seen_key(puzzle="p-1")].last_at == AT + 3
    assert seen_key("blitz", puzzle="p-1") not in states
    # The next correct attempt at p-1 is its 3rd repeat: 45 %.
    full = user_after(attempt(puzzle="p-1", at=AT + 10), states).rating - states[user_key()].rating
    reduced = user_after(attempt(puzzle="p-1", at=AT + 10), states, threshold=THRESHOLD).rating
    assert reduced - states[user_key()].rating == pytest.approx(0.45 * full)


def test_last_seen_is_measured_from_the_latest_attempt():
    states = repeat_states(6, last_seen_days=400.0)
    a = attempt(at=AT)
    full = user_after(a, states).rating - TOP.rating
    assert user_after(a, states, threshold=THRESHOLD).rating - TOP.rating == pytest.approx(0.75 * full)
    # A late message (older than the last sighting) counts as 0 days unseen.
    states[seen_key()] = states[seen_key()]._replace(last_at=AT + DAY)
    assert user_after(a, states, threshold=THRESHOLD).rating - TOP.rating == pytest.approx(0.15 * full)


def test_losses_and_slow_blitz_solves_are_never_reduced():
    states = repeat_states(3)
    wrong = attempt(correct=False)
    assert user_after(wrong, states, threshold=THRESHOLD) == user_after(wrong, states)
    blitz = repeat_states(3, mode="blitz")
    blitz[problem_key("blitz")] = blitz[problem_key("blitz")]._replace(extra=TEN)
    slow = attempt(mode="blitz", seconds=40.0)  # s = 0.25 against an expected ~0.9: a loss of points
    after = user_after(slow, blitz, threshold=THRESHOLD)
    assert after.rating < TOP.rating
    assert after == user_after(slow, blitz)


@pytest.mark.parametrize(
    ("user", "threshold", "top"),
    [
        (TOP, None, False),  # nobody qualifies today
        (TOP, 2400.0, True),  # rating == threshold qualifies
        (TOP, 2400.01, False),
        (TOP._replace(rd=110.0), THRESHOLD, True),  # stored RD exactly 110
        (TOP._replace(rd=110.01), THRESHOLD, False),
        (TOP._replace(last_at=AT - 60 * DAY), THRESHOLD, True),  # stored RD 60; grown it would be ~98
        (TOP._replace(rd=100.0, last_at=AT - 60 * DAY), THRESHOLD, True),  # grown past 110: the stored RD decides
    ],
)
def test_who_is_in_the_top_group(user, threshold, top):
    assert chesstempo.in_top_group(user, threshold) is top
    states = repeat_states(1, user=user)
    full = user_after(attempt(), states).rating - user.rating
    got = user_after(attempt(), states, threshold=threshold).rating - user.rating
    assert got == pytest.approx(0.70 * full if top else full, rel=1e-12)


def test_a_new_user_is_never_in_the_top_group():
    assert not chesstempo.in_top_group(None, 0.0)
    assert not chesstempo.in_top_group(chesstempo.start_state(), 0.0)


# --- the top group's threshold (docs/rules.md#chess-tempo) ---------------------------------------------------------


def test_top_threshold_49_established_users_none():
    assert chesstempo.top_threshold([1500.0 + i for i in range(49)]) is None
    assert chesstempo.top_threshold([]) is None


def test_top_threshold_50_users_the_top_one():
    ratings = [1500.0 + 7 * i for i in range(50)]
    assert chesstempo.top_threshold(ratings) == max(ratings)


def test_top_threshold_100_users_the_second_highest():
    ratings = [1000.0 + ((37 * i) % 100) * 10 for i in range(100)]  # unsorted, all different
    assert chesstempo.top_threshold(ratings) == sorted(ratings)[-2]


@pytest.mark.parametrize(("n", "k"), [(149, 2), (150, 3), (199, 3), (200, 4), (350, 7), (1000, 20), (4999, 99)])
def test_top_threshold_k_is_floor_of_2_percent(n, k):
    ratings = [float(i) for i in range(n)]
    assert chesstempo.top_threshold(reversed(ratings)) == float(n - k)


def test_top_threshold_with_ties_and_settings():
    assert chesstempo.top_threshold([1800.0] * 3 + [1500.0] * 97) == 1800.0
    params = ChessTempoParams(top_percent=3.0, top_min_established=10)
    assert chesstempo.top_threshold([float(i) for i in range(9)], params) is None
    assert chesstempo.top_threshold([float(i) for i in range(100)], params) == 97.0


def test_is_established_and_utc_day():
    assert chesstempo.is_established(RatingState(1500.0, 110.0))
    assert not chesstempo.is_established(RatingState(1500.0, 110.5))
    assert not chesstempo.is_established(None)
    assert chesstempo.utc_day(AT) == chesstempo.utc_day(AT - 12 * 3600)  # 00:00:00Z, same day
    assert chesstempo.utc_day(AT - 12 * 3600 - 0.001) == chesstempo.utc_day(AT) - 1


# --- RD: growth with time, cap, minimum, stored values for the other side ---------------------------


@pytest.mark.parametrize(
    ("rd", "days", "grown"),
    [
        (50.0, 0.0, 50.0),
        (50.0, 1.0, math.sqrt(50**2 + 10**2)),  # c = 10 per sqrt(day)
        (50.0, 100.0, math.sqrt(50**2 + 100 * 10**2)),  # 111.80
        (50.0, 0.5, math.sqrt(50**2 + 0.5 * 10**2)),  # days are real numbers
        (300.0, 325.0, 350.0),  # sqrt(90000 + 32500) = 350.0 exactly
        (300.0, 10000.0, 350.0),  # capped
        (80.0, -5.0, 80.0),  # a late message: no growth
    ],
)
def test_users_rd_grows_with_time_up_to_350(rd, days, grown):
    user = RatingState(1500.0, rd, games=10, last_at=AT - days * DAY, version=10)
    assert chesstempo.own_rd(user, AT) == pytest.approx(grown, rel=1e-12)


def test_rd_growth_after_100_days_from_50_is_111_8():
    user = RatingState(1500.0, 50.0, last_at=AT - 100 * DAY, version=1)
    assert chesstempo.own_rd(user, AT) == pytest.approx(111.80, abs=0.005)


def test_the_user_is_rated_with_his_grown_rd():
    grown = math.sqrt(60.0**2 + 200 * 10.0**2)
    idle = {user_key(): RatingState(1500.0, 60.0, games=10, last_at=AT - 200 * DAY, version=10)}
    fresh = {user_key(): RatingState(1500.0, grown, games=10, last_at=AT, version=10)}
    a, b = user_after(attempt(), idle), user_after(attempt(), fresh)
    assert a.rating == pytest.approx(b.rating, rel=1e-12) and a.rd == pytest.approx(b.rd, rel=1e-12)
    assert a.rating - 1500.0 > user_after(attempt(), {user_key(): idle[user_key()]._replace(last_at=AT)}).rating - 1500.0


def test_the_problem_is_rated_against_the_users_stored_not_grown_rd():
    idle = {user_key(): RatingState(1600.0, 60.0, games=10, last_at=AT - 1000 * DAY, version=10)}
    fresh = {user_key(): RatingState(1600.0, 60.0, games=10, last_at=AT, version=10)}
    assert rate(attempt(), idle)[problem_key()].after == rate(attempt(), fresh)[problem_key()].after
    assert rate(attempt(), idle)[user_key()].after.rd > rate(attempt(), fresh)[user_key()].after.rd


def test_the_problems_rd_does_not_grow():
    old = {problem_key(): RatingState(1500.0, 200.0, games=3, last_at=AT - 1000 * DAY, version=3)}
    new = {problem_key(): RatingState(1500.0, 200.0, games=3, last_at=AT, version=3)}
    a = rate(attempt(), old)
    assert a[problem_key()].after.rating == rate(attempt(), new)[problem_key()].after.rating
    assert a[problem_key()].after.rd == rate(attempt(), new)[problem_key()].after.rd
    # ... and the user is rated against the problem's stored RD, 200.
    expected = glicko1.rate_one(1500.0, 350.0, 1500.0, 200.0, 1.0)
    assert a[user_key()].after.rating == pytest.approx(expected[0], rel=1e-12)


def test_minimum_rd_50_for_users_and_problems():
    states = {
        user_key(): RatingState(1500.0, 50.0, games=500, last_at=AT, version=500),
        problem_key(): RatingState(1500.0, 50.0, games=500, last_at=AT, version=500),
    }
    raw_user = glicko1.rate_one(1500.0, 50.0, 1500.0, 50.0, 1.0)[1]
    assert raw_user < 50.0
    changes = rate(attempt(), states)
    assert changes[user_key()].after.rd == 50.0
    assert changes[problem_key()].after.rd == 50.0
    assert changes[user_key()].after.rating > 1500.0 > changes[problem_key()].after.rating


def test_many_attempts_converge_to_the_minimum_rd_and_stay_there():
    states: dict = {}
    for i in range(400):
        a = attempt(correct=i % 2 == 0, puzzle=f"p-{i % 7}", at=AT + i * 60)
        for c in chesstempo.rate_attempt(a, states).changes:
            states[c.key] = c.after
    assert states[user_key()].rd == 50.0
    assert states[user_key()].games == 400 and states[user_key()].version == 400
    assert not chesstempo.rate_attempt(attempt(at=AT + 1e6), states).changes[0].provisional
