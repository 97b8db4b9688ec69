"""Every CSR number of seed 000 and Glickman's Glicko-2 example, rounded as the seed shows them."""

from __future__ import annotations

import pytest

from worker.ratings import csr, glicko2
from worker.ratings.inputs import GameFinished, TimeControl
from worker.ratings.state import RatingState, StateKey

DAY = 86400.0


BLITZ = TimeControl(300, 0)


def game(result="1-0", tc=BLITZ, at=0.0, white="w", black="b", **kw) -> GameFinished:
    return GameFinished("g1", kw.pop("rated", True), kw.pop("variant", "standard"), tc, white, black, result, at, **kw)


def established(rating, rd, last_at=0.0, games=50):
    return RatingState(rating, rd, 0.06, games, rating, last_at, games)


def test_glickman_glicko2_example():
    r = glicko2.rate(
        1500, 200, 0.06,
        [glicko2.Encounter(1400, 30, 1), glicko2.Encounter(1550, 100, 0), glicko2.Encounter(1700, 300, 0)],
        tau=0.5,
    )
    assert round(r.rating, 2) in (1464.05, 1464.06)  # the paper rounds its intermediates: 1464.06
    assert round(r.rd, 2) == 151.52
    assert round(r.volatility, 5) == 0.06  # 0.059996; the paper prints 0.05999
    assert 0.05999 <= r.volatility < 0.06


@pytest.mark.parametrize(
    "base,inc,days,expected",
    [
        (60, 0, None, "bullet"), (60, 1, None, "bullet"), (60, 2, None, "bullet"), (120, 1, None, "bullet"),
        (180, 0, None, "blitz"), (300, 0, None, "blitz"), (600, 0, None, "rapid"), (900, 0, None, "rapid"),
        (1500, 0, None, "rapid"), (1800, 0, None, "classical"), (1800, 20, None, "classical"),
        (None, None, 3, "correspondence"),
    ],
)
def test_category_table(base, inc, days, expected):
    assert csr.category(TimeControl(base, inc, days)) == expected


@pytest.mark.parametrize("base,inc,length", [(60, 0, 60), (60, 1, 100), (60, 2, 140), (120, 1, 160), (1800, 20, 2600)])
def test_estimated_length(base, inc, length):
    assert csr.estimated_length(TimeControl(base, inc)) == length


@pytest.mark.parametrize(
    "days,from60,from100", [(7, 66, 104), (30, 83, 115), (90, 116, 141), (180, 152, 172), (365, 208, 223), (730, 288, 299)]
)
def test_rd_growth_table(days, from60, from100):
    assert round(glicko2.rd_after_inactivity(60, 0.06, days, 350)) == from60
    assert round(glicko2.rd_after_inactivity(100, 0.06, days, 350)) == from100


def test_rd_growth_is_capped_and_never_lowers_an_rd_above_the_cap():
    assert glicko2.rd_after_inactivity(300, 0.06, 10_000, 350) == 350
    assert glicko2.rd_after_inactivity(360, 0.06, 10, 350) == 360


def games_to_leave_provisional(opponent_rd: float, white: bool) -> int:
    """Assumed sequence: a new player draws back to back (no days between games) against an opponent
    who stays at 1500 +-opponent_rd, always with the same colour; count games until RD <= 110."""
    states = {StateKey("o", "csr", "blitz"): RatingState(1500, opponent_rd, 0.06, 50, None, 0.0, 50)}
    n = 0
    while True:
        n += 1
        g = game("1/2-1/2", white="p" if white else "o", black="o" if white else "p")
        change = next(c for c in csr.rate_game(g, states).changes if c.key.player_id == "p")
        if not change.provisional:
            return n
        states[change.key] = change.after


@pytest.mark.parametrize("white", [True, False])
def test_provisional_after_about_10_or_14_games(white):
    assert games_to_leave_provisional(60, white) == 10
    assert games_to_leave_provisional(200, white) == 14


def test_start_from_other_ratings():
    states = {
        StateKey("p", "csr", "blitz"): established(1900, 60, games=40),
        StateKey("p", "csr", "rapid"): established(1800, 90, games=12),
        StateKey("p", "csr", "correspondence"): established(1600, 120, games=6),
    }
    bullet = csr.start_state("p", "bullet", states)
    classical = csr.start_state("p", "classical", states)
    assert (round(bullet.rating), bullet.rd) == (1868, 250)
    assert (round(classical.rating), classical.rd) == (1800, 250)


def test_start_needs_five_games_somewhere():
    states = {StateKey("p", "csr", "blitz"): established(1900, 60, games=4)}
    assert csr.start_state("p", "bullet", states) == RatingState(1500, 350, 0.06)


@pytest.mark.parametrize("peak,floor", [(1450, 1000), (1843, 1400), (2000, 1600), (2399, 1900), (2400, 2000)])
def test_floor_table(peak, floor):
    assert csr.floor_for_peak(peak) == floor


def test_worked_example_two_new_players():
    outcome = csr.rate_game(game("1-0"), {})
    white, black = outcome.changes
    assert round(glicko2.expected_score(1500, 1500, 350, 35), 3) == 0.534
    assert round(glicko2.expected_score(1500, 1500, 350, -35), 3) == 0.466
    assert (round(white.after.rating), round(white.after.rd)) == (1652, 291)
    assert (round(black.after.rating), round(black.after.rd)) == (1348, 291)
    assert (round(white.delta), round(black.delta)) == (152, -152)
    assert white.provisional and black.provisional and white.floor is None


def test_worked_example_established_draw_after_a_day():
    states = {StateKey("w", "csr", "blitz"): established(1843, 60), StateKey("b", "csr", "blitz"): established(1700, 80)}
    white, black = csr.rate_game(game("1/2-1/2", at=DAY), states).changes
    assert round(glicko2.expected_score(1843, 1700, 80, 35), 3) == 0.730
    assert round(glicko2.expected_score(1700, 1843, 60, -35), 3) == 0.268
    assert (round(white.after.rating), round(white.after.rd), round(white.delta)) == (1838, 61, -5)
    assert (round(black.after.rating), round(black.after.rd), round(black.delta)) == (1708, 80, 8)


@pytest.mark.parametrize("days", [0, 1])  # the FAQ gives no dates: the numbers hold either way
def test_faq_three_points_for_a_win(days):
    states = {StateKey("w", "csr", "blitz"): established(1843, 50), StateKey("b", "csr", "blitz"): established(1600, 60)}
    white = csr.rate_game(game("1-0", at=days * DAY), states).changes[0]
    assert round(glicko2.expected_score(1843, 1600, 60, 35), 3) == 0.828
    assert (round(white.delta), round(white.after.rating)) == (3, 1846)


def test_a_loss_stops_at_the_floor():
    states = {
        StateKey("w", "csr", "blitz"): RatingState(1402, 80, 0.06, 50, 1843, 0.0, 50),
        StateKey("b", "csr", "blitz"): established(1400, 80),
    }
    white = csr.rate_game(game("0-1"), states).changes[0]
    assert white.after.rating == 1400 and white.floor == 1400


def test_rating_below_its_floor_is_neither_lowered_nor_lifted():
    below = RatingState(1300, 80, 0.06, 50, 1843, 0.0, 50)  # e.g. after an import
    assert csr.apply_floor(1300, 1250, below.peak) == 1300
    assert csr.apply_floor(1300, 1350, below.peak) == 1350


def test_the_absolute_floor_is_100():
    assert csr.apply_floor(120, 80, None) == 100


@pytest.mark.parametrize(
    "kw,reason",
    [({"rated": False}, "casual"), ({"variant": "chess960"}, "variant"), ({"white_guest": True}, "guest")],
)
def test_unrated_games_change_nothing(kw, reason):
    outcome = csr.rate_game(game(**kw), {})
    assert outcome.changes == () and outcome.unrated_reason == reason


def test_a_fair_play_closed_account_makes_its_games_unrated():
    assert csr.rate_game(game(), {}, closed={"b": 0.0}).unrated_reason == "closed_account"


def test_peak_is_kept_only_once_established_and_after_the_floor():
    w, _ = csr.rate_game(game("1-0"), {}).changes
    assert w.after.peak is None  # still provisional
    states = {StateKey("w", "csr", "blitz"): established(1843, 50), StateKey("b", "csr", "blitz"): established(1600, 60)}
    w, _ = csr.rate_game(game("1-0"), states).changes
    assert w.after.peak == w.after.rating and w.floor == 1400


def test_last_played_only_moves_forward():
    states = {StateKey("w", "csr", "blitz"): established(1843, 60, last_at=10 * DAY)}
    w = csr.rate_game(game(at=5 * DAY), states).changes[0]
    assert w.after.last_at == 10 * DAY
    assert csr.own_rd(states[StateKey("w", "csr", "blitz")], 5 * DAY) == 60  # no growth for a late message


def test_change_ids_are_uuid5_of_the_cause_and_the_rating():
    import uuid

    from worker.contract.changed import NAMESPACE, change_id

    assert change_id("/s", "m1", "anna", "csr", "blitz", 3) == str(
        uuid.uuid5(NAMESPACE, "/s\x1fm1\x1fanna\x1fcsr\x1fblitz\x1f3"))
