"""US Chess: Glickman & Doan's rating system (seed 004; "The US Chess Rating System"; docs/rules.md#us-chess).

One rated event updates each participant's rating in every category its time control rates
(`regular`, `quick`, `blitz`; 30..65 minutes + increment is dual: Quick and Regular, each from its own
state). Per category, the five steps of Glickman & Doan's rating algorithm:

1. initial rating of an unrated player: from his other US Chess rating where he has one (docs/rules.md#us-chess: Quick
   from Regular, else Blitz; Blitz from Quick, else Regular; Regular from Quick, else Blitz; from Regular
   on min(N, 10) games, from Quick or Blitz on 0), else 50 x age for ages up to 26 (at least 100), else
   1300; 0 games;
2. N' = min(N, N*(R0));
3. for players with N = 0: a first estimate by the special formula with N' := 1 (at least 100),
   used only as their rating as an opponent in step 4;
4. first pass for everyone (special or standard formula, bonus included; at least 100): opponents
   enter with their pre-event rating, or their step-3 estimate when unrated;
5. second pass, the same from the same own prior, with every opponent's step-4 rating (at least 100);

then the floors (absolute 100, personal, earned from the peak), from the counters and the peak as they
were before the event. Everything here is a pure function of its arguments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import NamedTuple

from worker.ratings.doctext import table
from worker.ratings.inputs import EventFinished, EventGame, EventPlayer
from worker.ratings.parameters import ParameterSet
from worker.ratings.state import Outcome, RatingChange, RatingState, StateKey
from worker.ratings.system import Imports, Prediction, RatingSystem

NAME = "uscf"
CATEGORIES = ("regular", "quick", "blitz")
SCORES = {"1-0": (1.0, 0.0), "0-1": (0.0, 1.0), "1/2-1/2": (0.5, 0.5)}

# Epoch seconds (UTC) of the days the bonus multiplier changed (US Chess's announcements, docs/rules.md#sources).
FEB_1_2023 = 1675209600.0  # 2023-02-01T00:00:00Z
JAN_1_2025 = 1735689600.0  # 2025-01-01T00:00:00Z


@dataclass(frozen=True, slots=True)
class UscfParams:
    """Every constant of Glickman & Doan's system and docs/rules.md#us-chess as a named setting."""

    # Bonus multiplier B by event end (finished_at): (from epoch seconds, B), ascending; the first applies
    # to everything before the second.
    bonus_schedule: tuple[tuple[float, float], ...] = ((-math.inf, 14.0), (FEB_1_2023, 12.0), (JAN_1_2025, 10.0))
    bonus_min_games: int = 3
    bonus_max_meetings: int = 2  # no opponent met more than twice
    bonus_min_rounds: int = 4  # m' = max(m, 4)
    # N* = 50 / sqrt(a + b (c - R0)^2) up to 2355, else 50
    n_star_a: float = 0.662
    n_star_b: float = 0.00000739
    n_star_c: float = 2569.0
    n_star_top: float = 2355.0
    n_star_max: float = 50.0
    k_numerator: float = 800.0
    # dual-rated Regular K: factor 6.5 - 0.0025 R0 above 2200, 0.25 from 2500
    dual_from: float = 2200.0
    dual_a: float = 6.5
    dual_b: float = 0.0025
    dual_full_from: float = 2500.0
    dual_min_factor: float = 0.25
    # special formula
    special_max_games: int = 8  # N <= 8
    special_width: float = 400.0
    special_epsilon: float = 1e-7
    special_knot_tolerance: float = 1e-6  # |M - Ri| <= 400 + this (float noise at a knot must not drop it)
    special_cap: float = 2700.0
    special_start: str = "closed_form"  # or "prior" (the published text leaves the start open)
    step3_n_eff: float = 1.0
    # initial ratings (docs/rules.md#us-chess)
    per_year_of_age: float = 50.0
    start_from_regular_games: int = 10  # a first Quick/Blitz rating from Regular: on min(N, 10) games
    max_junior_age: int = 26
    adult_rating: float = 1300.0
    # floors and establishment
    absolute_floor: float = 100.0
    personal_floor_cap: float = 150.0
    personal_per_win: float = 4.0
    personal_per_draw: float = 2.0
    personal_per_event: float = 1.0
    events_min_games: int = 3  # N3 counts events with at least 3 rated games
    earned_below_peak: float = 200.0
    earned_min: float = 1200.0
    earned_max: float = 2100.0
    established_after: int = 25  # established with more than 25 games
    # time controls: minutes + increment seconds
    min_rated_total: float = 5.0
    blitz_max: float = 10.0
    dual_min: float = 30.0
    dual_max: float = 65.0


PARAMS = UscfParams()


# --- time control, keys ----------------------------------------------------------------------------


def categories_for(minutes: float | None, increment: float | None, params: UscfParams = PARAMS) -> tuple[str, ...]:
    """docs/rules.md#us-chess: under 5 none; 5..10 blitz; over 10, under 30 quick; 30..65 regular + quick; over 65 regular."""
    total = (minutes or 0) + (increment or 0)
    if total < params.min_rated_total:
        return ()
    if total <= params.blitz_max:
        return ("blitz",)
    if total < params.dual_min:
        return ("quick",)
    if total <= params.dual_max:
        return ("regular", "quick")
    return ("regular",)


def is_dual(minutes: float | None, increment: float | None, params: UscfParams = PARAMS) -> bool:
    return len(categories_for(minutes, increment, params)) == 2


def event_categories(event: EventFinished, params: UscfParams = PARAMS) -> tuple[str, ...]:
    return categories_for(event.time_control_minutes, event.time_control_increment, params)


def key(player_id: str, category: str) -> StateKey:
    return StateKey(player_id, NAME, category)


def players(event: EventFinished) -> list[str]:
    """Every player listed in the event (the engine locks them and looks up closures)."""
    return [p.player_id for p in event.players]


def state_keys(event: EventFinished, params: UscfParams = PARAMS) -> list[StateKey]:
    """One state per listed player per category the event rates, then his other categories: a first
    rating in one type starts from the others (read always, so that a batch rates as one message at a
    time would: an earlier message of the batch may have created the rating this one starts from)."""
    cats = event_categories(event, params)
    if not cats:  # not rated (under 5 minutes): nothing to read
        return []
    others = [c for c in CATEGORIES if c not in cats]
    return [key(p.player_id, c) for p in event.players for c in cats] + [
        key(p.player_id, c) for p in event.players for c in others]


def rated_games(event: EventFinished, closed: Mapping[str, float] = {}) -> list:  # noqa: B006 - read-only
    """The event's games without those of accounts closed for fair play."""
    return [g for g in event.games if g.white not in closed and g.black not in closed]


def unrated_reason(
    event: EventFinished, closed: Mapping[str, float] = {}, params: UscfParams = PARAMS  # noqa: B006 - read-only
) -> str | None:
    """casual (rated false), too_fast (minutes + increment under 5), no_games (none left to rate)."""
    if not event.rated:
        return "casual"
    if not event_categories(event, params):
        return "too_fast"
    if not rated_games(event, closed):
        return "no_games"
    return None


# --- formulas --------------------------------------------------------------------------------------


def expected_score(rating: float, opponent: float) -> float:
    """Glickman & Doan, winning expectancy: We = 1 / (1 + 10^(-(R - Ri)/400)), no cap."""
    return 1.0 / (1.0 + 10.0 ** (-(rating - opponent) / 400.0))


def n_star(r0: float, params: UscfParams = PARAMS) -> float:
    """Glickman & Doan: the cap on the effective number of games."""
    if r0 > params.n_star_top:
        return params.n_star_max
    return 50.0 / math.sqrt(params.n_star_a + params.n_star_b * (params.n_star_c - r0) ** 2)


def effective_games(r0: float, games: float, params: UscfParams = PARAMS) -> float:
    """N' = min(N, N*(R0))."""
    return min(float(games), n_star(r0, params))


def dual_factor(r0: float, params: UscfParams = PARAMS) -> float:
    """Glickman & Doan, K: the Regular K factor in dual-rated events: 1 to 2200, 6.5 - 0.0025 R0, 0.25 from 2500."""
    if r0 <= params.dual_from:
        return 1.0
    if r0 >= params.dual_full_from:
        return params.dual_min_factor
    return params.dual_a - params.dual_b * r0


def k_factor(n_eff: float, m: int, r0: float | None = None, dual_regular: bool = False,
             params: UscfParams = PARAMS) -> float:
    """K = 800 / (N' + m), times the dual-rated factor for a Regular rating in a dual-rated event."""
    k = params.k_numerator / (n_eff + m)
    if dual_regular and r0 is not None:
        k *= dual_factor(r0, params)
    return k


def bonus_multiplier(finished_at: float, params: UscfParams = PARAMS) -> float:
    """B by the event's end: 14 up to 2023-01-31, 12 from 2023-02-01, 10 from 2025-01-01."""
    b = params.bonus_schedule[0][1]
    for start, value in params.bonus_schedule:
        if finished_at >= start:
            b = value
    return b


def bonus_eligible(opponents: Sequence[str], params: UscfParams = PARAMS) -> bool:
    """m >= 3 and no opponent met more than twice (opponents: one id per game)."""
    if len(opponents) < params.bonus_min_games:
        return False
    counts: dict[str, int] = {}
    for o in opponents:
        counts[o] = counts.get(o, 0) + 1
    return max(counts.values()) <= params.bonus_max_meetings


def bonus(plain_change: float, m: int, multiplier: float, params: UscfParams = PARAMS) -> float:
    """max(0, K(S - E) - B sqrt(m')), m' = max(m, 4)."""
    return max(0.0, plain_change - multiplier * math.sqrt(max(m, params.bonus_min_rounds)))


class StandardResult(NamedTuple):
    expected: float
    k: float
    plain: float  # K (S - E)
    bonus: float
    rating: float


def standard_rating(
    r0: float,
    n_eff: float,
    opponents: Sequence[float],
    score: float,
    multiplier: float,
    eligible: bool,
    dual_regular: bool = False,
    params: UscfParams = PARAMS,
) -> StandardResult:
    """Glickman & Doan, the standard formula: R0 + K (S - E) (+ the bonus when eligible)."""
    m = len(opponents)
    e = math.fsum(expected_score(r0, ri) for ri in opponents)
    k = k_factor(n_eff, m, r0, dual_regular, params)
    plain = k * (score - e)
    b = bonus(plain, m, multiplier, params) if eligible else 0.0
    return StandardResult(e, k, plain, b, r0 + plain + b)


def provisional_expectancy(rating: float, opponent: float, width: float = 400.0) -> float:
    """Glickman & Doan's special formula: PWe = 0 below Ri - 400, 1 above Ri + 400, linear 0.5 + (R - Ri)/800 between."""
    d = rating - opponent
    if d <= -width:
        return 0.0
    if d >= width:
        return 1.0
    return 0.5 + d / (2.0 * width)


def old_provisional_rating(r0: float, n_eff: float, opponents: Sequence[float], score: float) -> float:
    """The old provisional formula, (N' R0 + sum Ri + 400 (W - L)) / (N' + m): the special formula's start."""
    m = len(opponents)
    return (n_eff * r0 + math.fsum(opponents) + 400.0 * (2.0 * score - m)) / (n_eff + m)


def special_rating(
    r0: float,
    n_eff: float,
    opponents: Sequence[float],
    score: float,
    history: str = "mixed",
    params: UscfParams = PARAMS,
) -> float:
    """Glickman & Doan's special formula: the rating at which the results, with the prior as N' extra games,
    are as expected.

    `history` is "wins" (every previous game won), "losses" (every one lost) or "mixed" (otherwise,
    including unrated). Returns the result capped at 2700 (not yet raised to 100).
    """
    w = params.special_width
    eps = params.special_epsilon
    m = len(opponents)
    if history == "wins":
        prior, target = r0 - w, score + n_eff
    elif history == "losses":
        prior, target = r0 + w, score
    else:
        prior, target = r0, score + n_eff / 2.0
    opps = sorted(opponents)

    def f(r: float) -> float:
        total = n_eff * provisional_expectancy(r, prior, w) if n_eff > 0 else 0.0
        return total + math.fsum(provisional_expectancy(r, ri, w) for ri in opps) - target

    knots = sorted({ri - w for ri in opps} | {ri + w for ri in opps} | {prior - w, prior + w})

    if params.special_start == "prior":
        mid = prior
    elif n_eff + m > 0:
        mid = (n_eff * prior + math.fsum(opps) + w * (2.0 * score - m)) / (n_eff + m)
    else:
        mid = r0
    fm = f(mid)
    guard = 4 * len(knots) + 16
    while fm > eps and guard > 0:
        guard -= 1
        below = [z for z in knots if z < mid]
        if not below:
            break
        za = below[-1]
        fa = f(za)
        if abs(fm - fa) < eps:
            mid = za
        else:
            step = mid - fm * (mid - za) / (fm - fa)
            mid = za if step < za else step
        fm = f(mid)
    while fm < -eps and guard > 0:
        guard -= 1
        above = [z for z in knots if z > mid]
        if not above:
            break
        zb = above[0]
        fb = f(zb)
        if abs(fm - fb) < eps:
            mid = zb
        else:
            step = mid - fm * (mid - zb) / (fm - fb)
            mid = zb if step > zb else step
        fm = f(mid)
    reach = w + params.special_knot_tolerance
    p = sum(1 for ri in opps if abs(mid - ri) <= reach)
    if n_eff > 0 and abs(mid - prior) <= reach:
        p += 1
    if p == 0:
        za = max((z for z in knots if z <= mid), default=-math.inf)
        zb = min((z for z in knots if z >= mid), default=math.inf)
        mid = min(max(r0, za), zb)
    return min(mid, params.special_cap)


def history_of(games: int, extra: Mapping | None) -> str:
    """"wins" / "losses" when N > 0 and every previous game was won / lost, else "mixed"."""
    if games <= 0 or not extra:
        return "mixed"
    if extra.get("wins", 0) == games:
        return "wins"
    if extra.get("losses", 0) == games:
        return "losses"
    return "mixed"


def uses_special(games: int, history: str, params: UscfParams = PARAMS) -> bool:
    """Glickman & Doan, when the special formula applies: N <= 8, or all previous games won or all lost."""
    return games <= params.special_max_games or history != "mixed"


def initial_rating(age: int | None, params: UscfParams = PARAMS) -> float:
    """docs/rules.md#us-chess: 50 x age up to 26 (at least 100), 1300 for older or unknown age."""
    if age is None or age > params.max_junior_age:
        return params.adult_rating
    return max(params.absolute_floor, params.per_year_of_age * age)


def age_at(age: int | None, birth_year: int | None, at: float) -> int | None:
    """`age` if given, else the event's year minus `birth_year`, else unknown."""
    if age is not None:
        return age
    if birth_year is not None:
        return datetime.fromtimestamp(at, tz=UTC).year - birth_year
    return None


def personal_floor(wins: int, draws: int, events3: int, params: UscfParams = PARAMS) -> float:
    """min(100 + 4 W + 2 D + N3, 150)."""
    return min(
        params.absolute_floor
        + params.personal_per_win * wins
        + params.personal_per_draw * draws
        + params.personal_per_event * events3,
        params.personal_floor_cap,
    )


def earned_floor(peak: float | None, params: UscfParams = PARAMS) -> float | None:
    """Floor to the hundred of (peak - 200), only from 1200, at most 2100; None without one."""
    if peak is None:
        return None
    floor = math.floor((peak - params.earned_below_peak) / 100.0) * 100.0
    if floor < params.earned_min:
        return None
    return min(floor, params.earned_max)


def _counters(extra: Mapping | None) -> tuple[int, int, int, int]:
    extra = extra or {}
    return (
        int(extra.get("wins", 0) or 0),
        int(extra.get("draws", 0) or 0),
        int(extra.get("losses", 0) or 0),
        int(extra.get("events3", 0) or 0),
    )


def floor_of(state: RatingState, params: UscfParams = PARAMS) -> float:
    """The floor that applies to a rating: max(100, personal floor, earned floor)."""
    wins, draws, _, events3 = _counters(state.extra)
    earned = earned_floor(state.peak, params)
    return max(params.absolute_floor, personal_floor(wins, draws, events3, params), earned or 0.0)


def is_established(games: int, params: UscfParams = PARAMS) -> bool:
    return games > params.established_after


# --- the event -------------------------------------------------------------------------------------


class PlayerPass(NamedTuple):
    """One player's way through the five steps in one category (for rating, tests and docs)."""

    player_id: str
    before: RatingState  # stored, or the Step-1 start
    n_eff: float
    history: str
    special: bool
    opponents: tuple[str, ...]  # one per game
    score: float
    step3: float | None
    step4: float
    step5: float
    floor: float
    final: float
    wins: int
    draws: int
    losses: int


def start_state(age: int | None, params: UscfParams = PARAMS) -> RatingState:
    return RatingState(initial_rating(age, params), None, None, 0, None, None, 0,
                       {"wins": 0, "draws": 0, "losses": 0, "events3": 0})


# docs/rules.md#us-chess: which of his other ratings a first rating in a type starts from, in order.
START_FROM = {"quick": ("regular", "blitz"), "blitz": ("quick", "regular"), "regular": ("quick", "blitz")}


def start_from_other(player_id: str, category: str, states: Mapping[StateKey, RatingState],
                     params: UscfParams = PARAMS) -> RatingState | None:
    """The start of a first rating in `category` from the player's other US Chess rating, if he has one
    (docs/rules.md#us-chess: US Chess initializes from other ratings). From Regular, based on min(N, 10) games,
    which count in the new type's N; from Quick or Blitz, on 0 games (held less reliable). `states` are
    as they were before the event: the Quick side of a dual event does not start from the Regular rating
    the same event changes. The published system's blended initialization (several sources weighted by
    staleness) replaces this once its section 2 can be cited."""
    for other in START_FROM[category]:
        st = states.get(key(player_id, other))
        if st is not None:
            games = min(st.games, params.start_from_regular_games) if other == "regular" else 0
            return RatingState(st.rating, None, None, games, None, None, 0,
                               {"wins": 0, "draws": 0, "losses": 0, "events3": 0, "started_from": other})
    return None


def _rate_once(
    r0: float, n_eff: float, history: str, special: bool, opp_ratings: Sequence[float], score: float,
    opponents: Sequence[str], multiplier: float, dual_regular: bool, params: UscfParams,
) -> float:
    if special:
        r = special_rating(r0, n_eff, opp_ratings, score, history, params)
    else:
        r = standard_rating(r0, n_eff, opp_ratings, score, multiplier, bonus_eligible(opponents, params),
                            dual_regular, params).rating
    return max(params.absolute_floor, r)


def plan_category(
    event: EventFinished,
    category: str,
    states: Mapping[StateKey, RatingState],
    closed: Mapping[str, float] = {},  # noqa: B006 - read-only
    params: UscfParams = PARAMS,
) -> dict[str, PlayerPass]:
    """The five steps of Glickman & Doan's rating algorithm for one category, per player with at least one rated game."""
    at = event.finished_at
    games = rated_games(event, closed)
    listed = {p.player_id: p for p in event.players}
    # per player: (opponent id, own score) per game, in the message's order
    played: dict[str, list[tuple[str, float]]] = {}
    for g in games:
        ws, bs = SCORES[g.result]
        played.setdefault(g.white, []).append((g.black, ws))
        played.setdefault(g.black, []).append((g.white, bs))
    ids = sorted(played)
    before: dict[str, RatingState] = {}
    for pid in ids:
        st = states.get(key(pid, category)) or start_from_other(pid, category, states, params)
        if st is None:
            p = listed.get(pid)
            st = start_state(age_at(p.age, p.birth_year, at) if p is not None else None, params)
        before[pid] = st
    r0 = {pid: before[pid].rating for pid in ids}
    n_eff = {pid: effective_games(r0[pid], before[pid].games, params) for pid in ids}
    history = {pid: history_of(before[pid].games, before[pid].extra) for pid in ids}
    special = {pid: uses_special(before[pid].games, history[pid], params) for pid in ids}
    score = {pid: math.fsum(s for _, s in played[pid]) for pid in ids}
    opponents = {pid: tuple(o for o, _ in played[pid]) for pid in ids}
    multiplier = bonus_multiplier(at, params)
    dual_regular = category == "regular" and is_dual(event.time_control_minutes, event.time_control_increment, params)

    # Step 3: unrated players (N = 0), special formula with N' := 1, against pre-event / Step-1 ratings.
    step3: dict[str, float] = {}
    for pid in ids:
        if before[pid].games == 0:
            opp = [r0[o] for o in opponents[pid]]
            step3[pid] = max(params.absolute_floor,
                             special_rating(r0[pid], params.step3_n_eff, opp, score[pid], "mixed", params))
    first_as_opponent = {pid: step3.get(pid, r0[pid]) for pid in ids}

    def one_pass(opp_rating: Mapping[str, float]) -> dict[str, float]:
        return {
            pid: _rate_once(r0[pid], n_eff[pid], history[pid], special[pid],
                            [opp_rating[o] for o in opponents[pid]], score[pid], opponents[pid],
                            multiplier, dual_regular, params)
            for pid in ids
        }

    step4 = one_pass(first_as_opponent)  # Step 4
    step5 = one_pass(step4)  # Step 5
    plans: dict[str, PlayerPass] = {}
    for pid in ids:
        floor = floor_of(before[pid], params)  # counters and peak before the event
        results = [s for _, s in played[pid]]
        plans[pid] = PlayerPass(
            pid, before[pid], n_eff[pid], history[pid], special[pid], opponents[pid], score[pid],
            step3.get(pid), step4[pid], step5[pid], floor, max(step5[pid], floor),
            results.count(1.0), results.count(0.5), results.count(0.0),
        )
    return plans


def updated_state(plan: PlayerPass, at: float, params: UscfParams = PARAMS) -> RatingState:
    """The stored state after the event: N += m, W/D/L and N3 counters, peak when established."""
    b = plan.before
    wins, draws, losses, events3 = _counters(b.extra)
    m = len(plan.opponents)
    games = b.games + m
    rating = plan.final
    peak = b.peak
    if is_established(games, params):
        peak = rating if peak is None else max(peak, rating)
    extra = dict(b.extra or {})
    extra.update(
        wins=wins + plan.wins,
        draws=draws + plan.draws,
        losses=losses + plan.losses,
        events3=events3 + (1 if m >= params.events_min_games else 0),
    )
    last_at = at if b.last_at is None else max(b.last_at, at)
    return RatingState(rating, None, None, games, peak, last_at, b.version + 1, extra)


def change(player_id: str, category: str, before: RatingState, after: RatingState,
           params: UscfParams = PARAMS) -> RatingChange:
    """provisional while N <= 25; floor: the floor that now applies (from the counters after the event)."""
    return RatingChange(key(player_id, category), before, after,
                        not is_established(after.games, params), floor_of(after, params))


def rate_event(
    event: EventFinished,
    states: Mapping[StateKey, RatingState],
    closed: Mapping[str, float] = {},  # noqa: B006 - read-only
    params: UscfParams = PARAMS,
) -> Outcome:
    """Rate one US Chess event: a change per player with a rated game, per category, by (player, category)."""
    reason = unrated_reason(event, closed, params)
    if reason is not None:
        return Outcome(unrated_reason=reason)
    at = event.finished_at
    changes = []
    for cat in event_categories(event, params):
        for pid, plan in plan_category(event, cat, states, closed, params).items():
            changes.append(change(pid, cat, plan.before, updated_state(plan, at, params), params))
    changes.sort(key=lambda c: (c.key.player_id, CATEGORIES.index(c.key.category)))
    return Outcome(changes=tuple(changes))


def predict(event: EventFinished, states: Mapping[StateKey, RatingState], params: UscfParams = PARAMS
            ) -> tuple[Prediction, ...]:
    """White's expected score of each rated game between two players rated in the category before the event
    (Glickman & Doan's winning expectancy We), per category the event rates, against his score; a player's
    first rating is made by the event itself, so his games are left out."""
    if unrated_reason(event, {}, params) is not None:
        return ()
    out = []
    for cat in event_categories(event, params):
        for g in rated_games(event):
            w, b = states.get(key(g.white, cat)), states.get(key(g.black, cat))
            if w is None or b is None or not w.games or not b.games or g.result not in SCORES:
                continue
            out.append(Prediction(cat, expected_score(w.rating, b.rating), SCORES[g.result][0]))
    return tuple(out)


#: (base minutes, increment seconds) of a time control that rates each category alone (30..65 rates two).
SAMPLE_TIME_CONTROLS = {"blitz": (5, 0), "quick": (15, 0), "regular": (90, 30)}


def hypothetical_game(cat: str, white: str, black: str, result: str, at: float) -> EventFinished:
    """A rated US Chess event of one game, finished at `at`, of a time control that rates that category alone
    (points at stake, worker.engine.preview): a one-game event, so no bonus, and a Regular game not dual. Ages
    are not known: an unrated opponent starts from his other ratings, else from 1300."""
    minutes, increment = SAMPLE_TIME_CONTROLS[cat]
    return EventFinished("preview", "uscf", True, at, (EventPlayer(white), EventPlayer(black)),
                         (EventGame(1, white, black, result),), time_control_minutes=minutes,
                         time_control_increment=increment)


def imported_state(imp, version: int) -> RatingState:
    """A rating.imported's state: the W/D/L and event counts it gives (0 where it gives none)."""
    extra = {"wins": imp.wins or 0, "draws": imp.draws or 0, "losses": imp.losses or 0, "events3": imp.events or 0}
    return RatingState(imp.rating, None, None, imp.games or 0, imp.peak, imp.last_played_at, version, extra)


def import_flags(state: RatingState, params: UscfParams = PARAMS) -> tuple[bool, float | None]:
    return state.games <= params.established_after, floor_of(state, params)


def _noon_of(day: str) -> float:
    return datetime.fromisoformat(day).replace(hour=12, tzinfo=UTC).timestamp()


def docs() -> str:
    """US Chess's section of docs/ratings.md: seed 004's tables, every number computed by this module."""
    expected = table(["You are rated higher by", "Your expected score"],
                     [[f"{d} points", f"{expected_score(1500 + d, 1500):.2f}"] for d in (0, 100, 200, 400)])
    caps = table(["Rating", "Cap on N′", "K in a 4-round event"],
                 [["2355 and above" if r == 2355 else r, f"{n_star(r):.1f}",
                   f"{k_factor(n_star(r), 4):.1f}"] for r in (400, 800, 1200, 1600, 2000, 2355)])
    opponents = (1400, 1550, 1600, 1700)
    n_eff = effective_games(1500, 40)
    pre_b = bonus_multiplier(_noon_of("2023-01-31"))
    rows = []
    for score in (2.0, 2.5, 4.0):
        r = standard_rating(1500, n_eff, opponents, score, pre_b, True)
        rows.append([score, f"{r.expected:.2f}", f"{r.k:.2f}", f"{r.plain:.1f}", f"{r.bonus:.1f}",
                     f"+{r.plain + r.bonus:.1f}"])
    example = table(["Score", "Expected", "K", "K × (score − expected)", "Bonus", "Change"], rows)
    special = special_rating(1500, effective_games(1500, 5), (500,), 1.0, "mixed")
    floors = (f"Personal floor for 3 wins, 1 draw and 10 events: {round(personal_floor(3, 1, 10))}. "
              f"Earned floor from a peak of 1941: {round(earned_floor(1941))}. "
              f"A player rated 1500 over 5 games who beats a 500 stays at {round(special)} under the special formula "
              f"(the old formula gave {round(old_provisional_rating(1500, 5, (500,), 1.0))}).")
    dual = (f"Dual-rated events (minutes + increment 30 to 65): the Regular K is multiplied by "
            f"{dual_factor(2300):.2f} at 2300 and {dual_factor(2500):.2f} from 2500.")
    regular = RatingState(1850.0, None, None, 40, None, None, 3, {"wins": 20, "draws": 0, "losses": 20, "events3": 8})
    from_regular = start_from_other("p", "quick", {key("p", "regular"): regular})
    from_quick = start_from_other("p", "blitz", {key("p", "quick"): regular})
    first = (f"A first rating in one type starts from the player's other US Chess rating (Quick from Regular, else "
             f"Blitz; Blitz from Quick, else Regular; Regular from Quick, else Blitz), as it was before the event: "
             f"Regular 1850 over 40 games gives a first Quick rating from {from_regular.rating:g} on "
             f"{from_regular.games} games; from Quick or Blitz it is based on {from_quick.games} games. Without "
             f"one: 50 × age up to 26 (at least 100), else {initial_rating(None):g}.")
    return "\n\n".join([
        "## US Chess (regular, quick, blitz)", "### Expected score", expected,
        "### Effective games and K", caps,
        "### Worked example: 1500 with 40 games, opponents 1400, 1550, 1600, 1700 (bonus multiplier "
        f"{pre_b:g}, an event before 2023-02-01)", example,
        "### Special formula and floors", floors, dual,
        "### First ratings", first,
    ])


def declare(chosen: ParameterSet) -> RatingSystem:
    """US Chess as this parameter set declares it (worker.ratings.parameters)."""
    p = chosen.params
    return RatingSystem(
        NAME, ("event.finished/uscf",), players, partial(state_keys, params=p), partial(rate_event, params=p),
        title="US Chess", docs=docs, categories=CATEGORIES, parameters=chosen.name,
        established=lambda state: is_established(state.games, p),
        imports=Imports(imported_state, lambda imp, states: RatingState(0.0), partial(import_flags, params=p)),
        starts_unrated=True,  # no rating before the first
        predict=partial(predict, params=p), hypothetical_game=hypothetical_game,
    )


#: Every set of US Chess's parameters, each in effect from its date on (docs/ratings.md lists them).
PARAMETER_SETS = (
    ParameterSet("uscf-1", None, PARAMS, "the US Chess rating system's values (docs/rules.md#us-chess)."),
)
SYSTEM = declare(PARAMETER_SETS[-1])
