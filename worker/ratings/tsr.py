"""ChesStresS TSR: Glicko-2 on agreement in Turbo Live events (seed 000 "How TSR works"; docs/rules.md#tsr).

One rated event is one weighted Glicko-2 period for every rated player (>= 10 votes, not closed for
fair play). Each player is rated against the others' *stored* pre-event values:

- field part: a comparison of agreement with each of the (at most 200) nearest other rated players by
  pre-event rating; higher by more than the draw margin is a win, lower by more a loss, else a draw;
  the comparisons together weigh 4 games, split equally;
- team part: (won + drawn / 2) / games of the player's team games, weight 1, against one virtual
  opponent whose rating and RD are the plain means of all the other rated players' stored values.

Only the player's own RD grows for his inactivity. TSR has no floor. The result does not depend on the
order of the players in the message: every sum is taken in a fixed order or exactly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Context, Decimal
from fractions import Fraction
from functools import partial
from typing import NamedTuple

from worker.ratings import csr, glicko2
from worker.ratings.doctext import plus_minus, signed, table
from worker.ratings.inputs import EventFinished, TeamGames, TurboPlayer
from worker.ratings.parameters import ParameterSet
from worker.ratings.state import Outcome, RatingChange, RatingState, StateKey
from worker.ratings.system import Imports, Prediction, RatingSystem

NAME = "tsr"
CATEGORY = "turbo"
DAY = 86400.0

# Agreements are compared as the decimals their floats print as (repr), so 0.65 - 0.64 is exactly 0.01.
# An agreement in [0, 1] prints with at most 17 significant digits down to 1e-324: 400 digits keep
# every difference exact (the context is local to this module, never the thread's).
_EXACT = Context(prec=400)


@dataclass(frozen=True, slots=True)
class TsrParams:
    """The seed's TSR parameter table; every value a documented setting (docs/rules.md#tsr)."""

    votes_needed: int = 10
    field_weight: float = 4.0  # all field comparisons together, in games
    team_weight: float = 1.0
    draw_margin: float = 0.01  # agreement difference still counted as a draw (1 percentage point)
    max_opponents: int = 200
    min_rated_players: int = 2
    # docs/rules.md#tsr: "Same Glicko-2, scale and parameters as CSR" (no White adjustment); TSR is in beta, so
    # each can still be tuned here on its own.
    start_rating: float = csr.PARAMS.start_rating
    start_rd: float = csr.PARAMS.start_rd
    start_volatility: float = csr.PARAMS.start_volatility
    tau: float = csr.PARAMS.tau
    rd_floor: float = csr.PARAMS.rd_floor
    rd_cap: float = csr.PARAMS.rd_cap  # for inactivity growth only
    provisional_above: float = csr.PARAMS.provisional_above


PARAMS = TsrParams()


class PlayerPlan(NamedTuple):
    """What one rated player is rated against in one event (for rating and for the docs' tables).

    `opponents` are the field opponents' ids in the order their encounters are summed (by player_id);
    `field` is (wins, draws, losses) against them; `field_weight` the weight of each comparison;
    `team_opponent` the virtual opponent (rating, RD) and `team_score` the team score, both None
    without team games.
    """

    player_id: str
    before: RatingState
    own_rd: float
    opponents: tuple[str, ...]
    field: tuple[int, int, int]
    field_weight: float
    team_opponent: tuple[float, float] | None
    team_score: float | None
    encounters: tuple[glicko2.Encounter, ...]


class _Rated(NamedTuple):
    player: TurboPlayer
    state: RatingState
    agreement: Decimal


def key(player_id: str) -> StateKey:
    return StateKey(player_id, NAME, CATEGORY)


def players(event: EventFinished) -> list[str]:
    """Every player listed in the event (the engine locks them and looks up closures)."""
    return [p.player_id for p in event.players]


def state_keys(event: EventFinished) -> list[StateKey]:
    """One TSR state per listed player."""
    return [key(p.player_id) for p in event.players]


def is_provisional(rd: float, params: TsrParams = PARAMS) -> bool:
    return rd > params.provisional_above


def start_state(params: TsrParams = PARAMS) -> RatingState:
    return RatingState(params.start_rating, params.start_rd, params.start_volatility)


def current_state(player_id: str, states: Mapping[StateKey, RatingState], params: TsrParams = PARAMS) -> RatingState:
    st = states.get(key(player_id))
    return st if st is not None else start_state(params)


def rated_players(
    event: EventFinished, closed: Mapping[str, float] = {}, params: TsrParams = PARAMS  # noqa: B006 - read-only
) -> list[TurboPlayer]:
    """The players rated in the event if it is rated: >= 10 votes and not closed for fair play."""
    return [p for p in event.players if p.votes >= params.votes_needed and p.player_id not in closed]


def unrated_reason(
    event: EventFinished, closed: Mapping[str, float] = {}, params: TsrParams = PARAMS  # noqa: B006 - read-only
) -> str | None:
    """docs/rules.md#tsr: casual and free events are not rated, nor an event with fewer than 2 rated players.

    A player closed for fair play is left out (neither rated nor anyone's opponent), so he does not
    count towards the 2.
    """
    if not event.rated:
        return "casual"
    if event.format == "free":
        return "free"
    if len(rated_players(event, closed, params)) < params.min_rated_players:
        return "too_few_rated_players"
    return None


def own_rd(state: RatingState, at: float, params: TsrParams = PARAMS) -> float:
    """The player's own RD, grown for the days since his last rated event (negative days count as 0)."""
    if state.last_at is None:
        return state.rd
    days = max(0.0, (at - state.last_at) / DAY)
    return glicko2.rd_after_inactivity(state.rd, state.volatility, days, params.rd_cap)


def _exact_decimal(x: float) -> Decimal:
    """The decimal a number prints as: the agreement the message meant (0.65, not 0.65000000000000002220...)."""
    if isinstance(x, int):
        return Decimal(x)
    return Decimal(repr(float(x)))


def _distance(a: float, b: float) -> tuple[float, float]:
    """|a - b| exactly, as hi + lo with hi the rounded difference (Knuth's TwoSum).

    Tuples compare as the exact differences do, so "nearest" has no rounding ties.
    """
    nb = -b
    hi = a + nb
    b_virtual = hi - a
    a_virtual = hi - b_virtual
    lo = (a - a_virtual) + (nb - b_virtual)
    if hi < 0.0 or (hi == 0.0 and lo < 0.0):
        return (-hi, -lo)
    return (hi, lo)


def _nearest(ratings: list[float], tiebreak: list[tuple[float, str]], i: int, k: int) -> list[int]:
    """The k others nearest to ratings[i] (indices); ties by smaller stored RD, then player_id.

    `ratings` is sorted, so the nearest form a run on each side of i: merge outward to the k-th
    distance, keep everyone strictly nearer and fill up from all those exactly at it. O(k + ties).
    """
    n = len(ratings)
    if n - 1 <= k:
        return [j for j in range(n) if j != i]
    if k <= 0:
        return []
    me = ratings[i]
    lo, hi = i - 1, i + 1
    d_lo = _distance(me, ratings[lo]) if lo >= 0 else None
    d_hi = _distance(me, ratings[hi]) if hi < n else None
    taken: list[tuple[tuple[float, float], int]] = []  # nondecreasing distances
    for _ in range(k):
        if d_hi is None or (d_lo is not None and d_lo <= d_hi):
            taken.append((d_lo, lo))
            lo -= 1
            d_lo = _distance(me, ratings[lo]) if lo >= 0 else None
        else:
            taken.append((d_hi, hi))
            hi += 1
            d_hi = _distance(me, ratings[hi]) if hi < n else None
    cut = taken[-1][0]
    nearer = [j for d, j in taken if d < cut]
    at_cut = [j for d, j in taken if d == cut]
    while d_lo is not None and d_lo == cut:
        at_cut.append(lo)
        lo -= 1
        d_lo = _distance(me, ratings[lo]) if lo >= 0 else None
    while d_hi is not None and d_hi == cut:
        at_cut.append(hi)
        hi += 1
        d_hi = _distance(me, ratings[hi]) if hi < n else None
    room = k - len(nearer)
    if len(at_cut) > room:
        at_cut.sort(key=tiebreak.__getitem__)
    return nearer + at_cut[:room]


def _exact_sum(values: Iterable[float]) -> Fraction:
    total = Fraction(0)
    for v in values:
        total += Fraction(v)
    return total


def plan_event(
    event: EventFinished,
    states: Mapping[StateKey, RatingState],
    closed: Mapping[str, float] = {},  # noqa: B006 - read-only
    params: TsrParams = PARAMS,
) -> dict[str, PlayerPlan]:
    """Per rated player (by player_id), what he is rated against; empty when the event is not rated."""
    if unrated_reason(event, closed, params) is not None:
        return {}
    chosen = rated_players(event, closed, params)
    if len({p.player_id for p in chosen}) != len(chosen):
        raise ValueError(f"event {event.competition_id}: a player is listed more than once")
    rated = [
        _Rated(p, current_state(p.player_id, states, params), _exact_decimal(p.agreement)) for p in chosen
    ]
    # A total order that does not depend on the message: rating, then the tie-breakers of "nearest".
    rated.sort(key=lambda r: (r.state.rating, r.state.rd, r.player.player_id))
    n = len(rated)
    ratings = [r.state.rating for r in rated]
    tiebreak = [(r.state.rd, r.player.player_id) for r in rated]
    ids = [r.player.player_id for r in rated]
    id_rank = [0] * n  # encounters are summed in player_id order
    for rank, j in enumerate(sorted(range(n), key=ids.__getitem__)):
        id_rank[j] = rank
    # Everyone has the same number of field opponents, so the same weight each.
    n_field = min(params.max_opponents, n - 1) if params.max_opponents > 0 else 0
    weight = params.field_weight / n_field if n_field else 0.0
    # Per opponent, his loss / draw / win encounter (the player's score), built once.
    as_opponent = [
        tuple(glicko2.Encounter(r.state.rating, r.state.rd, s, weight) for s in (0.0, 0.5, 1.0)) for r in rated
    ]
    margin = _exact_decimal(params.draw_margin)
    # The team opponent's means: exact sums, minus the player, divided, rounded once.
    rating_sum = _exact_sum(ratings)
    rd_sum = _exact_sum(r.state.rd for r in rated)
    at = event.finished_at
    plans: dict[str, PlayerPlan] = {}
    for i, me in enumerate(rated):
        opponents = _nearest(ratings, tiebreak, i, params.max_opponents)
        opponents.sort(key=id_rank.__getitem__)
        # Exact thresholds: a - b > margin  <=>  b < a - margin (and the same for losses).
        beaten_below = _EXACT.subtract(me.agreement, margin)
        lost_above = _EXACT.add(me.agreement, margin)
        encounters: list[glicko2.Encounter] = []
        wins = draws = losses = 0
        for j in opponents:
            theirs = rated[j].agreement
            if theirs < beaten_below:
                wins += 1
                encounters.append(as_opponent[j][2])
            elif theirs > lost_above:
                losses += 1
                encounters.append(as_opponent[j][0])
            else:
                draws += 1
                encounters.append(as_opponent[j][1])
        tg = me.player.team_games
        games = tg.won + tg.drawn + tg.lost
        team_opponent = team_score = None
        if games > 0 and n > 1:
            team_opponent = (
                float((rating_sum - Fraction(me.state.rating)) / (n - 1)),
                float((rd_sum - Fraction(me.state.rd)) / (n - 1)),
            )
            team_score = (tg.won + tg.drawn / 2.0) / games
            encounters.append(glicko2.Encounter(team_opponent[0], team_opponent[1], team_score, params.team_weight))
        pid = ids[i]
        plans[pid] = PlayerPlan(
            pid,
            me.state,
            own_rd(me.state, at, params),
            tuple(ids[j] for j in opponents),
            (wins, draws, losses),
            weight if opponents else 0.0,
            team_opponent,
            team_score,
            tuple(encounters),
        )
    return dict(sorted(plans.items()))


def field_wdl(
    event: EventFinished,
    states: Mapping[StateKey, RatingState],
    closed: Mapping[str, float] = {},  # noqa: B006 - read-only
    params: TsrParams = PARAMS,
) -> dict[str, tuple[int, int, int]]:
    """Per rated player, the field comparisons as (wins, draws, losses): the seed table's "Field (W-D-L)"."""
    return {pid: plan.field for pid, plan in plan_event(event, states, closed, params).items()}


def updated_state(plan: PlayerPlan, at: float, params: TsrParams = PARAMS) -> RatingState:
    """One weighted Glicko-2 period from the player's own grown RD; RD floor; no rating floor."""
    before = plan.before
    result = glicko2.rate(before.rating, plan.own_rd, before.volatility, plan.encounters, params.tau)
    last_at = at if before.last_at is None else max(before.last_at, at)
    return RatingState(
        result.rating,
        max(result.rd, params.rd_floor),
        result.volatility,
        before.games + 1,
        before.peak,  # TSR has no floor, so no peak is kept (None)
        last_at,
        before.version + 1,
        before.extra,
    )


def change(player_id: str, before: RatingState, after: RatingState, params: TsrParams = PARAMS) -> RatingChange:
    return RatingChange(key(player_id), before, after, is_provisional(after.rd, params), None)


def rate_event(
    event: EventFinished,
    states: Mapping[StateKey, RatingState],
    closed: Mapping[str, float] = {},  # noqa: B006 - read-only
    params: TsrParams = PARAMS,
) -> Outcome:
    """Rate one finished Turbo Live event: every rated player gets a change, sorted by player_id."""
    reason = unrated_reason(event, closed, params)
    if reason is not None:
        return Outcome(unrated_reason=reason)
    at = event.finished_at
    plans = plan_event(event, states, closed, params)
    return Outcome(
        changes=tuple(change(pid, plan.before, updated_state(plan, at, params), params) for pid, plan in plans.items()),
        left_out=tuple(sorted(
            (p.player_id, "closed_account" if p.player_id in closed else "too_few_votes")
            for p in event.players if p.player_id not in plans
        )),
    )


def imported_state(imp, version: int, params: TsrParams = PARAMS) -> RatingState:
    """A rating.imported's state: RD and volatility default to the start values."""
    rd = params.start_rd if imp.rd is None else imp.rd
    vol = params.start_volatility if imp.volatility is None else imp.volatility
    return RatingState(imp.rating, rd, vol, imp.games or 0, imp.peak, imp.last_played_at, version)


def predict(event: EventFinished, states: Mapping[StateKey, RatingState], params: TsrParams = PARAMS
            ) -> tuple[Prediction, ...]:
    """Each field comparison of a rated event, once per pair (the player first by id): his expected score
    against the other from the ratings the event is rated from (own RDs grown, the two combined as between
    two rated players), against the comparison's result (a win when his agreement is above the other's by
    more than the draw margin, a draw within it). The team part is not predicted."""
    plans = plan_event(event, states, {}, params)
    agreement = {p.player_id: _exact_decimal(p.agreement) for p in event.players}
    margin = _exact_decimal(params.draw_margin)
    out = []
    for pid, mine in plans.items():
        for other in mine.opponents:
            if other < pid and pid in plans[other].opponents:
                continue  # the pair, seen from the other's side already
            theirs = plans[other]
            rd = math.hypot(mine.own_rd, theirs.own_rd)
            expected = glicko2.expected_score(mine.before.rating, theirs.before.rating, rd)
            ahead = _EXACT.subtract(agreement[pid], agreement[other])
            observed = 1.0 if ahead > margin else 0.0 if -ahead > margin else 0.5
            out.append(Prediction(CATEGORY, expected, observed))
    return tuple(out)


def import_flags(state: RatingState, params: TsrParams = PARAMS) -> tuple[bool, float | None]:
    return state.rd > params.provisional_above, None


_EXAMPLE_EVENT = [  # (player, agreement, votes, team W-D-L, TSR before or None for new, days since last event)
    ("Anna", 0.72, 31, (2, 0, 1), None, None),
    ("Ben", 0.65, 28, (1, 0, 2), (1620.0, 90.0), 3),
    ("Cleo", 0.645, 25, (2, 0, 1), (1480.0, 120.0), 10),
    ("Dev", 0.50, 12, (1, 0, 2), (1550.0, 70.0), 1),
    ("Eve", 0.80, 9, (2, 0, 1), None, None),
]


def _parameters_table() -> str:
    t = PARAMS
    return table(["TSR parameter", "Value"], [
        ["Votes needed to be rated in an event", t.votes_needed],
        ["Weight of the field comparisons (all together)", f"{t.field_weight:g} games"],
        ["Weight of the team result", f"{t.team_weight:g} game"],
        ["Agreement difference counted as a draw", f"up to {t.draw_margin * 100:g} percentage point"],
        ["Most opponents compared per player", t.max_opponents],
        ["Rated players needed in an event", t.min_rated_players],
    ])


def _example_event() -> str:
    at = 30 * DAY
    accounts = tuple(TurboPlayer(name.lower(), agr, votes, TeamGames(*team)) for name, agr, votes, team, _, _ in
                     _EXAMPLE_EVENT)
    event = EventFinished("tl-example", "turbo_live", True, at, accounts, format="10min")
    states = {StateKey(name.lower(), NAME, CATEGORY): RatingState(r, rd, 0.06, 5, None, at - days * DAY, 5)
              for name, _, _, _, before, days in _EXAMPLE_EVENT if before for r, rd in [before]}
    changes = {c.key.player_id: c for c in rate_event(event, states).changes}
    plans = plan_event(event, states)
    rows = []
    for name, agr, votes, (w, d, lo), before, _ in _EXAMPLE_EVENT:
        pid = name.lower()
        start = plus_minus(*before) if before else plus_minus(PARAMS.start_rating, PARAMS.start_rd)
        if pid not in changes:
            rows.append([name, f"{agr * 100:.1f}%", votes, f"{w}-{d}-{lo}", start,
                         f"not rated (fewer than {PARAMS.votes_needed} votes)", "–", "–"])
            continue
        c, plan = changes[pid], plans[pid]
        fw, fd, fl = plan.field
        rows.append([name, f"{agr * 100:.1f}%", votes, f"{w}-{d}-{lo}", start, f"{fw}-{fd}-{fl}",
                     plus_minus(c.after.rating, c.after.rd), signed(c.delta)])
    anna = plans["anna"]
    note = (f"Anna's results: {anna.field[0]} field wins of weight {anna.field_weight:.2f} each, and a team score of "
            f"{anna.team_score:.2f} with weight {PARAMS.team_weight:g} against the others' average, "
            f"{plus_minus(*anna.team_opponent)}. Ben, Cleo and Dev last played a rated event 3, 10 and 1 days before "
            "(their own RD grows for it; as opponents they count with the values shown).")
    return table(["Player", "Agreement", "Votes", "Team games (W-D-L)", "TSR before", "Field (W-D-L)", "TSR after",
                  "Change"], rows) + "\n\n" + note


def docs() -> str:
    """TSR's section of docs/ratings.md: its parameters and an event rated by this module."""
    return "\n\n".join([
        "## TSR (Turbo Live team-vote events)\n\nThe same Glicko-2 scale and parameters as CSR, without the White "
        "adjustment. Each rated player is compared with the other rated players (a win above them by more than the "
        "draw margin) and scored on his team's results against the average of the others.", _parameters_table(),
        "### Example: a rated 10-minute event with five accounts", _example_event(),
    ])


def declare(chosen: ParameterSet) -> RatingSystem:
    """TSR as this parameter set declares it (worker.ratings.parameters)."""
    p = chosen.params
    return RatingSystem(
        NAME, ("event.finished/turbo_live",), players, state_keys, partial(rate_event, params=p), title="TSR",
        docs=docs, categories=(CATEGORY,), parameters=chosen.name, predict=partial(predict, params=p),
        established=lambda state: not is_provisional(state.rd, p),
        imports=Imports(partial(imported_state, params=p), lambda imp, states: start_state(p),
                        partial(import_flags, params=p)),
    )


#: Every set TSR's parameters have had, each in effect from its date on: the seed says TSR is in beta, its
#: weights may be tuned, every change listed with its date and the TSRs earned before it kept.
PARAMETER_SETS = (
    ParameterSet("tsr-1", None, PARAMS, "the seed's parameter table (docs/rules.md#tsr); TSR in beta."),
)
SYSTEM = declare(PARAMETER_SETS[-1])
