"""Seed 001's Elo worked example and the ChessKite decisions of docs/rules.md#chesskite."""

from __future__ import annotations

import pytest

from worker.ratings import chesskite, elo
from worker.ratings.inputs import PuzzleAttempted
from worker.ratings.state import RatingState, StateKey

AT = 1796040000.0  # 2026-11-30T12:00:00Z


def attempt(correct=True, challenge=True, puzzle_rating=1000.0, pid="anna", at=AT, system="chesskite"):
    return PuzzleAttempted(system, pid, "p-1", correct, at, challenge=challenge, puzzle_rating=puzzle_rating)


KEY = StateKey("anna", "chesskite", "puzzle")


# --- the shared logistic Elo: the seed's worked example -----------------------------------------


def test_expected_score_is_logistic_on_400():
    assert elo.expected_score(1500, 1500) == 0.5
    assert elo.expected_score(1500, 1700) == pytest.approx(0.2403, abs=1e-4)  # "about 0.24"
    assert elo.expected_score(1700, 1500) + elo.expected_score(1500, 1700) == pytest.approx(1.0)
    assert elo.expected_score(1900, 1500) == pytest.approx(1 / 1.1, abs=1e-12)


@pytest.mark.parametrize(("score", "seed"), [(1.0, 15), (0.5, 5), (0.0, -5)])
def test_seed_worked_example_1500_vs_1700_k20(score, seed):
    change = elo.elo_change(1500, 1700, score, 20)
    assert round(change) == seed
    assert change == pytest.approx(20 * (score - 0.2403), abs=0.01)  # +15.19 / +5.19 / -4.81


def test_elo_is_zero_sum_for_equal_k():
    assert elo.elo_change(1500, 1700, 1.0, 20) + elo.elo_change(1700, 1500, 0.0, 20) == pytest.approx(0.0)


# --- ChessKite ------------------------------------------------------------------------------------


def test_keys_and_players():
    a = attempt()
    assert chesskite.players(a) == ["anna"]
    assert chesskite.state_keys(a) == [KEY]


def test_new_player_starts_at_1000_and_gains_half_k_against_an_equal_puzzle():
    out = chesskite.rate_attempt(attempt(puzzle_rating=1000.0), {})
    assert out.rated
    (ch,) = out.changes
    assert ch.key == KEY
    assert ch.before.rating == 1000.0
    assert ch.after.rating == 1016.0  # 32 x (1 - 0.5)
    assert ch.after.rd is None and ch.after.volatility is None
    assert ch.after.games == 1 and ch.after.version == 1 and ch.after.last_at == AT
    assert ch.provisional is False and ch.floor is None


def test_missed_challenge_loses():
    (ch,) = chesskite.rate_attempt(attempt(correct=False, puzzle_rating=1000.0), {}).changes
    assert ch.after.rating == 984.0


def test_non_challenge_attempt_is_unrated():
    out = chesskite.rate_attempt(attempt(challenge=False), {})
    assert not out.rated
    assert out.unrated_reason == "not_challenge"
    assert out.changes == ()


def test_closed_account_is_unrated():
    out = chesskite.rate_attempt(attempt(), {}, closed={"anna": AT - 10})
    assert out.unrated_reason == "closed_account" and out.changes == ()


def test_puzzle_rating_required_for_a_challenge():
    with pytest.raises(ValueError):
        chesskite.rate_attempt(attempt(puzzle_rating=None), {})


def test_other_system_rejected():
    with pytest.raises(ValueError):
        chesskite.rate_attempt(attempt(system="chesstempo"), {})


def test_sequence_of_attempts_uses_the_stored_state():
    states: dict = {}
    script = [  # (challenge, correct, puzzle rating)
        (True, True, 1200.0),
        (False, False, 800.0),  # served card: not rated, nothing changes
        (True, False, 900.0),
        (True, True, 1000.0),
    ]
    expected = 1000.0
    games = 0
    for i, (challenge, correct, pr) in enumerate(script):
        out = chesskite.rate_attempt(attempt(correct, challenge, pr, at=AT + i), states)
        if not challenge:
            assert out.unrated_reason == "not_challenge"
            continue
        (ch,) = out.changes
        assert ch.before.rating == pytest.approx(expected)
        expected += 32 * ((1.0 if correct else 0.0) - 1 / (1 + 10 ** ((pr - expected) / 400)))
        games += 1
        assert ch.after.rating == pytest.approx(expected, abs=1e-9)
        assert ch.after.games == games and ch.after.version == games
        states[ch.key] = ch.after
    # +24.31 (beat a 1200), -21.49 (missed a 900), +15.87 (beat a 1000): 1018.69
    assert states[KEY].rating == pytest.approx(1018.69, abs=0.01)
    assert states[KEY].last_at == AT + 3


def test_puzzle_rating_is_not_stored():
    states = {KEY: RatingState(1500.0, games=10, version=10)}
    out = chesskite.rate_attempt(attempt(puzzle_rating=1500.0), states)
    assert [c.key for c in out.changes] == [KEY]
    assert out.changes[0].after.rating == 1516.0


def test_last_played_time_only_moves_forward():
    states = {KEY: RatingState(1000.0, games=1, last_at=AT, version=1)}
    (ch,) = chesskite.rate_attempt(attempt(at=AT - 100), states).changes
    assert ch.after.last_at == AT
