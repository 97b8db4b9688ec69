"""FIDE ratings: standard, rapid and blitz (seed 001 "FIDE ratings"; FIDE Rating Regulations; docs/rules.md#fide).

Current regulations, not the seed's simplifications:

- Expected score (PD) from table 8.1.2, not the logistic formula, with the 400-point rule: a difference
  of more than 400 counts as 400; in standard chess from 2025-10-01 not for a player rated 2650 or more
  (the player whose change is computed); in rapid and blitz from 2024-12-01 a game between players 600
  or more apart, one of them rated above 2600, is not rated at all.
- K, fixed at the player's first game of a rating period (section 8.3.3): 10 once a published rating
  reached 2400 (the state's peak), else 40 for a junior (until the end of the year of the 18th birthday)
  never rated 2300 or more (the peak, not the current rating), else 40 under 30 games, else 20; then
  capped so that K x n <= 700 over the period's n games. An imported list's K (`k`) is the K of the next
  period; its `ever_2300` / `ever_2400` count as a peak that high (docs/rules.md#fide).
- Rating period = the monthly list an event goes to (section 7.1.3): the first list (published on the
  1st) whose closing date, 3 days before it, is on or after the event's end date, or the event's own
  `rating_period`; named by the list's month. Expected scores use the ratings of the list in force at
  the event's start (`started_at`, else its end), even when a later list came out meanwhile: each
  state keeps its latest list ratings. The live rating is published + K x sum(score - PD); the period
  is closed (rounded half away from zero into the new published rating, its own RatingChange) when an
  event of a later period involves the player. An event of an earlier period than the open one is
  rated into the open period.
- Unrated players pool their games against rated opponents; a first rating, once based on >= 5 games
  within the last 26 months (section 7.1.4: older pooled results leave the pool):
  Ra with two hypothetical 1800 opponents scored as draws, Ru = Ra + dp(p), at most 2200, only if >= 1400.
- Rapid and blitz: a player without a rating of that type who holds a standard rating is rated with it
  and is a rated player for his opponents (rapid and blitz regulations); his own rating of that type
  starts from it (published = his standard rating until his first close).
  Rated players' games against unrated opponents are not rated for the rated player. A rating that
  falls below 1400 is delisted: the player is unrated again.
- The change of 1 March 2024, by list month (docs/rules.md#fide): on the list of 2024-03 every published
  rating R with 1000 <= R < 2000 became R + 0.4 x (2000 - R), once, and the lowest listed rating moved
  from 1000 to 1400. A rating whose latest list is older than 2024-03 has not had the raise yet: it gets
  it when its period closes into that list or a later one, or as a change of its own at the first list
  (or event of a later period) that finds it without an open period. The older regulations' initial
  ratings and their 400-point rule once per event are not modelled: events before March 2024 are rated
  with today's rules and the 1000 floor.

State layout (RatingState of (player, "fide", rating_type)):

- `rating`: the live rating (float) while listed. While unlisted it is not a rating: 0.0 for a player
  never listed, the last computed value for a delisted one; `extra["published"]` is None then, and
  `listed_rating(state)` gives None (the contract's `after.rating: null`).
- `games`: rated games, including those pooled for the first rating; `peak`: the highest published rating.
- `extra`: {"published": int | None, "period": "YYYY-MM" | None (the open period), "k": int | None (K
  fixed at the period's first game, before the cap), "period_games": n, "sum": sum(score - PD) over the
  period (a multiple of 0.01, kept exact as hundredths internally), "pool": [[opponent rating, score,
  period], ...] for an unlisted player (an entry without its period, stored by an earlier version, never
  ages out), "birth_year": int | None}; from an import, while they matter: "k_next" (the list's K, for
  the next period), "ever_2300", "ever_2400" (true) and "games_at_least" (30: a list K of 10 or 20 with
  no games given); "lists": [[list month, published rating or null], ...], the ratings of the latest
  lists, oldest first, each valid from its list until the next ("0000-00": before any list the worker
  knows of). A state without "lists" (an earlier version) has its published rating on every list;
  "inactive": true once marked at a list (no rated game in the 12 months before it), until his next game,
  whose time is then "inactive_until"; "closed_periods": [[list month, games, K], ...], the latest periods
  closed (the games rated in each and its K), for the list as published (`list_entry`).
- A state without "published" in `extra` (a `rating.imported` FIDE rating) is a listed, published
  rating with no open period.
"""

from __future__ import annotations

import calendar
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction
from functools import partial
from typing import Any, NamedTuple

from worker.ratings.doctext import signed, table
from worker.ratings.inputs import EventFinished, EventGame, EventPlayer, PeriodClosed
from worker.ratings.parameters import ParameterSet
from worker.ratings.state import Outcome, RatingChange, RatingState, StateKey
from worker.ratings.system import Imports, Prediction, RatingSystem, Sweep

NAME = "fide"
CATEGORIES = ("standard", "rapid", "blitz")

# Scores in hundredths, so that sums of score - PD are exact integers.
SCORES = {"1-0": (100, 0), "0-1": (0, 100), "1/2-1/2": (50, 50)}

# Table 8.1.2: (largest D, PD of the higher-rated player in hundredths); above 735: 100.
TABLE_8_1_2: tuple[tuple[int, int], ...] = (
    (3, 50), (10, 51), (17, 52), (25, 53), (32, 54), (39, 55), (46, 56), (53, 57), (61, 58), (68, 59),
    (76, 60), (83, 61), (91, 62), (98, 63), (106, 64), (113, 65), (121, 66), (129, 67), (137, 68),
    (145, 69), (153, 70), (162, 71), (170, 72), (179, 73), (188, 74), (197, 75), (206, 76), (215, 77),
    (225, 78), (235, 79), (245, 80), (256, 81), (267, 82), (278, 83), (290, 84), (302, 85), (315, 86),
    (328, 87), (344, 88), (357, 89), (374, 90), (391, 91), (411, 92), (432, 93), (456, 94), (484, 95),
    (517, 96), (559, 97), (619, 98), (735, 99),
)  # fmt: skip

# Table 8.1.1: p (hundredths, 50..100) -> dp; below 50, dp(p) = -dp(100 - p).
TABLE_8_1_1: dict[int, int] = {
    100: 800, 99: 677, 98: 589, 97: 538, 96: 501, 95: 470, 94: 444, 93: 422, 92: 401, 91: 383, 90: 366,
    89: 351, 88: 336, 87: 322, 86: 309, 85: 296, 84: 284, 83: 273, 82: 262, 81: 251, 80: 240, 79: 230,
    78: 220, 77: 211, 76: 202, 75: 193, 74: 184, 73: 175, 72: 166, 71: 158, 70: 149, 69: 141, 68: 133,
    67: 125, 66: 117, 65: 110, 64: 102, 63: 95, 62: 87, 61: 80, 60: 72, 59: 65, 58: 57, 57: 50, 56: 43,
    55: 36, 54: 29, 53: 21, 52: 14, 51: 7, 50: 0,
}  # fmt: skip


def _epoch(year: int, month: int, day: int) -> float:
    return float(calendar.timegm((year, month, day, 0, 0, 0)))


@dataclass(frozen=True, slots=True)
class FideParams:
    """The regulations' numbers (FIDE Rating Regulations, docs/rules.md#fide); each a documented setting."""

    k_top: int = 10
    k_junior: int = 40
    k_new: int = 40
    k_default: int = 20
    top_from: float = 2400.0  # a published rating (peak) this high: K 10 for good
    junior_below: float = 2300.0
    junior_last_age: int = 18  # junior until the end of the year of this birthday
    new_player_games: int = 30
    k_times_games_max: int = 700
    max_difference: float = 400.0
    standard_uncapped_from: float = 2650.0
    standard_uncapped_since: float = _epoch(2025, 10, 1)
    rapid_blitz_unrated_gap: float = 600.0
    rapid_blitz_unrated_above: float = 2600.0
    rapid_blitz_unrated_since: float = _epoch(2024, 12, 1)
    listed_from: int = 1400
    first_rating_games: int = 5
    first_rating_months: int = 26  # section 7.1.4: a first rating's games span at most 26 months
    closing_days_before_list: int = 3  # section 7.1.3: a list closes 3 days before its date
    lists_kept: int = 13  # list ratings kept per state: an event that started up to a year ago
    # closed periods kept per state: the newest list's own and the ones closed early after it (`list_entry`)
    closed_periods_kept: int = 3
    inactive_after_months: int = 12  # no rated game in the 12 months before a list: inactive
    first_rating_max: int = 2200
    hypothetical_rating: int = 1800
    hypothetical_games: int = 2  # scored as draws
    disregard_first_zero_score: bool = True  # the regulations' initial ratings: a zero score in the first event
    # The change of 1 March 2024 (docs/rules.md#fide): at this list, R in [raise_from, raise_below) becomes
    # R + raise_share x (raise_below - R), once; lists before it published from listed_from_before.
    raise_list: str = "2024-03"
    raise_from: int = 1000
    raise_below: int = 2000
    raise_share: Fraction = Fraction(2, 5)
    listed_from_before: int = 1000


PARAMS = FideParams()


# --- arithmetic ----------------------------------------------------------------------------------


def round_half_away(x: Fraction | float | int) -> int:
    """Nearest whole number, 0.5 away from zero (section 8.3.4: -2.5 -> -3)."""
    q = Fraction(x)
    n = (abs(q) + Fraction(1, 2)).__floor__()
    return n if q >= 0 else -n


def pd_higher(d: float) -> int:
    """Table 8.1.2: the higher-rated player's PD, in hundredths, for a difference D >= 0."""
    d = abs(d)
    for top, pd in TABLE_8_1_2:
        if d <= top:
            return pd
    return 100


def dp_for(p_hundredths: int) -> int:
    """Table 8.1.1: the rating difference for a percentage score p (0..100 hundredths)."""
    if p_hundredths < 50:
        return -TABLE_8_1_1[100 - p_hundredths]
    return TABLE_8_1_1[p_hundredths]


def difference_used(
    own: float, opponent: float, rating_type: str, at: float, params: FideParams = PARAMS
) -> float:
    """|own - opponent| after the 400-point rule, for the player rated `own`."""
    d = abs(own - opponent)
    if d <= params.max_difference:
        return d
    if (
        rating_type == "standard"
        and at >= params.standard_uncapped_since
        and own >= params.standard_uncapped_from
    ):
        return d
    return params.max_difference


def expected_hundredths(
    own: float, opponent: float, rating_type: str = "standard", at: float = 0.0, params: FideParams = PARAMS
) -> int:
    """The player's PD against one opponent in hundredths (table 8.1.2 with the 400-point rule)."""
    h = pd_higher(difference_used(own, opponent, rating_type, at, params))
    return h if own >= opponent else 100 - h


def expected_score(
    own: float, opponent: float, rating_type: str = "standard", at: float = 0.0, params: FideParams = PARAMS
) -> float:
    """The player's PD against one opponent (0.00 .. 1.00)."""
    return expected_hundredths(own, opponent, rating_type, at, params) / 100


def game_unrated(a: float, b: float, rating_type: str, at: float, params: FideParams = PARAMS) -> bool:
    """Rapid and blitz from 2024-12-01: a 600+ gap with a player over 2600 is not rated."""
    return (
        rating_type in ("rapid", "blitz")
        and at >= params.rapid_blitz_unrated_since
        and abs(a - b) >= params.rapid_blitz_unrated_gap
        and max(a, b) > params.rapid_blitz_unrated_above
    )


def is_junior(birth_year: int | None, year: int, params: FideParams = PARAMS) -> bool:
    return birth_year is not None and year <= birth_year + params.junior_last_age


def k_factor(
    published: float,
    peak: float | None,
    games: int,
    birth_year: int | None,
    year: int,
    params: FideParams = PARAMS,
    *,
    ever_2300: bool = False,
    ever_2400: bool = False,
) -> int:
    """K before the cap, in the precedence 10 / 40 junior / 40 new / 20 (section 8.3.3).

    The highest rating is the peak (a published rating or an imported peak), not the current one: K 10
    once it reached 2400, and no junior K 40 once it reached 2300 ("a junior never rated 2300 or more",
    the precedence the published lists follow, docs/rules.md#fide). `ever_2300` / `ever_2400` are an
    imported list's word for a peak the worker has not seen."""
    best = published if peak is None else max(peak, published)
    if best >= params.top_from or ever_2400:
        return params.k_top
    if is_junior(birth_year, year, params) and best < params.junior_below and not ever_2300:
        return params.k_junior
    if games < params.new_player_games:
        return params.k_new
    return params.k_default


def capped_k(k: int, n: int, params: FideParams = PARAMS) -> int:
    """K x n <= 700: else the largest whole K with K x n <= 700 (20 with 39 games: 17)."""
    if n <= 0 or k * n <= params.k_times_games_max:
        return k
    return params.k_times_games_max // n


def first_rating(pool: list, params: FideParams = PARAMS) -> int:
    """Ru = Ra + dp(p), Ra and p including the two hypothetical 1800 draws; at most 2200 (not listed-checked).

    p is rounded to two decimals (half up) before the table look-up; Ru half away from zero.
    """
    n = len(pool) + params.hypothetical_games
    total = sum(Fraction(e[0]) for e in pool) + params.hypothetical_rating * params.hypothetical_games
    score = sum(Fraction(e[1]) for e in pool) + Fraction(params.hypothetical_games, 2)
    ra = total / n
    p = round_half_away(score * 100 / n)
    return min(round_half_away(ra + dp_for(p)), params.first_rating_max)


# --- periods and state -----------------------------------------------------------------------------


def month_of(at: float) -> str:
    """The UTC calendar month of a time: "YYYY-MM" (the list in force then is that month's)."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m")


def _next_month(year: int, month: int) -> tuple[int, int]:
    return (year, month + 1) if month < 12 else (year + 1, 1)


def list_period(finished_at: float, params: FideParams = PARAMS) -> str:
    """The list an event ending then goes to (section 7.1.3): the first list, published on the 1st, whose
    closing date, 3 days before it, is on or after the event's end date (UTC): an event ending on 26
    February goes to the March list, one ending on 27 February to the April list."""
    end = datetime.fromtimestamp(finished_at, UTC).date()
    year, month = _next_month(end.year, end.month)
    if end > date(year, month, 1) - timedelta(days=params.closing_days_before_list):
        year, month = _next_month(year, month)
    return f"{year:04d}-{month:02d}"


def event_period(event: EventFinished, params: FideParams = PARAMS) -> str:
    """The event's rating period: its own `rating_period` when the platform knows it, else its list."""
    return event.rating_period or list_period(event.finished_at, params)


def list_in_force(event: EventFinished) -> str:
    """The list whose ratings rate the event: the one in force at its start (`started_at`, else its end)."""
    return month_of(event.started_at if event.started_at is not None else event.finished_at)


def months_between(earlier: str, later: str) -> int:
    """Whole months from one period ("YYYY-MM") to another: 2024-11 -> 2026-12 is 25."""
    return (int(later[:4]) - int(earlier[:4])) * 12 + int(later[5:7]) - int(earlier[5:7])


def recent_pool(pool: list, period: str, params: FideParams = PARAMS) -> list:
    """The pooled results a first rating may rest on in `period`: those of the last 26 periods, this one
    included (section 7.1.4). An entry stored without its period (an earlier version) is kept."""
    return [e for e in pool if len(e) < 3 or months_between(e[2], period) < params.first_rating_months]


def key(player_id: str, rating_type: str) -> StateKey:
    return StateKey(player_id, NAME, rating_type)


class View(NamedTuple):
    """The FIDE fields of a state, read from `extra` (sum in exact hundredths)."""

    published: int | None
    period: str | None
    k: int | None
    n: int
    hundredths: int
    pool: list
    birth_year: int | None
    # From an import (docs/rules.md#fide): the list's K for the next period, and what the list says of the past.
    k_next: int | None = None
    ever_2300: bool = False
    ever_2400: bool = False
    games_at_least: int = 0
    lists: tuple = ()  # ((list month, rating or None), ...), oldest first
    inactive: bool = False  # marked at a list: no rated game in the 12 months before it
    inactive_until: float | None = None  # the time of the game that ended his latest inactive mark
    closed_periods: tuple = ()  # ((list month, games, K), ...), oldest first


def _imported_flags(extra: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "k_next": extra.get("k_next"),
        "ever_2300": bool(extra.get("ever_2300", False)),
        "ever_2400": bool(extra.get("ever_2400", False)),
        "games_at_least": int(extra.get("games_at_least", 0)),
        "lists": tuple((m, r) for m, r in extra.get("lists", ())),
        "inactive": bool(extra.get("inactive", False)),
        "inactive_until": extra.get("inactive_until"),
        "closed_periods": tuple(tuple(c) for c in extra.get("closed_periods", ())),
    }


def view(state: RatingState | None) -> View:
    if state is None:
        return View(None, None, None, 0, 0, [], None)
    extra = state.extra or {}
    if "published" not in extra:  # an imported list rating
        return View(round_half_away(state.rating), None, None, 0, 0, [], extra.get("birth_year"),
                    **_imported_flags(extra))
    return View(
        extra["published"],
        extra.get("period"),
        extra.get("k"),
        int(extra.get("period_games", 0)),
        round(float(extra.get("sum", 0.0)) * 100),
        [list(e) for e in extra.get("pool", ())],
        extra.get("birth_year"),
        **_imported_flags(extra),
    )


def _extra(v: View) -> dict[str, Any]:
    out: dict[str, Any] = {
        "published": v.published,
        "period": v.period,
        "k": v.k,
        "period_games": v.n,
        "sum": v.hundredths / 100,
        "pool": [list(e) for e in v.pool],
        "birth_year": v.birth_year,
    }
    # Only while they say something: a state without them reads as without (view's defaults).
    if v.k_next is not None:
        out["k_next"] = v.k_next
    if v.ever_2300:
        out["ever_2300"] = True
    if v.ever_2400:
        out["ever_2400"] = True
    if v.games_at_least:
        out["games_at_least"] = v.games_at_least
    if v.lists:
        out["lists"] = [list(e) for e in v.lists]
    if v.inactive:
        out["inactive"] = True
    if v.inactive_until is not None:
        out["inactive_until"] = v.inactive_until
    if v.closed_periods:
        out["closed_periods"] = [list(c) for c in v.closed_periods]
    return out


BEFORE_LISTS = "0000-00"  # a list month before every list: what held before the first one known


def with_list(v: View, list_month: str, rating: int | None, params: FideParams = PARAMS) -> tuple:
    """v's list ratings with `rating` from `list_month` on (a later list's entry replaced), the latest kept."""
    known = v.lists or ((BEFORE_LISTS, v.published),)  # an earlier version's state: valid until now
    kept = tuple(e for e in known if e[0] < list_month) + ((list_month, rating),)
    return kept[-params.lists_kept:]


def rating_on_list(v: View, list_month: str, params: FideParams = PARAMS) -> int | None:
    """His published rating on the list of `list_month`: the entry in force then; before the first one
    kept, the first (an import's list: the earliest the worker knows); without any, the published one.
    A list from 2024-03 on shows an entry of an earlier list raised, before his own change says so."""
    if not v.lists:
        return v.published
    month, rating = v.lists[0]
    for m, r in v.lists:
        if m > list_month:
            break
        month, rating = m, r
    if rating is not None and list_month >= params.raise_list and _before_the_raise(month, params):
        return raised(rating, params)
    return rating


# --- the change of 1 March 2024 ----------------------------------------------------------------------


def lowest_listed(list_month: str, params: FideParams = PARAMS) -> int:
    """The lowest rating the list of that month publishes: 1000 before the list of 2024-03, 1400 from it."""
    return params.listed_from if list_month >= params.raise_list else params.listed_from_before


def raised(rating: int, params: FideParams = PARAMS) -> int:
    """A published rating as the list of 2024-03 raised it: R + 0.4 x (2000 - R) for 1000 <= R < 2000,
    rounded as a published rating (1500 -> 1700, 1001 -> 1401); any other R as it was."""
    if params.raise_from <= rating < params.raise_below:
        return round_half_away(rating + params.raise_share * (params.raise_below - rating))
    return rating


def _before_the_raise(list_month: str, params: FideParams) -> bool:
    """A list rating not raised yet: one from a list before 2024-03. BEFORE_LISTS is not: it stands for
    a rating an earlier version of the worker kept without its lists, rated by today's rules."""
    return BEFORE_LISTS < list_month < params.raise_list


def awaits_raise(v: View, params: FideParams = PARAMS) -> bool:
    """Whether his published rating is from a list before 2024-03, so that the raise is still to come."""
    return v.published is not None and bool(v.lists) and _before_the_raise(v.lists[-1][0], params)


def raise_change(k: StateKey, state: RatingState, params: FideParams = PARAMS) -> RatingChange | None:
    """The raise as a change of its own, for a rating that has not had it and no open period into the list
    of 2024-03 (closed first): his rating on that list is his latest one, raised, recorded from it. None
    where it changes nothing (2000 and over)."""
    v = view(state)
    if not awaits_raise(v, params) or (new := raised(v.published, params)) == v.published:
        return None
    up = v._replace(published=new, lists=with_list(v, params.raise_list, new, params))
    peak = float(new) if state.peak is None else max(state.peak, float(new))
    after = state._replace(rating=float(live_rating(up, params)), peak=peak, version=state.version + 1,
                           extra=_extra(up))
    return change(k, state, after)


def _raise_due(closing: PeriodClosed, state: RatingState, params: FideParams) -> bool:
    """Whether a list finds a rating still to be raised (`raise_change` would change it), from its fields."""
    extra = state.extra
    lists = extra.get("lists") if extra else None
    if closing.list < params.raise_list or not lists or not _before_the_raise(lists[-1][0], params):
        return False
    published = extra["published"] if "published" in extra else round_half_away(state.rating)
    return published is not None and raised(published, params) != published


def is_listed(state: RatingState) -> bool:
    """Whether he has a published rating: `view(state).published is not None`, without reading the rest
    (asked for every record, and for every state a list's sweep looks at)."""
    extra = state.extra
    return extra is None or "published" not in extra or extra["published"] is not None


def listed_rating(state: RatingState) -> float | None:
    """What `rating.changed` shows as the rating: the live rating, None while unlisted."""
    return state.rating if is_listed(state) else None


def live_rating(v: View, params: FideParams = PARAMS) -> Fraction:
    assert v.published is not None
    if v.k is None or v.n == 0:
        return Fraction(v.published)
    return v.published + Fraction(capped_k(v.k, v.n, params) * v.hundredths, 100)


def change(k: StateKey, before: RatingState, after: RatingState) -> RatingChange:
    """Provisional while unlisted; FIDE has no floor (1400 is a listing threshold)."""
    return RatingChange(k, before, after, not is_listed(after), None)


def close_period(state: RatingState, at: float | None, params: FideParams = PARAMS) -> RatingState:
    """Publish the open period: the change rounded half away from zero; under 1400 the player is delisted.

    `at` is the time of the event that closes it (his last played time moves to it); None for a list's
    publication, which is no game of his."""
    v = view(state)
    assert v.published is not None and v.period is not None
    new = v.published + round_half_away(live_rating(v, params) - v.published)
    if v.period >= params.raise_list and awaits_raise(v, params):
        # the list of 2024-03 raises the rating it publishes; a later one, the rating he had on it
        new = (raised(new, params) if v.period == params.raise_list
               else new + raised(v.published, params) - v.published)
    kept = (*v.closed_periods, (v.period, v.n, v.k))[-params.closed_periods_kept:]
    closed = v._replace(period=None, k=None, n=0, hundredths=0, pool=[], closed_periods=kept)
    peak = state.peak
    if new < lowest_listed(v.period, params):
        closed = closed._replace(published=None, lists=with_list(v, v.period, None, params))
    else:
        closed = closed._replace(published=new, lists=with_list(v, v.period, new, params))
        peak = float(new) if peak is None else max(peak, float(new))
    last_at = state.last_at if at is None else at if state.last_at is None else max(state.last_at, at)
    return RatingState(float(new), None, None, state.games, peak, last_at, state.version + 1, _extra(closed))


def list_date(list_month: str) -> float:
    """The list's publication: the 1st of its month, 00:00 UTC (epoch seconds)."""
    return _epoch(int(list_month[:4]), int(list_month[5:7]), 1)


@functools.lru_cache(maxsize=64)
def inactive_before(list_month: str, params: FideParams = PARAMS) -> float:
    """A listed player whose last rated game is before this is inactive on the list: 12 months before it."""
    year, month = int(list_month[:4]), int(list_month[5:7]) - params.inactive_after_months
    while month < 1:
        year, month = year - 1, month + 12
    return _epoch(year, month, 1)


def list_concerns(closing: PeriodClosed, state: RatingState, params: FideParams = PARAMS) -> bool:
    """Whether `close_list` changes this state: read from its fields alone, for the tens of thousands of
    states a list's sweep looks at (most of which it leaves alone)."""
    extra = state.extra or {}
    period = extra.get("period")
    if period is not None and period <= closing.list and extra.get("published") is not None:
        return True
    if _raise_due(closing, state, params):
        return True
    return (is_listed(state) and not extra.get("inactive") and state.last_at is not None
            and state.last_at < inactive_before(closing.list, params))


def close_list(closing: PeriodClosed, k: StateKey, state: RatingState, params: FideParams = PARAMS) -> tuple:
    """What a list's publication (`rating.period_closed`, docs/rules.md#fide) changes in one FIDE state: its
    open period up to that list closes (rounded, published, delisted under 1400), a rating from before
    2024-03 not raised yet gets the raise (from the list of 2024-03 on), then a listed player with no
    rated game (pooled games count) in the 12 months before the list is marked inactive, his rating
    unchanged. Each its own change; none for a state it does not concern (most of them)."""
    if not list_concerns(closing, state, params):
        return ()
    changes = []
    v = view(state)
    if v.published is not None and v.period is not None and v.period <= closing.list:
        after = close_period(state, None, params)
        changes.append(change(k, state, after))
        state, v = after, view(after)
    if closing.list >= params.raise_list and (up := raise_change(k, state, params)) is not None:
        changes.append(up)
        state, v = up.after, view(up.after)
    played = state.last_at
    if (v.published is not None and not v.inactive and played is not None
            and played < inactive_before(closing.list, params)):
        after = state._replace(version=state.version + 1, extra=_extra(v._replace(inactive=True)))
        changes.append(change(k, state, after))
    return tuple(changes)


def is_inactive(state: RatingState) -> bool:
    """`inactive` of a FIDE record: marked at a list, until his next game."""
    return bool(state.extra and state.extra.get("inactive"))


# --- a list as published ----------------------------------------------------------------------------


class ListEntry(NamedTuple):
    """A player's line on a list, FIDE's list downloads' columns; None: what the state can no longer tell."""

    rating: int  # the published rating
    games: int | None  # the games rated in the period that closed into the list
    k: int | None  # the K the list gives him: the K of his next period (as `rating.imported` reads `k`)
    inactive: bool | None
    birth_year: int | None


def list_entry(state: RatingState | None, list_month: str, params: FideParams = PARAMS) -> ListEntry | None:
    """His line on the list of `list_month`, as the worker published it, None when he is not on it.

    Exact for the newest list the worker has applied (its `rating.period_closed`), whatever he has done
    since; the read API serves that list only. Older lists are not kept: a state forgets who was inactive
    on them, and their K, once he plays again (their ratings and games remain for a while, in "lists" and
    "closed_periods"). On the newest list:

    - on it: a published rating in force for that list, the one events started under it are rated with
      (`rating_on_list`; a first rating, or a rapid rating started from the standard one, is on the list
      it is in force for, as the records published it); not on it before his first list entry (imported
      or rated later) nor when delisted;
    - games: those rated in his period that closed into the list ("closed_periods"); 0 without one; None
      (unknown) for a list entry of another kind (an import of that list, a first rating) or kept by an
      earlier version;
    - k: the K of his next period: the K his first game after the list fixed (a period closed since, or
      the open one), else the K it will fix, with the list's year for the junior rule (`next_k`);
    - inactive: marked at a list and not playing again before this list's date ("inactive_until");
    - k and inactive are None (unknown) when a later list entry replaced the state (an import) or the
      periods closed since are more than the state keeps (a list applied more than a month late)."""
    v = view(state)
    if state is None or (v.lists and list_month < v.lists[0][0]):
        return None
    rating = rating_on_list(v, list_month, params)
    if rating is None:
        return None
    closed = {c[0]: c for c in v.closed_periods}
    if list_month in closed:
        games = closed[list_month][1]
    else:
        games = None if any(m == list_month for m, _ in v.lists) else 0
    later = next((m for m, _ in v.lists if m > list_month), None)
    if later is not None:  # a period closed after the list (his first game after it fixed its K), or a reset
        if later not in closed:
            return ListEntry(rating, games, None, None, v.birth_year)
        k = closed[later][2]
    elif v.period is not None:
        k = v.k
    else:
        k = next_k(v._replace(published=rating), state, v.birth_year, int(list_month[:4]), params)
    inactive = v.inactive or (v.inactive_until is not None and v.inactive_until >= list_date(list_month))
    return ListEntry(rating, games, k, inactive, v.birth_year)


# --- events ---------------------------------------------------------------------------------------


def players(event: EventFinished) -> list[str]:
    """Every player listed in the event (the engine locks them and looks up closures)."""
    return [p.player_id for p in event.players]


def state_keys(event: EventFinished) -> list[StateKey]:
    """One FIDE state per listed player, in the event's rating type; in rapid and blitz also his standard
    one, which rates a player who has no rating of that type (read always, not only when the other is
    missing: a close earlier in the same batch may have just delisted it)."""
    keys = [key(p.player_id, event.rating_type) for p in event.players]
    if event.rating_type != "standard":
        keys += [key(p.player_id, "standard") for p in event.players]
    return keys


def _check(event: EventFinished) -> None:
    if event.kind != "fide":
        raise ValueError(f"event {event.competition_id}: kind {event.kind!r} is not fide")
    if event.rating_type not in CATEGORIES:
        raise ValueError(f"event {event.competition_id}: rating_type {event.rating_type!r}")
    ids = [p.player_id for p in event.players]
    if len(set(ids)) != len(ids):
        raise ValueError(f"event {event.competition_id}: a player is listed more than once")
    listed = set(ids)
    for g in event.games:
        if g.white == g.black or g.white not in listed or g.black not in listed or g.result not in SCORES:
            raise ValueError(f"event {event.competition_id}: bad game in round {g.round}")


def _standard_rating(states: Mapping[StateKey, RatingState], pid: str, list_month: str,
                     params: FideParams) -> int | None:
    """His standard rating on that list, if he is listed in standard."""
    return rating_on_list(view(states.get(key(pid, "standard"))), list_month, params)


def _open_period(v: View, before: RatingState, period: str, birth: int | None, year: int,
                 params: FideParams) -> View:
    """A listed player's first game of a period: K fixed for the period (section 8.3.3; junior by the
    year the game is played), an imported list's K first (docs/rules.md#fide: the K of the next period),
    used once."""
    return v._replace(period=max(period, _after_lists(v)), k=next_k(v, before, birth, year, params), k_next=None,
                      n=0, hundredths=0)


def next_k(v: View, state: RatingState, birth: int | None, year: int, params: FideParams = PARAMS) -> int:
    """The K his next period is rated with, fixed at its first game (section 8.3.3; junior by that game's
    year): an imported list's K first (docs/rules.md#fide), else by his published rating, peak and games."""
    if v.k_next is not None:
        return v.k_next
    return k_factor(v.published, state.peak, max(state.games, v.games_at_least), birth, year, params,
                    ever_2300=v.ever_2300, ever_2400=v.ever_2400)


def _after_lists(v: View) -> str:
    """The first list after the latest one he is on: an event that arrives after its own list came out
    goes to the next one, never rewriting a published list (docs/rules.md#fide: rated into the open period)."""
    latest = v.lists[-1][0] if v.lists else BEFORE_LISTS
    if latest == BEFORE_LISTS:
        return BEFORE_LISTS
    year, month = _next_month(int(latest[:4]), int(latest[5:7]))
    return f"{year:04d}-{month:02d}"


def rate_event(
    event: EventFinished,
    states: Mapping[StateKey, RatingState],
    closed: Mapping[str, float] = {},  # noqa: B006 - read-only
    params: FideParams = PARAMS,
) -> Outcome:
    """Rate one FIDE event: periods closed first (one change each), then one change per player rated.

    Changes come sorted by player_id, a player's close before his event change.
    """
    _check(event)
    if not event.rated:
        return Outcome(unrated_reason="casual")
    cat = event.rating_type
    at = event.finished_at
    period = event_period(event, params)
    in_force = list_in_force(event)
    births = {p.player_id: getattr(p, "birth_year", None) for p in event.players}
    ids = sorted(p for p in births if p not in closed)
    changes: dict[str, list[RatingChange]] = {pid: [] for pid in ids}

    # 1. Close every participant's open period of an earlier list.
    current: dict[str, RatingState | None] = {}
    for pid in ids:
        st = states.get(key(pid, cat))
        v = view(st)
        if st is not None and v.published is not None and v.period is not None and v.period < period:
            after = close_period(st, None, params)  # no game of his: his last played time stays
            changes[pid].append(change(key(pid, cat), st, after))
            st = after
        # The list of 2024-03 came out before this event's: a rating from before it gets the raise first.
        if st is not None and period > params.raise_list and (
                up := raise_change(key(pid, cat), st, params)) is not None:
            changes[pid].append(up)
            st = up.after
        current[pid] = st
    # The ratings of the list in force at the event's start (section 7.1.3; docs/rules.md#fide), for the
    # players listed now: one delisted since that list (by step 1, say) is an unrated player again and
    # pools his games (section 7.2.1), so nobody is rated against a rating he no longer has.
    pub = {pid: rating_on_list(v, in_force, params) if (v := view(current[pid])).published is not None else None
           for pid in ids}
    # Rapid and blitz: no rating of the type, a standard rating: rated with it (FIDE Rapid and Blitz
    # Rating Regulations, unrated players; docs/rules.md#fide).
    standard = {pid: _standard_rating(states, pid, in_force, params) for pid in ids
                if cat != "standard" and view(current[pid]).published is None}
    pub.update({pid: r for pid, r in standard.items() if r is not None})

    # 2. The games, against the published ratings (after the closes).
    rated: dict[str, list[tuple[int, int]]] = {pid: [] for pid in ids}  # (score, PD) in hundredths
    pooled: dict[str, list[list]] = {pid: [] for pid in ids}  # [opponent rating, score]
    why: dict[str, str] = {}  # a reason one of his games did not count, for a player left unchanged
    for g in event.games:
        w, b = g.white, g.black
        if w in closed or b in closed:
            for pid in (w, b):
                why.setdefault(pid, "closed_account" if pid in closed else "opponent_closed")
            continue
        sw, sb = SCORES[g.result]
        rw, rb = pub[w], pub[b]
        if rw is None and rb is None:
            why.setdefault(w, "unrated_opponent")
            why.setdefault(b, "unrated_opponent")
            continue
        if rw is None:
            pooled[w].append([rb, sw / 100, period])
            why.setdefault(b, "unrated_opponent")
            continue
        if rb is None:
            pooled[b].append([rw, sb / 100, period])
            why.setdefault(w, "unrated_opponent")
            continue
        if game_unrated(rw, rb, cat, at, params):
            why.setdefault(w, "rating_gap_600")
            why.setdefault(b, "rating_gap_600")
            continue
        rated[w].append((sw, expected_hundredths(rw, rb, cat, at, params)))
        rated[b].append((sb, expected_hundredths(rb, rw, cat, at, params)))

    # 3. Each player's change.
    for pid in ids:
        st = current[pid]
        v = view(st)
        birth = births[pid] if births[pid] is not None else v.birth_year
        before = st if st is not None else RatingState(0.0)
        if standard.get(pid) is not None:  # starts from his standard rating: a listed rating, no pool
            # (on every list until his own first close, as an import: the events he plays meanwhile,
            # whatever list they started under, rate him with it as this one does)
            v = v._replace(published=standard[pid], period=None, k=None, n=0, hundredths=0, pool=[],
                           lists=((in_force, standard[pid]),))
        games = rated[pid] if v.published is not None else pooled[pid]
        if not games:
            continue  # why[pid] says why (or he played no game)
        last_at = at if before.last_at is None else max(before.last_at, at)
        if v.published is not None:
            if v.period is None:
                v = _open_period(v, before, period, birth, datetime.fromtimestamp(at, UTC).year, params)
            v = v._replace(
                n=v.n + len(games), hundredths=v.hundredths + sum(s - e for s, e in games), birth_year=birth,
                inactive=False,  # his next rated game makes him active again (docs/rules.md#fide)
                inactive_until=at if v.inactive else v.inactive_until,
            )
            after = RatingState(
                float(live_rating(v, params)),
                None,
                None,
                before.games + len(games),
                before.peak,
                last_at,
                before.version + 1,
                _extra(v),
            )
        else:
            if params.disregard_first_zero_score and not v.pool and sum(g[1] for g in games) == 0:
                why[pid] = "zero_score_first_event"  # disregarded (the regulations' initial ratings): nothing pooled, no change
                continue
            v = v._replace(pool=recent_pool(v.pool, period, params) + games, birth_year=birth, inactive=False)
            rating, peak = before.rating, before.peak
            if len(v.pool) >= params.first_rating_games:
                ru = first_rating(v.pool, params)
                # A first rating of the period of 2024-03 or before is published from 1000 (that list
                # raises it); one of a later period, from 1400 and already after the raise.
                after_raise = period > params.raise_list
                if ru >= (params.listed_from if after_raise else params.listed_from_before):
                    # published at the end of this event (docs/rules.md#fide): it rates him in every event
                    # after it, whatever list that one started under
                    since = max(in_force, params.raise_list) if after_raise else in_force
                    v = v._replace(published=ru, period=None, k=None, n=0, hundredths=0, pool=[],
                                   lists=((since, ru),))
                    rating = float(ru)
                    peak = rating if peak is None else max(peak, rating)
            after = RatingState(
                rating, None, None, before.games + len(games), peak, last_at, before.version + 1, _extra(v)
            )
        changes[pid].append(change(key(pid, cat), before, after))

    out = tuple(ch for pid in ids for ch in changes[pid])
    left_out = tuple(
        (pid, "closed_account" if pid in closed else why.get(pid, "no_games"))
        for pid in sorted(births) if not changes.get(pid)
    )
    if not out:  # each player's own reason, kept for support (rating-worker message)
        return Outcome(unrated_reason="no_rated_games", left_out=left_out)
    return Outcome(changes=out, left_out=left_out)


def predict(event: EventFinished, states: Mapping[StateKey, RatingState], params: FideParams = PARAMS
            ) -> tuple[Prediction, ...]:
    """White's expected score of each game of a rated event between two players with a published rating of the
    type (section 8.1.2's table with the 400-point rule), from the list in force at the event's start, against
    his score; rapid/blitz's 600-point rule leaves a game out, and so does an unrated player, whose rating the
    event makes. (Closed accounts are not known here: `evaluate` scores only the messages applied.)"""
    if not event.rated or event.rating_type not in CATEGORIES:
        return ()
    cat, at, in_force = event.rating_type, event.finished_at, list_in_force(event)
    rating = {p.player_id: rating_on_list(v, in_force, params)
              if (v := view(states.get(key(p.player_id, cat)))).published is not None else None
              for p in event.players}
    out = []
    for g in event.games:
        w, b = rating.get(g.white), rating.get(g.black)
        if w is None or b is None or g.result not in SCORES or game_unrated(w, b, cat, at, params):
            continue
        out.append(Prediction(cat, expected_score(w, b, cat, at, params), SCORES[g.result][0] / 100))
    return tuple(out)


def hypothetical_game(rating_type: str, white: str, black: str, result: str, at: float) -> EventFinished:
    """A rated FIDE event of one game of that rating type, started and finished at `at` (points at stake,
    worker.engine.preview): it goes to the list of its end date, rated with the list in force then; each
    player's birth year is the one stored. Its change of a player's live rating is what the game is worth
    to him: K (fixed for his period, capped over its games) x (score - expected score, 400-point rule)."""
    return EventFinished("preview", "fide", True, at, (EventPlayer(white), EventPlayer(black)),
                         (EventGame(1, white, black, result),), rating_type=rating_type, started_at=at)


def imported_state(imp, version: int, params: FideParams = PARAMS) -> RatingState:
    """A rating.imported's state: a published list rating with no open period (`view` reads a state
    without "published" so), with what the list says of K (docs/rules.md#fide): its `k` is the K of the next
    period; a K of 10 means ever 2400 (and so 2300); a K of 10 or 20 without `games` means at least 30
    games played (K 40 for a new player never follows from it)."""
    extra: dict[str, Any] = {}
    if imp.birth_year is not None:
        extra["birth_year"] = imp.birth_year
    k = getattr(imp, "k", None)
    if k is not None:
        extra["k_next"] = k
    ever_2400 = bool(getattr(imp, "ever_2400", None)) or k == params.k_top
    if ever_2400:
        extra["ever_2400"] = True
    if ever_2400 or getattr(imp, "ever_2300", None):
        extra["ever_2300"] = True
    if k in (params.k_top, params.k_default) and imp.games is None:
        extra["games_at_least"] = params.new_player_games
    extra["lists"] = [[month_of(imp.imported_at), round_half_away(imp.rating)]]  # the list of its month
    return RatingState(float(imp.rating), None, None, imp.games or 0, imp.peak, imp.last_played_at, version,
                       extra or None)


def carried_lists(stored: RatingState | None, imported: RatingState, params: FideParams = PARAMS) -> RatingState:
    """An import is the rating on one list: the stored ratings of earlier lists stay (docs/rules.md#fide), so
    that an event that started under an earlier list is still rated with it."""
    if stored is None:
        return imported
    ((month, rating),) = imported.extra["lists"]
    lists = with_list(view(stored), month, rating, params)
    return imported._replace(extra={**imported.extra, "lists": [list(e) for e in lists]})


def _noon(year: int, month: int, day: int) -> float:
    return float(calendar.timegm((year, month, day, 12, 0, 0)))


def _month_before(months: int) -> str:
    """The month of `inactive_before` for the December 2026 list (checks the docs' example)."""
    return month_of(inactive_before("2026-12", FideParams(inactive_after_months=months)))


def _month_name(period: str) -> str:
    return calendar.month_name[int(period[5:7])]


def _the_2024_change() -> str:
    """FIDE's change of 1 March 2024, with its numbers computed by the engine."""
    p = PARAMS
    rows = [[r, raised(r)] for r in (p.raise_from, 1200, 1500, 1801, p.raise_below, 2100)]
    return (
        f"### The change of 1 March 2024\n\nFrom the list of {_month_name(p.raise_list)} "
        f"{p.raise_list[:4]}, in standard, rapid and blitz, every published rating R from {p.raise_from} to "
        f"{p.raise_below - 1} was raised once to R + {float(p.raise_share)} × ({p.raise_below} − R), rounded as "
        f"a published rating, and the lowest rating moved from {p.listed_from_before} to {p.listed_from}. "
        "The worker applies both by list month: a period closing into that list is rated as usual, then "
        "raised; a rating of an earlier list with no such period is raised as a change of its own, at that "
        "list (or a later one) or at the player's first event of a later period. A rating is raised once. "
        "Imports of lists before it may be from 1000.\n\n"
        + table(["Published rating on the February 2024 list", "On the March 2024 list"], rows)
        + "\n\nNot modelled: the older regulations' formula for initial ratings, and their 400-point rule "
        "applied once per event. Events before March 2024 are rated with today's rules and the 1000 floor."
    )


def docs() -> str:
    """FIDE's section of docs/ratings.md: seed 001 and the regulations' numbers, every one computed by this
    module."""
    edges, low = [], 0
    for top, _ in TABLE_8_1_2:
        edges.append((low, top))
        low = top + 1
    expected = table(["Rating difference", "Higher rated: expected", "Lower rated: expected"],
                     [[f"{lo}–{hi}", f"{pd_higher(lo) / 100:.2f}", f"{1 - pd_higher(lo) / 100:.2f}"]
                      for lo, hi in edges])
    win, draw, loss = (20 * (s - expected_score(1500, 1700)) for s in (1.0, 0.5, 0.0))
    k_rows = [["reached 2400 once", k_factor(2350, 2405, 100, None, 2026)],
              ["junior (until the end of the year of the 18th birthday), never rated 2300 or more",
               k_factor(1900, None, 100, 2010, 2026)],
              ["junior rated 2310 once, 2250 now (the peak decides)", k_factor(2250, 2310, 100, 2010, 2026)],
              ["fewer than 30 games", k_factor(1900, None, 12, None, 2026)],
              ["everyone else", k_factor(1900, None, 100, None, 2026)],
              ["K 20 with 39 games in the period (K × n at most 700)", capped_k(20, 39)]]
    pool = [(1900, 1.0), (1900, 1.0), (1900, 0.5), (1900, 0.5), (1907, 0.0)]
    return "\n\n".join([
        "## FIDE (standard, rapid, blitz)",
        "### Expected score (table 8.1.2; a difference over 400 counts as 400)", expected,
        "### K", table(["Player", "K"], k_rows),
        "An imported list rating carries the list's K (`k`: the K of the player's next period), and "
        "`ever_2300` / `ever_2400`; a K of 10 counts as ever 2400, a K of 10 or 20 without `games` as at least "
        "30 games.",
        f"### Example\n\n1500 against 1700 with K 20: expected {expected_score(1500, 1700):.2f}; a win "
        f"{signed(win)}, a draw {signed(draw)}, a loss {signed(loss)}. Changes are summed over the month and "
        f"rounded half away from zero when it closes: −2.5 becomes {signed(round_half_away(-2.5))}.",
        f"### First rating\n\n5 games, 3 points, opponents summing to {sum(r for r, _ in pool)}, with two "
        f"hypothetical 1800 draws: {first_rating(pool)} (published only from 1400, at most 2200). The games "
        f"pooled for it span at most {PARAMS.first_rating_months} months: older ones leave the pool.",
        "### Rating periods\n\nLists are published on the 1st of each month and close 3 days before: an event "
        f"ending on 26 February 2026 goes to the {_month_name(list_period(_noon(2026, 2, 26)))} list, one ending "
        f"on 27 February to the {_month_name(list_period(_noon(2026, 2, 27)))} list (unless it names its "
        "`rating_period`). Its expected scores use the list in force when it started (`started_at`): a "
        "tournament from 25 November to 3 December is rated with the November ratings even after the December "
        "list came out. A player's open period is closed, rounded, when he plays an event of a later list, "
        "and for everyone when the list itself is published (`rating.period_closed`, `rating-worker fide "
        f"close-period`): then ratings under 1400 are delisted, and a listed player with no rated game since "
        f"{_month_name(_month_before(12))} 2025 (12 months before the December 2026 list) is marked inactive, "
        "until his next game.",
        "### Rapid and blitz newcomers\n\nA player without a rapid (blitz) rating who holds a standard rating "
        "is rated with it, and his opponents' games against him are rated; his own rapid (blitz) rating starts "
        "from it and is published at his first close.",
        _the_2024_change(),
    ])


def declare(chosen: ParameterSet) -> RatingSystem:
    """FIDE as this parameter set declares it (worker.ratings.parameters)."""
    p = chosen.params
    return RatingSystem(
        NAME, ("event.finished/fide",), players, state_keys, partial(rate_event, params=p), title="FIDE",
        docs=docs, categories=CATEGORIES, shown_rating=listed_rating, parameters=chosen.name,
        imports=Imports(partial(imported_state, params=p), lambda imp, states: RatingState(0.0),
                        carried=partial(carried_lists, params=p)),
        sweep=Sweep("rating.period_closed", partial(close_list, params=p), partial(list_concerns, params=p)),
        inactive=is_inactive, starts_unrated=True,  # no rating before the first
        established=lambda state: is_listed(state) and not is_inactive(state),
        predict=partial(predict, params=p), hypothetical_game=hypothetical_game,
    )


#: Every set of FIDE's parameters, each in effect from its date on (docs/ratings.md lists them).
PARAMETER_SETS = (
    ParameterSet("fide-1", None, PARAMS, "the FIDE Rating Regulations' values (docs/rules.md#fide)."),
)
SYSTEM = declare(PARAMETER_SETS[-1])
