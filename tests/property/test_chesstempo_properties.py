"""Properties of the Chess Tempo rating over random attempts and states (hypothesis)."""

from __future__ import annotations

import copy
import math

from hypothesis import given
from hypothesis import strategies as st

from worker.ratings import chesstempo
from worker.ratings.inputs import PuzzleAttempted
from worker.ratings.state import RatingState

DAY = 86400.0
AT = 1796040000.0
ratings = st.floats(0, 3500)
rds = st.floats(50, 350)
times = st.floats(0, 600)
modes = st.sampled_from(["standard", "blitz"])
thresholds = st.none() | ratings


def solve_extra(ts):
    extra = None
    for t in ts:
        extra = chesstempo.with_solve(extra, t)
    return extra


@st.composite
def rated_states(draw, mode, extra=False):
    ex = solve_extra(draw(st.lists(times, max_size=12))) if extra else None
    last_at = draw(st.none() | st.floats(AT - 2000 * DAY, AT + DAY))
    games = draw(st.integers(0, 5000))
    return RatingState(draw(ratings), draw(rds), None, games, None, last_at, games, ex)


@st.composite
def cases(draw, mode=None, correct=None):
    mode = draw(modes) if mode is None else mode
    correct = draw(st.booleans()) if correct is None else correct
    a = PuzzleAttempted("chesstempo", "anna", "p-1", correct, AT, mode=mode, seconds=draw(times),
                        seconds_after_first_move=draw(times))
    states = {}
    user, problem, seen = chesstempo.state_keys(a)
    if draw(st.booleans()):
        states[user] = draw(rated_states(mode))
    if draw(st.booleans()):
        states[problem] = draw(rated_states(mode, extra=mode == "blitz"))
    if draw(st.booleans()):
        n = draw(st.integers(1, 30))
        states[seen] = RatingState(0.0, games=n, last_at=draw(st.floats(AT - 1000 * DAY, AT + DAY)), version=n)
    return a, states, draw(thresholds)


@given(cases())
def test_numbers_are_finite_and_rds_within_50_and_350(case):
    a, states, threshold = case
    out = chesstempo.rate_attempt(a, states, threshold=threshold)
    user, problem, seen = out.changes
    for c in (user, problem):
        assert math.isfinite(c.after.rating)
        assert 50.0 <= c.after.rd <= 350.0
    assert chesstempo.is_published(user.key) and not chesstempo.is_published(problem.key)
    assert seen.after.games == seen.before.games + 1
    if problem.after.extra is not None:
        n, mean, sd = chesstempo.solve_stats(problem.after.extra)
        assert math.isfinite(mean) and math.isfinite(sd) and sd >= 0.0


@given(cases())
def test_scores_stay_in_range(case):
    a, states, _ = case
    problem = states.get(chesstempo.state_keys(a)[1], chesstempo.start_state())
    s = chesstempo.user_score(a, problem)
    assert 0.0 <= s <= 1.25
    assert 0.0 <= chesstempo.problem_score(s) <= 1.0
    if not a.correct:
        assert s == 0.0


@given(cases(mode="standard", correct=True))
def test_a_correct_standard_answer_never_lowers_the_rating(case):
    a, states, threshold = case
    user, problem, _ = chesstempo.rate_attempt(a, states, threshold=threshold).changes
    assert user.after.rating >= user.before.rating
    assert problem.after.rating <= problem.before.rating


@given(cases(correct=True))
def test_a_correct_answer_never_scores_below_a_wrong_one(case):
    """In blitz a slow correct answer can lose points (seed 002), but never more than a wrong answer."""
    a, states, threshold = case
    right = chesstempo.rate_attempt(a, states, threshold=threshold).changes
    wrong_attempt = PuzzleAttempted(a.system, a.player_id, a.puzzle_id, False, a.attempted_at, a.mode, a.seconds,
                                    a.seconds_after_first_move)
    wrong = chesstempo.rate_attempt(wrong_attempt, states, threshold=threshold).changes
    assert right[0].after.rating >= wrong[0].after.rating
    assert right[1].after.rating <= wrong[1].after.rating  # and the problem gains most from a miss


@given(cases(correct=True))
def test_a_correct_answer_scoring_at_least_1_never_lowers_the_rating(case):
    a, states, threshold = case
    problem = states.get(chesstempo.state_keys(a)[1], chesstempo.start_state())
    user = chesstempo.rate_attempt(a, states, threshold=threshold).changes[0]
    if chesstempo.user_score(a, problem) >= 1.0:
        assert user.after.rating >= user.before.rating


@given(cases())
def test_the_repeat_credit_only_ever_reduces_a_gain(case):
    a, states, threshold = case
    full = chesstempo.rate_attempt(a, states).changes
    reduced = chesstempo.rate_attempt(a, states, threshold=threshold).changes
    before = full[0].before.rating
    gain, kept = full[0].after.rating - before, reduced[0].after.rating - before
    assert (0.0 <= kept <= gain) if gain > 0 else kept == gain
    assert reduced[0].after.rd == full[0].after.rd
    assert reduced[1:] == full[1:]


@given(cases())
def test_deterministic_and_inputs_untouched(case):
    a, states, threshold = case
    kept = copy.deepcopy(states)
    first = chesstempo.rate_attempt(a, states, threshold=threshold)
    assert states == kept
    assert chesstempo.rate_attempt(a, kept, threshold=threshold) == first


@given(st.lists(st.tuples(st.sampled_from(["anna", "ben"]), st.sampled_from(["p-1", "p-2"]), modes, st.booleans(),
                          times, times, st.floats(-DAY, 30 * DAY)), max_size=25))
def test_a_sequence_keeps_its_counts(script):
    states: dict = {}
    at = AT
    for pid, puzzle, mode, correct, seconds, after, step in script:
        at += step
        a = PuzzleAttempted("chesstempo", pid, puzzle, correct, at, mode=mode, seconds=seconds,
                            seconds_after_first_move=after)
        out = chesstempo.rate_attempt(a, states, threshold=1400.0)
        for c in out.changes:
            assert c.after.version == c.before.version + 1
            states[c.key] = c.after
    for pid in ("anna", "ben"):
        for mode in ("standard", "blitz"):
            mine = [s for s in script if s[0] == pid and s[2] == mode]
            key = chesstempo.user_key(pid, mode)
            assert states.get(key, chesstempo.start_state()).games == len(mine)
            for puzzle in ("p-1", "p-2"):
                seen = states.get(chesstempo.seen_key(pid, mode, puzzle), chesstempo.SEEN_START)
                assert seen.games == sum(1 for s in mine if s[1] == puzzle)
    for puzzle in ("p-1", "p-2"):
        solves = [s for s in script if s[1] == puzzle and s[2] == "blitz" and s[3]]
        problem = states.get(chesstempo.problem_key(puzzle, "blitz"), chesstempo.start_state())
        assert chesstempo.solve_stats(problem.extra)[0] == len(solves)
