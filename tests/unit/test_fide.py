"""FIDE (seed 001, FIDE Rating Regulations, docs/rules.md#fide): table 8.1.2, K, the cap, rounding, periods, first ratings."""

from __future__ import annotations

import calendar
import dataclasses
from fractions import Fraction

import pytest

from worker.ratings import fide
from worker.ratings.inputs import EventFinished, EventGame, EventPlayer
from worker.ratings.state import RatingState, StateKey


def at(y, m, d, h=12):
    return float(calendar.timegm((y, m, d, h, 0, 0)))


NOV = at(2026, 11, 15)
NOV_LATE = at(2026, 11, 28)  # the last day for the December list: it closes 3 days before (section 7.1.3)
DEC = at(2026, 12, 10)


def k(pid, cat="standard"):
    return StateKey(pid, "fide", cat)


def listed(rating, games=50, peak=None, birth_year=None, version=5):
    """A published list rating with no open period (as after an import or a close)."""
    extra = {
        "published": rating,
        "period": None,
        "k": None,
        "period_games": 0,
        "sum": 0.0,
        "pool": [],
        "birth_year": birth_year,
    }
    return RatingState(
        float(rating),
        games=games,
        peak=peak if peak is not None else float(rating),
        version=version,
        extra=extra,
    )


def event(games, when=NOV, players=None, rating_type="standard", rated=True, births=None):
    births = births or {}
    ids = players or sorted({p for g in games for p in g[:2]})
    return EventFinished(
        "ev",
        "fide",
        rated,
        when,
        tuple(EventPlayer(p, birth_year=births.get(p)) for p in ids),
        tuple(EventGame(i + 1, w, b, r) for i, (w, b, r) in enumerate(games)),
        rating_type=rating_type,
    )


def apply(outcome, states):
    for ch in outcome.changes:
        states[ch.key] = ch.after
    return states


def by_player(outcome):
    out = {}
    for ch in outcome.changes:
        out.setdefault(ch.key.player_id, []).append(ch)
    return out


# --- table 8.1.2 and the 400-point rule -------------------------------------------------------------


@pytest.mark.parametrize(
    ("d", "pd"),
    [
        (0, 50),
        (3, 50),
        (4, 51),
        (10, 51),
        (11, 52),
        (91, 62),
        (92, 63),
        (197, 75),
        (198, 76),
        (200, 76),
        (235, 79),
        (236, 80),
        (391, 91),
        (392, 92),
        (411, 92),
        (412, 93),
        (619, 98),
        (620, 99),
        (735, 99),
        (736, 100),
        (1000, 100),
    ],
)
def test_table_band_edges(d, pd):
    assert fide.pd_higher(d) == pd


def test_table_is_complete_and_monotonic():
    tops = [t for t, _ in fide.TABLE_8_1_2]
    pds = [p for _, p in fide.TABLE_8_1_2]
    assert pds == list(range(50, 100)) and tops == sorted(tops) and tops[-1] == 735
    assert len(fide.TABLE_8_1_1) == 51 and fide.dp_for(57) == 50 and fide.dp_for(43) == -50


@pytest.mark.parametrize(
    ("own", "opp", "pd"),
    [
        (1500, 1500, 0.50),
        (1700, 1500, 0.76),
        (1500, 1700, 0.24),
        (1900, 1500, 0.92),
        (2000, 1500, 0.92),
        (1500, 2000, 0.08),
        (2236, 2000, 0.80),
    ],
)
def test_spec_vectors(own, opp, pd):
    assert fide.expected_score(own, opp, "standard", NOV) == pd


def test_2650_exception_in_standard_from_october_2025():
    assert fide.expected_score(2700, 2200, "standard", at(2025, 10, 1, 0)) == 0.96
    assert fide.expected_score(2700, 2200, "standard", at(2025, 9, 30, 23)) == 0.92
    assert fide.expected_score(2700, 2200, "rapid", NOV) == 0.92
    assert fide.expected_score(2813, 2400, "standard", NOV) == 0.93  # F-P01: D = 413 for the 2813
    assert fide.expected_score(2400, 2813, "standard", NOV) == 0.08  # his opponent's D is capped
    assert fide.expected_score(2649, 2200, "standard", NOV) == 0.92


def test_rapid_blitz_600_gap_over_2600_unrated_from_december_2024():
    assert fide.game_unrated(2700, 2100, "rapid", at(2024, 12, 1, 0))
    assert fide.game_unrated(2700, 2100, "blitz", NOV)
    assert not fide.game_unrated(2700, 2100, "rapid", at(2024, 11, 30))
    assert not fide.game_unrated(2700, 2101, "rapid", NOV)  # 599 apart
    assert not fide.game_unrated(2600, 2000, "rapid", NOV)  # nobody above 2600
    assert not fide.game_unrated(2700, 2100, "standard", NOV)
    states = {k("a", "rapid"): listed(2700), k("b", "rapid"): listed(2100)}
    out = fide.rate_event(event([("a", "b", "1-0")], rating_type="rapid"), states)
    assert out.unrated_reason == "no_rated_games"


# --- K, the cap, rounding ---------------------------------------------------------------------------


def test_k_precedence():
    assert fide.k_factor(2350, 2410, 100, 2010, 2026) == 10  # reached 2400 once: 10 for good
    assert fide.k_factor(2250, 2250, 100, 2010, 2026) == 40  # junior under 2300
    assert fide.k_factor(2310, 2310, 100, 2010, 2026) == 20  # junior, but 2300+
    assert fide.k_factor(2100, 2100, 100, 2008, 2026) == 40  # the year of the 18th birthday
    assert fide.k_factor(2100, 2100, 100, 2008, 2027) == 20  # after it
    assert fide.k_factor(2100, 2100, 29, None, 2026) == 40  # under 30 games
    assert fide.k_factor(2100, 2100, 30, None, 2026) == 20


@pytest.mark.parametrize(
    ("k0", "n", "eff"),
    [(20, 35, 20), (20, 36, 19), (20, 39, 17), (40, 17, 40), (40, 18, 38), (10, 70, 10), (10, 71, 9)],
)
def test_k_cap_per_period(k0, n, eff):
    assert fide.capped_k(k0, n) == eff


@pytest.mark.parametrize(
    ("x", "r"),
    [(2.5, 3), (-2.5, -3), (1.5, 2), (-1.5, -2), (2.49, 2), (-2.49, -2), (0.5, 1), (-0.5, -1), (0, 0)],
)
def test_rounding_half_away_from_zero(x, r):
    assert fide.round_half_away(Fraction(str(x))) == r


def test_k_cap_applied_over_a_period_of_39_games():
    """K 20 with 39 games in the period: the whole period's sum is multiplied by 17 (F-P05)."""
    states = {k("p"): listed(2000, games=100)}
    opps = [f"o{i:02d}" for i in range(39)]
    for o in opps:
        states[k(o)] = listed(2000, games=100)
    ev = event([("p", o, "1-0") for o in opps])
    out = fide.rate_event(ev, states)
    p = by_player(out)["p"][-1].after
    assert p.extra["k"] == 20 and p.extra["period_games"] == 39
    assert p.extra["sum"] == pytest.approx(39 * 0.5)
    assert p.rating == 2000 + 17 * 19.5  # not 20 x 19.5
    apply(out, states)
    close = by_player(fide.rate_event(event([("p", "o00", "1/2-1/2")], when=DEC), states))["p"][0]
    assert close.after.extra["published"] == 2332  # 331.5 rounds away from zero


def test_rounding_at_close_minus_2_5_to_minus_3():
    """K 10 and a period sum of -0.25: -2.5, published as -3 (F-P01's rounding)."""
    # K 10 (peak 2450): a draw with a player 400 lower (.5 - .92) and a win against an equal (1 - .5)
    # give a sum of 0.08; then a loss to an equal (-0.5) and a win against one 46 lower (1 - .56 = 0.44)
    # take it to 0.08 - 0.5 + 0.44 - 0.27 (a draw with one 210 lower: .5 - .77) = -0.25.
    states = {
        k("top"): listed(2413, peak=2450),
        k("x"): listed(2413),
        k("y"): listed(2413),
        k("z"): listed(2013),
        k("w"): listed(2367),
        k("v"): listed(2203),
    }
    ev = event(
        [
            ("top", "z", "1/2-1/2"),
            ("top", "x", "1-0"),
            ("y", "top", "1-0"),
            ("top", "w", "1-0"),
            ("top", "v", "1/2-1/2"),
        ]
    )
    apply(fide.rate_event(ev, states), states)
    top = states[k("top")]
    assert top.extra["k"] == 10 and top.extra["sum"] == pytest.approx(-0.25)
    assert top.rating == pytest.approx(2410.5)
    close = by_player(fide.rate_event(event([("top", "x", "1/2-1/2")], when=DEC), states))["top"][0]
    assert close.after.extra["published"] == 2410 and close.after.rating == 2410.0  # -2.5 -> -3
    assert close.after.extra["period"] is None
    assert close.after.extra["sum"] == 0.0 and close.after.version == top.version + 1


# --- the seed's worked example ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "live", "published"), [("1-0", 1515.2, 1515), ("1/2-1/2", 1505.2, 1505), ("0-1", 1495.2, 1495)]
)
def test_seed_example_1500_vs_1700_k20(result, live, published):
    states = {k("a"): listed(1500, games=100), k("b"): listed(1700, games=100)}
    out = fide.rate_event(event([("a", "b", result)]), states)
    a = by_player(out)["a"]
    assert len(a) == 1 and a[0].after.extra["k"] == 20
    assert a[0].after.rating == pytest.approx(live)
    apply(out, states)
    closing = by_player(fide.rate_event(event([("a", "b", "1/2-1/2")], when=DEC), states))["a"][0]
    assert closing.before.rating == pytest.approx(live)
    assert closing.after.extra["published"] == published  # the seed's +15 / +5 / -5


# --- periods -------------------------------------------------------------------------------------


def test_two_tournaments_in_a_month_then_the_roll_over():
    states = {
        k("a"): listed(1800, games=100, version=3),
        k("b"): listed(1800, games=100),
        k("c"): listed(1700, games=100),
        k("d"): listed(1900, games=100),
    }
    out1 = fide.rate_event(event([("a", "b", "1-0"), ("a", "c", "1/2-1/2")], when=NOV), states)
    apply(out1, states)
    a1 = states[k("a")]
    # 20 x ((1 - .50) + (.5 - .64)) = 20 x 0.36 = 7.2
    assert a1.rating == pytest.approx(1807.2) and a1.extra["published"] == 1800
    assert a1.extra["period"] == "2026-12" and a1.extra["period_games"] == 2  # the December list
    out2 = fide.rate_event(event([("d", "a", "1-0")], when=NOV_LATE), states)
    assert [len(v) for v in by_player(out2).values()] == [1, 1]  # same list: no close
    apply(out2, states)
    a2 = states[k("a")]
    # the same period: expectations still from the published 1800 (not the live 1807.2): .36 - .36 = 0
    assert a2.extra["sum"] == pytest.approx(0.0) and a2.rating == 1800.0 and a2.extra["period_games"] == 3
    assert a2.version == 5 and a2.games == 103
    # December 10th (the January list): a's and b's December periods close (own changes) before the
    # game is rated, against the December list's ratings (in force at its start).
    out3 = fide.rate_event(event([("a", "b", "1-0")], when=DEC), states)
    per = by_player(out3)
    a_close, a_game = per["a"]
    assert a_close.after.extra["published"] == 1800 and a_close.after.rating == 1800.0
    assert a_close.before.rating == 1800.0  # emitted even though the rounded rating equals the live one
    assert a_close.after.version == 6 and a_game.after.version == 7
    assert a_game.after.extra["period"] == "2027-01" and a_game.after.extra["period_games"] == 1
    b_close, b_game = per["b"]
    assert b_close.after.extra["published"] == 1790  # lost to a at 1800 in November: 20 x -0.5
    assert a_game.after.rating == pytest.approx(1800 + 20 * (1 - 0.51))  # against b's new 1790
    assert "c" not in per and "d" not in per  # not in the December event: their periods stay open


def test_an_event_from_an_earlier_month_goes_into_the_open_period():
    states = {k("a"): listed(1800, games=100), k("b"): listed(1800, games=100)}
    apply(fide.rate_event(event([("a", "b", "1-0")], when=DEC), states), states)
    out = fide.rate_event(event([("a", "b", "1-0")], when=NOV), states)
    a = by_player(out)["a"]
    assert len(a) == 1 and a[0].after.extra["period"] == "2027-01" and a[0].after.extra["period_games"] == 2
    assert a[0].after.rating == pytest.approx(1820.0)
    assert a[0].after.last_at == DEC  # last played only moves forward


def test_junior_k_changes_at_the_new_year():
    born = 2008  # 18 in 2026: junior K 40 through December 2026
    states = {k("j"): listed(2000, games=100, birth_year=born), k("o"): listed(2000, games=100)}
    out = fide.rate_event(event([("j", "o", "1-0")], when=DEC, births={"j": born}), states)
    assert by_player(out)["j"][0].after.extra["k"] == 40
    assert by_player(out)["j"][0].after.rating == 2020.0
    apply(out, states)
    jan = at(2027, 1, 5)
    out = fide.rate_event(event([("j", "o", "1-0")], when=jan), states)  # birth_year from the state
    close, game = by_player(out)["j"]
    assert close.after.extra["published"] == 2020
    # o closed at 1990; D = 30 -> PD .54 for j
    assert game.after.extra["k"] == 20 and game.after.rating == pytest.approx(2020 + 20 * 0.46)


def test_junior_needs_a_birth_year_and_a_rating_under_2300():
    states = {k("j"): listed(2000, games=100), k("o"): listed(2000, games=100)}
    out = fide.rate_event(event([("j", "o", "1-0")]), states)
    assert by_player(out)["j"][0].after.extra["k"] == 20


# --- unrated players and first ratings -----------------------------------------------------------------


def test_first_rating_1922_from_5_games_3_points_against_9507():
    """F-N01: Ra = 13107 / 7 = 1872.43; p = 4/7 -> .57; dp 50; Ru = 1922."""
    opp = {"o1": 1900, "o2": 1900, "o3": 1900, "o4": 1900, "o5": 1907}
    assert sum(opp.values()) == 9507
    states = {k(o): listed(r, games=100) for o, r in opp.items()}
    results = ["1-0", "1-0", "1-0", "0-1", "0-1"]
    ev = event([("new", o, r) for o, r in zip(opp, results, strict=True)])
    out = fide.rate_event(ev, states)
    per = by_player(out)
    (new,) = per["new"]
    assert new.before.rating == 0.0 and new.before.extra is None and new.before.version == 0
    assert new.after.extra["published"] == 1922 and new.after.rating == 1922.0
    assert new.after.games == 5 and new.after.peak == 1922.0 and new.after.extra["pool"] == []
    assert new.provisional is False and fide.listed_rating(new.after) == 1922.0
    # rated players' games against an unrated opponent are not rated for them
    assert all(o not in per for o in opp)
    assert out.unrated_reason is None


def test_first_rating_pools_across_events_and_months():
    states = {k(f"o{i}"): listed(1500, games=100) for i in range(5)}
    apply(fide.rate_event(event([("new", "o0", "1-0"), ("new", "o1", "1/2-1/2")]), states), states)
    s = states[k("new")]
    assert s.extra["published"] is None and s.games == 2 and len(s.extra["pool"]) == 2
    assert fide.listed_rating(s) is None
    out = fide.rate_event(
        event([("new", "o2", "1/2-1/2"), ("new", "o3", "0-1"), ("new", "o4", "1/2-1/2")], when=DEC), states
    )
    (ch,) = out.changes  # nobody had an open period: no closes
    # 5 opponents averaging 1500, 2.5 points: Ra = 11100/7 = 1585.7; p = 3.5/7 = .50; Ru = 1586
    assert ch.after.extra["published"] == 1586 and ch.after.games == 5


def test_first_rating_capped_at_2200():
    states = {k(f"o{i}"): listed(2400, games=100) for i in range(5)}
    out = fide.rate_event(event([("new", f"o{i}", "1-0") for i in range(5)]), states)
    assert out.changes[0].after.extra["published"] == 2200


def test_first_rating_under_1400_is_not_published():
    states = {k(f"o{i}"): listed(1400, games=100) for i in range(5)}
    out = fide.rate_event(event([("new", f"o{i}", r) for i, r in enumerate(["1-0"] + ["0-1"] * 4)]), states)
    (ch,) = out.changes
    assert ch.after.extra["published"] is None and len(ch.after.extra["pool"]) == 5 and ch.provisional


def test_zero_score_in_the_first_event_is_disregarded():
    states = {k("o"): listed(1600)}
    out = fide.rate_event(event([("new", "o", "0-1")]), states)
    assert out.unrated_reason == "no_rated_games"


def test_two_unrated_players_rate_nobody():
    assert fide.rate_event(event([("u1", "u2", "1-0")]), {}).unrated_reason == "no_rated_games"


def test_falling_below_1400_delists():
    st = listed(1410, games=100)
    st = st._replace(rating=1395.0, extra=dict(st.extra, period="2026-11", k=20, period_games=2, sum=-0.75))
    after = fide.close_period(st, DEC)
    assert after.extra["published"] is None and fide.listed_rating(after) is None
    assert after.rating == 1395.0 and after.extra["pool"] == []
    # ... and is treated as unrated from then on: his games are pooled, not rated for his opponent
    states = {k("d"): after, k("o"): listed(1500, games=100)}
    out = fide.rate_event(event([("d", "o", "1/2-1/2")], when=DEC), states)
    (ch,) = out.changes
    assert ch.key.player_id == "d" and ch.after.extra["pool"] == [[1500, 0.5, "2027-01"]]  # with its period


# --- messages, keys, closures -------------------------------------------------------------------------


def test_keys_follow_the_rating_type():
    ev = event([("a", "b", "1-0")], rating_type="blitz")
    assert fide.players(ev) == ["a", "b"]
    assert fide.state_keys(ev) == [k("a", "blitz"), k("b", "blitz"), k("a"), k("b")]  # standard: rated with it
    assert fide.state_keys(event([("a", "b", "1-0")])) == [k("a"), k("b")]


def test_unrated_event_changes_nothing():
    states = {k("a"): listed(1800), k("b"): listed(1800)}
    assert fide.rate_event(event([("a", "b", "1-0")], rated=False), states).unrated_reason == "casual"


def test_closed_account_left_out():
    states = {k("a"): listed(1800), k("b"): listed(1800), k("c"): listed(1800)}
    out = fide.rate_event(event([("a", "b", "1-0"), ("a", "c", "1-0")]), states, closed={"b": NOV - 1})
    assert [c.key.player_id for c in out.changes] == ["a", "c"]
    assert out.changes[0].after.extra["period_games"] == 1


def test_imported_rating_without_fide_extra_is_a_published_rating():
    states = {
        k("a"): RatingState(2012.0, games=57, peak=2080.0, version=1, extra={"birth_year": 2009}),
        k("b"): listed(2012),
    }
    out = fide.rate_event(event([("a", "b", "1-0")]), states)
    a = by_player(out)["a"][0].after
    assert a.extra["published"] == 2012 and a.extra["k"] == 40 and a.extra["birth_year"] == 2009  # junior
    assert a.rating == 2032.0


def test_bad_events_rejected():
    with pytest.raises(ValueError):
        fide.rate_event(event([("a", "b", "1-0")], rating_type="bullet"), {})
    with pytest.raises(ValueError):
        fide.rate_event(event([("a", "a", "1-0")]), {})
    with pytest.raises(ValueError):
        fide.rate_event(event([("a", "b", "1-0")], players=["a"]), {})


# --- issue 20: the rules as the federation applies them --------------------------------------------------


def test_junior_k_40_only_for_a_junior_never_rated_2300():
    """Rating Regulations (1 March 2024, amended 1 October 2025) section 8.3.3: K 40 for a junior "while
    their rating is under 2300"; the published lists apply it to a junior never rated 2300 or more
    (docs/rules.md#fide): the peak decides, not the current rating."""
    born = 2010
    was_2310 = listed(2250, games=100, peak=2310.0, birth_year=born)
    never = listed(2250, games=100, peak=2290.0, birth_year=born)
    states = {k("a"): was_2310, k("b"): never, k("o"): listed(2250, games=100)}
    out = by_player(fide.rate_event(event([("a", "o", "1-0"), ("b", "o", "1-0")], births={"a": born, "b": born}),
                                    states))
    assert out["a"][0].after.extra["k"] == 20 and out["b"][0].after.extra["k"] == 40
    assert fide.k_factor(2250, 2310, 100, born, 2026) == 20 and fide.k_factor(2250, 2290, 100, born, 2026) == 40
    assert fide.k_factor(2250, None, 100, born, 2026, ever_2300=True) == 20  # an imported list's word


def _import(rating, **fields):
    from worker.ratings.inputs import RatingImported

    return fide.imported_state(RatingImported("p", "fide", "standard", rating, NOV, **fields), 1)


def test_imports_carry_the_list_s_k_for_the_next_period():
    """docs/rules.md#fide: the official list publishes each player's K (section 8.3.3), not his games: an
    imported `k` is the K of the next period; a K of 10 means ever 2400, a K of 10 or 20 without games
    means at least 30 games (never K 40 for a new player)."""
    o = listed(2000, games=100)
    cases = {
        "adult_k20_no_games": (_import(2000, k=20), 20, 20),
        "former_2400_k10": (_import(2250, k=10), 10, 10),  # K 10 for good: ever 2400
        "flag_ever_2400": (_import(2250, games=100, ever_2400=True), 10, 10),
        "list_k40_then_rules": (_import(2000, k=40, games=100), 40, 20),  # 40 once, then the worker's rules
    }
    for name, (state, first, then) in cases.items():
        states = {k("p"): state, k("o"): o}
        out = fide.rate_event(event([("p", "o", "1-0")]), states)
        p = by_player(out)["p"][-1].after
        assert p.extra["k"] == first, name
        assert "k_next" not in p.extra, name  # used once
        apply(out, states)
        states[k("o")] = o
        nxt = by_player(fide.rate_event(event([("p", "o", "1-0")], when=DEC), states))["p"][-1].after
        assert nxt.extra["k"] == then, name
    # without k a new import with no games is K 40 (under 30 games), as before
    states = {k("p"): _import(2000), k("o"): o}
    assert by_player(fide.rate_event(event([("p", "o", "1-0")]), states))["p"][0].after.extra["k"] == 40


def test_first_rating_pool_spans_at_most_26_months():
    """Section 7.1.4: a first rating rests on games "pooled over consecutive periods of at most 26 months";
    older pooled results leave the pool (they stay counted in `games`)."""
    opps = {k(f"o{i}"): listed(1600, games=100) for i in range(5)}
    first = event([("new", "o0", "1-0"), ("new", "o1", "1/2-1/2"), ("new", "o2", "1-0")], when=at(2024, 1, 10))

    def after_second(when):
        states = dict(opps)
        apply(fide.rate_event(first, states), states)
        out = fide.rate_event(event([("new", "o3", "1/2-1/2"), ("new", "o4", "0-1")], when=when), states)
        return out.changes[0].after

    kept = after_second(at(2026, 2, 10))  # the lists of 2024-02 .. 2026-03: 26 periods
    assert kept.extra["published"] is not None and kept.games == 5
    dropped = after_second(at(2026, 3, 10))  # the 2024-02 list is 26 months before 2026-04: out
    assert dropped.extra["published"] is None and dropped.games == 5
    assert [e[2] for e in dropped.extra["pool"]] == ["2026-04", "2026-04"]  # the April list (section 7.1.3)
    assert fide.months_between("2024-02", "2026-04") == 26


def test_rapid_newcomer_with_a_standard_rating_is_rated_with_it():
    """FIDE Rapid and Blitz Rating Regulations (1 March 2024), unrated players: a player without a rapid
    (blitz) rating who holds a standard rating is considered rated with it; his opponents' games against
    him are rated, and his own rapid rating starts from it (docs/rules.md#fide)."""
    states = {k("n"): listed(2000, games=100), k("o", "rapid"): listed(1800, games=100),
              k("u", "rapid"): listed(1800, games=100)}
    out = fide.rate_event(event([("n", "o", "1-0"), ("u", "o", "1/2-1/2")], rating_type="rapid"), states)
    per = by_player(out)
    (n,) = per["n"]
    assert n.key == k("n", "rapid") and n.before.version == 0 and not n.provisional
    # 2000 against 1800: D = 200, PD .76; K 40 (no rapid games yet), a win: +9.6 on 2000
    assert n.after.extra["published"] == 2000 and n.after.rating == pytest.approx(2000 + 40 * 0.24)
    assert fide.listed_rating(n.after) == n.after.rating
    (o,) = per["o"]  # rated against n's standard 2000, not left out: PD .24
    assert o.after.extra["period_games"] == 2
    assert o.after.rating == pytest.approx(1800 + 20 * ((0 - 0.24) + (0.5 - 0.5)))
    # his first close publishes his own rapid rating from it
    apply(out, states)
    closed = fide.close_period(states[k("n", "rapid")], DEC)
    assert closed.extra["published"] == 2010
    # without a standard rating he is an unrated player, pooled, and o's game against him not rated
    states2 = {k("o", "rapid"): listed(1800, games=100)}
    out2 = fide.rate_event(event([("n", "o", "1-0")], rating_type="rapid"), states2)
    assert [c.key.player_id for c in out2.changes] == ["n"] and out2.changes[0].provisional
    assert out2.left_out == (("o", "unrated_opponent"),)


def test_rating_period_is_the_list_whose_closing_date_follows_the_event_end():
    """Section 7.1.3: lists are published on the 1st and close 3 days before; an event goes to the first
    list whose closing date is on or after its end date (docs/rules.md#fide); an explicit `rating_period` wins."""
    assert fide.list_period(at(2026, 2, 26, 23)) == "2026-03"
    assert fide.list_period(at(2026, 2, 27, 0)) == "2026-04"
    assert fide.list_period(at(2028, 2, 26)) == "2028-03" and fide.list_period(at(2028, 2, 27)) == "2028-03"  # leap
    assert fide.list_period(at(2026, 12, 29)) == "2027-01" and fide.list_period(at(2026, 12, 30)) == "2027-02"
    ev = event([("a", "b", "1-0")], when=at(2026, 2, 27))
    assert fide.event_period(ev) == "2026-04"
    assert fide.event_period(dataclasses.replace(ev, rating_period="2026-03")) == "2026-03"


def test_expected_scores_use_the_list_in_force_at_the_event_start():
    """Section 7.1.3 (docs/rules.md#fide): a tournament is rated with the ratings of the list in force at its
    start, even when it ends after a later list was published. a won in November (the December list:
    1800 -> 1810); a tournament from 25 November to 3 December still rates him at 1800 (the November
    list), one that started on 1 December at 1810."""
    states = {k("a"): listed(1800, games=100), k("b"): listed(1800, games=100), k("c"): listed(1810, games=100)}
    apply(fide.rate_event(event([("a", "b", "1-0")], when=NOV), states), states)
    across = dataclasses.replace(event([("a", "c", "1-0")], when=at(2026, 12, 3)), started_at=at(2026, 11, 25))
    close, game = by_player(fide.rate_event(across, states))["a"]
    assert close.after.extra["published"] == 1810 and close.after.extra["lists"][-1] == ["2026-12", 1810]
    # against c (1810) on the November list: a is 1800, D = 10, PD .49: 20 x .51 = 10.2 on his new 1810
    assert game.after.rating == pytest.approx(1810 + 20 * 0.51)
    after_list = event([("a", "c", "1-0")], when=at(2026, 12, 3))  # started under the December list
    assert by_player(fide.rate_event(after_list, states))["a"][1].after.rating == pytest.approx(1810 + 20 * 0.5)


def test_an_import_is_the_rating_on_its_list_and_keeps_the_earlier_lists():
    """docs/rules.md#fide: importing the December list keeps the November one, so that a tournament that
    started in November is rated with the November ratings."""
    from worker.ratings.inputs import RatingImported

    def imported(rating, day):
        return RatingImported("p", "fide", "standard", rating, at(*day), games=100)

    nov = fide.imported_state(imported(2000, (2026, 11, 1)), 1)
    dec = fide.carried_lists(nov, fide.imported_state(imported(2050, (2026, 12, 1)), 2))
    assert dec.extra["lists"] == [["2026-11", 2000], ["2026-12", 2050]]
    states = {k("p"): dec, k("o"): listed(2000, games=100)}
    ev = dataclasses.replace(event([("p", "o", "1-0")], when=at(2026, 12, 4)), started_at=at(2026, 11, 28))
    (p,) = by_player(fide.rate_event(ev, states))["p"]
    assert p.after.rating == pytest.approx(2050 + 20 * 0.5)  # expected from 2000 v 2000 (November list)
    o = by_player(fide.rate_event(ev, states))["o"][0]
    assert o.after.rating == pytest.approx(2000 - 20 * 0.5)
