"""Fair-play corrections: `account.closed` with reason `fair_play` (docs/rules.md#fair-play).

For every rated CSR game the closed account played with closed_at - 30 days <= finished_at <=
closed_at, the opponents who lost points get them back: per (victim, category) the sum of the
negative changes in those games (after the floor, as kept in the history), at most 150, added to
the current rating. RD, volatility, games and the last-played time are unchanged (a refund is not a
game); the floor and peak rules then apply. The account itself is frozen from then on (`closure`).

The games come attached to the message (`AccountClosed.games`, both sides of each game): the engine
reads them from the history, so this stays a pure function of its inputs.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from worker.ratings import csr
from worker.ratings.inputs import AccountClosed, GameSide
from worker.ratings.parameters import ParameterSet
from worker.ratings.state import Outcome, RatingState, StateKey
from worker.ratings.system import HistoryKept, HistoryQuery, RatingSystem

FAIR_PLAY = "fair_play"
DAY = 86400.0


@dataclass(frozen=True, slots=True)
class FairPlayParams:
    """docs/rules.md#fair-play: each a documented setting."""

    window_days: float = 30.0
    refund_cap: float = 150.0
    system: str = csr.NAME  # the system whose games are refunded
    cause_type: str = "game.finished"


PARAMS = FairPlayParams()


def window(closure: AccountClosed, params: FairPlayParams = PARAMS) -> tuple[float, float]:
    """The finished_at range of the games refunded, both ends included (epoch seconds)."""
    return closure.closed_at - params.window_days * DAY, closure.closed_at


def players(closure: AccountClosed, params: FairPlayParams = PARAMS) -> list[str]:
    """The account and, once its games are attached, every opponent that may be refunded."""
    return sorted({closure.player_id} | {v for v, _ in losses(closure, params=params)})


def state_keys(closure: AccountClosed, params: FairPlayParams = PARAMS) -> list[StateKey]:
    return sorted(StateKey(v, params.system, cat) for v, cat in losses(closure, params=params))


def games_in_window(closure: AccountClosed, params: FairPlayParams = PARAMS) -> dict[tuple[str, str], list[GameSide]]:
    """The attached games the account played inside the window, by cause (source, id): both sides."""
    since, until = window(closure, params)
    by_game: dict[tuple[str, str], list[GameSide]] = {}
    for side in closure.games:
        if since <= side.at <= until:
            by_game.setdefault((side.cause_source, side.cause_id), []).append(side)
    return {g: sides for g, sides in by_game.items() if any(s.player_id == closure.player_id for s in sides)}


def losses(
    closure: AccountClosed, closed: Mapping[str, float] = {}, params: FairPlayParams = PARAMS  # noqa: B006
) -> dict[tuple[str, str], float]:
    """Per (victim, category): the sum of the victim's negative changes in the window's games (< 0).

    A victim closed for fair play himself is not refunded.
    """
    lost: dict[tuple[str, str], float] = {}
    for sides in games_in_window(closure, params).values():
        for side in sides:
            if side.player_id == closure.player_id or side.player_id in closed or side.delta >= 0:
                continue
            k = (side.player_id, side.category)
            lost[k] = lost.get(k, 0.0) + side.delta
    return lost


def refunded_state(before: RatingState, points: float, params: csr.CsrParams = csr.PARAMS) -> RatingState:
    """The rating plus the refund; the floor and peak rules apply as after a game (docs/rules.md#csr)."""
    rating = csr.apply_floor(before.rating, before.rating + points, before.peak, params)
    peak = before.peak
    if not csr.is_provisional(before.rd, params):
        peak = rating if peak is None else max(peak, rating)
    return before._replace(rating=rating, peak=peak, version=before.version + 1)


def _seed_csr(t: float) -> csr.CsrParams:
    return csr.PARAMS


def rate_closure(
    closure: AccountClosed,
    states: Mapping[StateKey, RatingState],
    closed: Mapping[str, float] = {},  # noqa: B006 - read-only
    params: FairPlayParams = PARAMS,
    csr_rules: Callable[[float], csr.CsrParams] = _seed_csr,
) -> Outcome:
    """Refund the account's victims and freeze it; any other reason, or a second closure, changes nothing.
    The refunded ratings follow CSR's rules (floor, peak) with `csr_rules(closed_at)`: CSR's parameters in
    effect at the closure (the registry passes them; the seed's table when called alone)."""
    if closure.reason != FAIR_PLAY:
        return Outcome(unrated_reason="not_fair_play")
    if closure.player_id in closed:
        return Outcome(unrated_reason="already_closed")
    changes = []
    rules = csr_rules(closure.closed_at)
    for (victim, cat), lost in sorted(losses(closure, closed, params).items()):
        key = StateKey(victim, params.system, cat)
        before = states.get(key)
        if before is None:  # no stored rating to refund (cannot happen for a rated game's loser)
            continue
        after = refunded_state(before, min(params.refund_cap, -lost), rules)
        changes.append(csr.change(key, before, after, rules))
    return Outcome(changes=tuple(changes), closure=(closure.player_id, closure.closed_at))


def history_query(closure: AccountClosed, params: FairPlayParams = PARAMS) -> HistoryQuery | None:
    """The games a closure for fair play refunds (its window of the account's rated games); None for
    the other reasons, which change nobody's rating."""
    if closure.reason != FAIR_PLAY:
        return None
    since, until = window(closure, params)
    return HistoryQuery(closure.player_id, params.system, params.cause_type, since, until)


def with_games(closure: AccountClosed, games: tuple[GameSide, ...]) -> AccountClosed:
    return dataclasses.replace(closure, games=games)


#: The systems whose parameters a refund applies: CSR's floor and provisional rules, as in effect at the closure.
DEPENDS_ON = (csr.NAME,)


def declare(chosen: ParameterSet, params_of: Callable[[str, float], Any] | None = None) -> RatingSystem:
    """Fair-play corrections as this parameter set declares them (worker.ratings.parameters), with CSR's rules
    from `params_of` (the registry's: CSR's set in effect at the closure; None: the seed's). Not a rating of
    its own: its changes are the refunded CSR ratings (no categories, no imports); a refund's record names the
    fair-play set, and the CSR set it applied is the one in effect at the closure's time."""
    p = chosen.params
    csr_rules = _seed_csr if params_of is None else partial(params_of, csr.NAME)
    return RatingSystem(
        "fairplay", ("account.closed",), partial(players, params=p), partial(state_keys, params=p),
        partial(rate_closure, params=p, csr_rules=csr_rules), cause_time=operator.attrgetter("closed_at"),
        history=partial(history_query, params=p), with_history=with_games, parameters=chosen.name,
        history_kept=HistoryKept(p.system, p.cause_type, p.window_days * DAY),
    )


#: Every set of the fair-play corrections' parameters, each in effect from its date on (docs/ratings.md).
PARAMETER_SETS = (
    ParameterSet("fairplay-1", None, PARAMS, "the values of docs/rules.md#fair-play."),
)
SYSTEM = declare(PARAMETER_SETS[-1])
