"""Chess Tempo problem ratings: Glicko-1 for users and problems (seed 002; docs/rules.md#chess-tempo).

Each attempt is one Glicko-1 game (Glickman, "The Glicko system") between the user and the problem, in the
attempt's mode (`standard` or `blitz`: the category; the two are separate ratings for users and for
problems). Both start at 1500 / RD 350, RD at least 50. Before the attempt the user's RD grows with
c = 10 per sqrt(day) since his last attempt in the mode (at most 350); a problem's RD never grows.
The user is rated against the problem's stored rating and RD, the problem against the user's stored
(not grown) rating and RD (docs/rules.md#common-to-all-systems).

Scores (seed 002): standard correct 1, wrong 0. Blitz: the effective time t = seconds +
seconds_after_first_move is compared with the mean and population standard deviation of the
effective times of the problem's earlier correct blitz solves: t < mean - sd scores 1.25, t <= mean
1, else mean / t; with fewer than 2 earlier correct solves a correct answer scores 1; wrong 0. The
problem scores max(0, 1 - s). A correct blitz time joins the problem's statistics after scoring.

Repeats (seed 002 "Duplicate Problem Rating Adjustment"; docs/rules.md#chess-tempo): for a user in the day's top group
(stored RD <= 110 and stored rating >= the day's threshold, see `top_threshold`), the gain of a
correct attempt on a problem he attempted before in that mode is multiplied by the repeat credit
(70, 55, 45, 35, 25, then 15 %; at least 45 % after 183 days unseen, 75 % after 365). Only a positive
change is reduced; his RD and the problem's update are never reduced.

Every state the rules keep is a `RatingState` under a `StateKey`:

    the user's rating   StateKey(user, "chesstempo", mode)                            published
    the problem         StateKey("problem:" + puzzle_id, "chesstempo-problem", mode)  internal
    the repeat record   StateKey(user, "chesstempo-seen", mode + "/" + puzzle_id)     internal
    the day's top group StateKey("top:" + YYYY-MM-DD, "chesstempo-top", mode)         internal

* User: rating, rd, games (rated attempts), last_at (the last attempt, for RD growth); no volatility,
  peak or floor; `extra` is kept as it was.
* Problem: rating, rd, games (rated attempts in the mode), last_at (not used by the rules). In blitz,
  `extra` = {"solves": n, "mean": mean, "m2": M2}: the running statistics (Welford) of the effective
  times of its correct solves; population sd = sqrt(M2 / n). None until the first correct blitz solve.
* Repeat record: games = the user's attempts at the problem in the mode so far (right or wrong),
  last_at = the latest of their times ("last seen"); rating 0.0 and no rd (meaningless); `extra` None.

Problems and repeat records live under their own `system` values, so nothing that reads "chesstempo"
ratings (the top group's query, leaderboards, `rating.imported`) ever sees them; the "problem:" prefix
also keeps a problem's `player_id` apart from any user's (the store's per-player lock rows).
`is_published(key)` says which changes are a user's published `rating.changed`: in an `Outcome` the
user's change comes first, then the problem's, then the repeat record's. `extra` dicts are never
mutated: a changed one is a new dict.

Unrated (consumed, nothing changes): an account closed for fair play ("closed_account").

Where the published rules are silent (docs/rules.md#chess-tempo): `provisional` is RD > 110 (the "established" line of the top group); the
credit scales the Glicko-1 change from the stored rating (new = old + credit * gain); "last seen" is
the latest earlier attempt's time, and an attempt older than it counts 0 days unseen; the top group is
judged on the user's stored (not grown) rating and RD; a blitz attempt without its times is an error.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from functools import partial
from typing import Any

from worker.ratings import glicko1
from worker.ratings.doctext import table
from worker.ratings.inputs import PuzzleAttempted
from worker.ratings.parameters import ParameterSet
from worker.ratings.state import Outcome, RatingChange, RatingState, StateKey
from worker.ratings.system import Imports, Prediction, RatingSystem

NAME = "chesstempo"
PROBLEM_SYSTEM = "chesstempo-problem"  # internal: problems' ratings and blitz statistics
SEEN_SYSTEM = "chesstempo-seen"  # internal: (user, mode, problem) repeat records
TOP_SYSTEM = "chesstempo-top"  # internal: the top group's threshold of each UTC day and mode
PROBLEM_PREFIX = "problem:"
CATEGORIES = ("standard", "blitz")
DAY = 86400.0


@dataclass(frozen=True, slots=True)
class ChessTempoParams:
    """Every number of docs/rules.md#chess-tempo, each a documented setting."""

    # Glicko-1 (docs/rules.md#chess-tempo; Glickman, "The Glicko system"), users and problems alike.
    start_rating: float = 1500.0
    start_rd: float = 350.0
    rd_floor: float = 50.0  # minimum RD after an attempt, users and problems
    rd_cap: float = 350.0  # the user's RD growth stops here
    rd_growth_per_day: float = 10.0  # c: RD' = sqrt(RD^2 + c^2 days), users only
    provisional_above: float = 110.0  # the `provisional` flag; same line as "established"
    # Scores (seed 002 "Standard Rating" / "Blitz Rating").
    correct_score: float = 1.0
    wrong_score: float = 0.0
    blitz_bonus_score: float = 1.25  # t < mean - sd
    blitz_min_solves: int = 2  # fewer earlier correct solves: a correct answer scores correct_score
    after_first_move_extra: float = 1.0  # time after the first move counts 1 + this times
    # Repeats (seed 002 "Duplicate Problem Rating Adjustment"; docs/rules.md#chess-tempo).
    established_rd: float = 110.0  # top group: stored RD <= this
    top_percent: float = 2.0  # the top 2 % of the established users of the mode
    top_min_established: int = 50  # fewer established users: nobody is in the top group
    repeat_credits: tuple[float, ...] = (0.70, 0.55, 0.45, 0.35, 0.25, 0.15)  # 1st, 2nd, ...; last repeats
    # (days unseen, minimum credit): "at least 45 % after 183 days, 75 % after 365".
    repeat_decay: tuple[tuple[float, float], ...] = ((183.0, 0.45), (365.0, 0.75))


PARAMS = ChessTempoParams()


# --- keys -----------------------------------------------------------------------------------------


def category(attempt: PuzzleAttempted) -> str:
    """The attempt's mode is the category (docs/rules.md#chess-tempo: separate ratings for standard and blitz)."""
    if attempt.mode not in CATEGORIES:
        raise ValueError(f"Chess Tempo attempt on {attempt.puzzle_id} has mode {attempt.mode!r}")
    return attempt.mode


def user_key(player_id: str, mode: str) -> StateKey:
    return StateKey(player_id, NAME, mode)


def problem_key(puzzle_id: str, mode: str) -> StateKey:
    return StateKey(PROBLEM_PREFIX + puzzle_id, PROBLEM_SYSTEM, mode)


def seen_key(player_id: str, mode: str, puzzle_id: str) -> StateKey:
    return StateKey(player_id, SEEN_SYSTEM, mode + "/" + puzzle_id)


def is_published(key: StateKey) -> bool:
    """True for a user's rating (a `rating.changed`); False for a problem or a repeat record."""
    return key.system == NAME


def players(attempt: PuzzleAttempted) -> list[str]:
    """The one player of the attempt (the problem is rated, but it is not a player)."""
    return [attempt.player_id]


def state_keys(attempt: PuzzleAttempted) -> list[StateKey]:
    """Every state the attempt reads (and changes): the user's rating, the problem, the repeat record."""
    mode = category(attempt)
    return [
        user_key(attempt.player_id, mode),
        problem_key(attempt.puzzle_id, mode),
        seen_key(attempt.player_id, mode, attempt.puzzle_id),
    ]


def start_state(params: ChessTempoParams = PARAMS) -> RatingState:
    """A user or a problem never rated in the mode: 1500 / 350."""
    return RatingState(params.start_rating, params.start_rd)


SEEN_START = RatingState(0.0)  # never attempted: 0 attempts, never seen


# --- scores ---------------------------------------------------------------------------------------


def effective_time(
    seconds: float, seconds_after_first_move: float, params: ChessTempoParams = PARAMS
) -> float:
    """Seed 002 "Note": time after the first move counts twice (10 s with 5 s after it: 15 s)."""
    return seconds + params.after_first_move_extra * seconds_after_first_move


def solve_stats(extra: Mapping[str, Any] | None) -> tuple[int, float, float]:
    """(n, mean, population sd) of a problem's correct blitz solve times, from its `extra`."""
    if not extra or not extra.get("solves"):
        return 0, 0.0, 0.0
    n = int(extra["solves"])
    return n, float(extra["mean"]), math.sqrt(max(0.0, float(extra["m2"])) / n)


def with_solve(extra: Mapping[str, Any] | None, t: float) -> dict[str, Any]:
    """A new `extra` with one more correct solve time (Welford's update; `extra` is not touched)."""
    n = int(extra.get("solves", 0)) if extra else 0
    mean = float(extra["mean"]) if n else 0.0
    m2 = float(extra["m2"]) if n else 0.0
    n += 1
    delta = t - mean
    mean += delta / n
    m2 += delta * (t - mean)
    new = dict(extra) if extra else {}
    new.update(solves=n, mean=mean, m2=m2)
    return new


def blitz_score(t: float, extra: Mapping[str, Any] | None, params: ChessTempoParams = PARAMS) -> float:
    """A correct blitz solve in effective time t against the problem's earlier correct solves (seed 002)."""
    n, mean, sd = solve_stats(extra)
    if n < params.blitz_min_solves:
        return params.correct_score
    if t < mean - sd:
        return params.blitz_bonus_score
    if t <= mean:
        return params.correct_score
    return mean / t  # t > mean >= 0, so t > 0


def user_score(attempt: PuzzleAttempted, problem: RatingState, params: ChessTempoParams = PARAMS) -> float:
    """The user's result s: standard 1 / 0; blitz by time against the problem's statistics; wrong 0."""
    if not attempt.correct:
        return params.wrong_score
    if category(attempt) == "standard":
        return params.correct_score
    return blitz_score(_blitz_time(attempt, params), problem.extra, params)


def problem_score(user_score: float) -> float:
    """Seed 002: the problem receives max(0, 1 - s), so a 1.25 gives it 0, not -0.25."""
    return max(0.0, 1.0 - user_score)


def _blitz_time(attempt: PuzzleAttempted, params: ChessTempoParams) -> float:
    if attempt.seconds is None or attempt.seconds_after_first_move is None:
        raise ValueError(f"Chess Tempo blitz attempt on {attempt.puzzle_id} has no seconds")
    return effective_time(attempt.seconds, attempt.seconds_after_first_move, params)


# --- RD growth ------------------------------------------------------------------------------------


def days_between(earlier: float | None, later: float) -> float:
    """docs/rules.md#common-to-all-systems: seconds / 86400, negative (a late message) counts as 0."""
    if earlier is None:
        return 0.0
    return max(0.0, (later - earlier) / DAY)


def own_rd(user: RatingState, at: float, params: ChessTempoParams = PARAMS) -> float:
    """The user's RD grown for the days since his last attempt in the mode (Glickman's step 1), at most 350."""
    days = days_between(user.last_at, at)
    return glicko1.rd_after_inactivity(_rd(user, params), params.rd_growth_per_day, days, params.rd_cap)


def is_provisional(rd: float | None, params: ChessTempoParams = PARAMS) -> bool:
    return rd is None or rd > params.provisional_above


# --- the top group and repeat credit --------------------------------------------------------------


def utc_day(at: float) -> int:
    """The UTC day of a message time (days since 1970-01-01): the top group is fixed per day and mode."""
    return math.floor(at / DAY)


def is_established(state: RatingState | None, params: ChessTempoParams = PARAMS) -> bool:
    """A user counts for the top group while his stored RD is at most 110."""
    return state is not None and state.rd is not None and state.rd <= params.established_rd


def top_threshold(established_ratings: Iterable[float], params: ChessTempoParams = PARAMS) -> float | None:
    """docs/rules.md#chess-tempo: the stored ratings of the n established users (RD <= 110) of a mode, at the day's first
    attempt in it. Nobody qualifies (None) if n < 50; otherwise the k-th highest rating, k = floor(0.02 n).
    """
    ratings = sorted(established_ratings, reverse=True)
    n = len(ratings)
    if n < params.top_min_established:
        return None
    k = math.floor(Fraction(params.top_percent) * n / 100)  # exact: 2 % of 50 is 1, not 0.999...
    if k < 1:
        return None
    return ratings[k - 1]


def in_top_group(
    user: RatingState | None, threshold: float | None, params: ChessTempoParams = PARAMS
) -> bool:
    """The user qualifies that day while his stored RD <= 110 and stored rating >= the threshold."""
    return threshold is not None and is_established(user, params) and user.rating >= threshold


def repeat_credit(repeats: int, days_unseen: float, params: ChessTempoParams = PARAMS) -> float:
    """The share of the gain a top user keeps on his `repeats`-th repeat (0: first attempt, full credit).

    Seed 002: 70, 55, 45, 35, 25, then 15 %; at least 45 % when unseen for 183 days, 75 % for 365.
    """
    if repeats <= 0:
        return 1.0
    credits = params.repeat_credits
    credit = credits[min(repeats, len(credits)) - 1]
    for days, minimum in params.repeat_decay:
        if days_unseen >= days:
            credit = max(credit, minimum)
    return credit


# --- rating ---------------------------------------------------------------------------------------


def unrated_reason(attempt: PuzzleAttempted, closed: Mapping[str, float] = {}) -> str | None:  # noqa: B006
    """docs/rules.md#fair-play: a fair-play-closed account is frozen."""
    if attempt.player_id in closed:
        return "closed_account"
    return None


def _stored(states: Mapping[StateKey, RatingState], key: StateKey, start: RatingState) -> RatingState:
    st = states.get(key)
    return start if st is None else st


def _rd(state: RatingState, params: ChessTempoParams) -> float:
    """The stored RD; an import that left it out takes the start value (docs/rules.md#common-to-all-systems)."""
    return params.start_rd if state.rd is None else state.rd


def _later(stored: float | None, at: float) -> float:
    return at if stored is None else max(stored, at)


def predict(
    attempt: PuzzleAttempted, states: Mapping[StateKey, RatingState], params: ChessTempoParams = PARAMS
) -> tuple[Prediction, ...]:
    """The user's expected score against the problem before the attempt, from the values it is rated from
    (his RD grown for the days since he last played, the problem's), the two RDs combined as between two
    rated players (Glickman, "The Glicko system"), against his score: 1 or 0 in standard, the blitz score
    by time (at most 1: a fast solve's 1.25 counts as 1) in blitz. Nothing for an attempt not rated."""
    if unrated_reason(attempt) is not None:
        return ()
    mode = category(attempt)
    user = _stored(states, user_key(attempt.player_id, mode), start_state(params))
    problem = _stored(states, problem_key(attempt.puzzle_id, mode), start_state(params))
    rd = math.hypot(own_rd(user, attempt.attempted_at, params), _rd(problem, params))
    expected = glicko1.expected_score(user.rating, problem.rating, rd)
    return (Prediction(mode, expected, min(1.0, user_score(attempt, problem, params))),)


def rate_attempt(
    attempt: PuzzleAttempted,
    states: Mapping[StateKey, RatingState],
    closed: Mapping[str, float] = {},  # noqa: B006 - read-only
    params: ChessTempoParams = PARAMS,
    threshold: float | None = None,
) -> Outcome:
    """Rate one Chess Tempo attempt: the user's change first, then the problem's, then the repeat record's.

    `threshold` is the top group's rating threshold of the attempt's UTC day and mode (`top_threshold`),
    None when nobody qualifies.
    """
    if attempt.system != NAME:
        raise ValueError(f"not a Chess Tempo attempt: system {attempt.system!r}")
    mode = category(attempt)
    reason = unrated_reason(attempt, closed)
    if reason is not None:
        return Outcome(unrated_reason=reason)
    at = attempt.attempted_at
    u_key = user_key(attempt.player_id, mode)
    p_key = problem_key(attempt.puzzle_id, mode)
    s_key = seen_key(attempt.player_id, mode, attempt.puzzle_id)
    user = _stored(states, u_key, start_state(params))
    problem = _stored(states, p_key, start_state(params))
    seen = _stored(states, s_key, SEEN_START)
    user_rd = _rd(user, params)
    problem_rd = _rd(problem, params)

    s = user_score(attempt, problem, params)

    # The user: own RD grown, against the problem's stored values (docs/rules.md#common-to-all-systems).
    rating, rd = glicko1.rate_one(user.rating, own_rd(user, at, params), problem.rating, problem_rd, s)
    gain = rating - user.rating
    if attempt.correct and gain > 0.0 and in_top_group(user, threshold, params):
        credit = repeat_credit(seen.games, days_between(seen.last_at, at), params)
        if credit < 1.0:
            rating = user.rating + credit * gain  # only the gain; RD keeps the full update
    user_after = RatingState(
        rating,
        max(rd, params.rd_floor),
        None,
        user.games + 1,
        None,
        _later(user.last_at, at),
        user.version + 1,
        user.extra,
    )

    # The problem: its RD never grows, against the user's stored (not grown) values.
    p_rating, p_rd = glicko1.rate_one(problem.rating, problem_rd, user.rating, user_rd, problem_score(s))
    p_extra = problem.extra
    if attempt.correct and mode == "blitz":
        p_extra = with_solve(p_extra, _blitz_time(attempt, params))  # after scoring (docs/rules.md#chess-tempo)
    problem_after = RatingState(
        p_rating,
        max(p_rd, params.rd_floor),
        None,
        problem.games + 1,
        None,
        _later(problem.last_at, at),
        problem.version + 1,
        p_extra,
    )

    # The repeat record counts every attempt, right or wrong.
    seen_after = RatingState(
        seen.rating, None, None, seen.games + 1, None, _later(seen.last_at, at), seen.version + 1, seen.extra
    )

    return Outcome(
        changes=(
            RatingChange(u_key, user, user_after, is_provisional(user_after.rd, params), None),
            RatingChange(p_key, problem, problem_after, is_provisional(problem_after.rd, params), None),
            RatingChange(s_key, seen, seen_after, False, None),
        )
    )


# --- the day's top group, as the engine drives it -------------------------------------------------
#
# docs/rules.md#chess-tempo: "at the first attempt of each UTC day in that mode, take the n users with stored RD <= 110".
# The threshold is kept as a state of its own, one per (day, mode), written by the day's first rated
# attempt: later attempts of that day read it. Taking it needs every established user's rating, which
# no per-key read gives: `top_group_query` asks the engine for them (the store's ratings with RD <=
# 110, with the batch's own changes laid over them) only while the day's state does not exist yet,
# and `with_established` attaches them to the attempt, so that rating stays a pure function.
# An attempt of an earlier day that arrives after a later one takes its day's threshold then.


def top_key(attempt: PuzzleAttempted) -> StateKey:
    day = utc_day(attempt.attempted_at)
    stamp = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(days=day)).strftime("%Y-%m-%d")
    return StateKey("top:" + stamp, TOP_SYSTEM, category(attempt))


def engine_state_keys(attempt: PuzzleAttempted) -> list[StateKey]:
    """`state_keys` plus the day's top-group state."""
    return [*state_keys(attempt), top_key(attempt)]


def top_group_query(
    attempt: PuzzleAttempted, states: Mapping[StateKey, RatingState], params: ChessTempoParams = PARAMS
) -> tuple[str, str, float] | None:
    """(system, category, RD at most) of the ratings the day's threshold needs, or None if it is kept."""
    if top_key(attempt) in states:
        return None
    return NAME, category(attempt), params.established_rd


def with_established(attempt: PuzzleAttempted, ratings: Mapping[str, float]) -> PuzzleAttempted:
    return replace(attempt, established=tuple(sorted(ratings.values())))


def rate_attempt_in_day(
    attempt: PuzzleAttempted,
    states: Mapping[StateKey, RatingState],
    closed: Mapping[str, float] = {},  # noqa: B006 - read-only
    params: ChessTempoParams = PARAMS,
) -> Outcome:
    """`rate_attempt` with the threshold of the attempt's day: kept, or taken now (one more, internal change)."""
    key = top_key(attempt)
    kept = states.get(key)
    if kept is not None:
        return rate_attempt(attempt, states, closed, params, (kept.extra or {}).get("threshold"))
    if attempt.established is None:
        raise ValueError(f"Chess Tempo attempt on {attempt.puzzle_id}: the established ratings were not attached")
    threshold = top_threshold(attempt.established, params)
    outcome = rate_attempt(attempt, states, closed, params, threshold)
    if not outcome.rated:
        return outcome  # unrated: nothing changes, not even the day's state
    day = RatingState(
        0.0 if threshold is None else threshold, None, None, 0, None, attempt.attempted_at, 1,
        {"threshold": threshold, "established": len(attempt.established)},
    )
    return outcome._replace(changes=(*outcome.changes, RatingChange(key, RatingState(0.0), day, False, None)))


def lock_ids(attempt: PuzzleAttempted) -> list[str]:
    """Whose rows a batch locks: the user, the problem (one row that every user's attempt updates:
    without its lock two workers could both update it from the same stored value) and the day's
    top-group state (written once, by the day's first rated attempt)."""
    return [attempt.player_id, PROBLEM_PREFIX + attempt.puzzle_id, top_key(attempt).player_id]


def imported_state(imp, version: int, params: ChessTempoParams = PARAMS) -> RatingState:
    """A rating.imported's state (a user's rating of one mode): RD defaults to the start value."""
    rd = params.start_rd if imp.rd is None else imp.rd
    return RatingState(imp.rating, rd, None, imp.games or 0, None, imp.last_played_at, version)


def import_flags(state: RatingState, params: ChessTempoParams = PARAMS) -> tuple[bool, float | None]:
    return is_provisional(state.rd, params), None


def docs() -> str:
    """Chess Tempo's section of docs/ratings.md (seed 002 and docs/rules.md#chess-tempo), every number computed by
    this module."""
    p = PARAMS
    stats = None
    for t in (5.0, 10.0, 15.0):  # earlier correct blitz solves: mean 10 s, sd 4.08 s
        stats = with_solve(stats, t)
    _, mean, sd = solve_stats(stats)
    rows = []
    for seconds, after in ((4.0, 0.0), (8.0, 0.0), (10.0, 5.0), (20.0, 0.0), (40.0, 0.0)):
        t = effective_time(seconds, after)
        s = blitz_score(t, stats)
        rows.append([f"{seconds:g} s", f"{after:g} s", f"{t:g} s", f"{s:.3g}", f"{problem_score(s):.3g}"])
    credits = [[f"{n}", f"{repeat_credit(n, 0):.0%}", f"{repeat_credit(n, 183):.0%}",
                f"{repeat_credit(n, 365):.0%}"] for n in range(1, 8)]
    r, rd = glicko1.rate(1500.0, 200.0, [glicko1.Encounter(1400.0, 30.0, 1.0), glicko1.Encounter(1550.0, 100.0, 0.0),
                                        glicko1.Encounter(1700.0, 300.0, 0.0)])
    return "\n\n".join([
        f"## Chess Tempo problems\n\nGlicko-1 for users and for problems, each attempt a game between them, "
        f"separately in `standard` and `blitz`. Both start at {p.start_rating:g} ±{p.start_rd:g}; RD at least "
        f"{p.rd_floor:g}. A user's RD grows by c = {p.rd_growth_per_day:g} per √day since his last attempt in the mode "
        f"(at most {p.rd_cap:g}); a problem's RD does not grow. Each side is rated against the other's stored values. "
        f"Provisional while RD > {p.provisional_above:g}. Only users' ratings are published; problems, their solve "
        f"times and the repeat counts are kept in PostgreSQL with them.",
        f"Glickman's example (1500 ±200 against 1400 ±30 won, 1550 ±100 and 1700 ±300 lost): {r:.2f} ±{rd:.2f}.",
        f"### Blitz scores\n\nEffective time = seconds + seconds after the first move. Against the problem's earlier "
        f"correct blitz solves (here 5, 10 and 15 s: mean {mean:g} s, sd {sd:.2f} s): faster than mean − sd "
        f"{p.blitz_bonus_score:g}, up to the mean 1, slower mean / t; fewer than {p.blitz_min_solves} earlier solves 1; "
        f"wrong 0. The problem scores max(0, 1 − s).",
        table(["seconds", "after first move", "effective", "user scores", "problem scores"], rows),
        f"### Repeats\n\nFor the day's top {p.top_percent:g}% of established users (RD ≤ {p.established_rd:g}, "
        f"at least {p.top_min_established} of them; the threshold is taken at the mode's first attempt of each UTC "
        f"day), the gain of a correct attempt at a problem seen before is multiplied by the credit; losses, RD and "
        f"the problem's update are never reduced.",
        table(["repeat", "credit", "unseen 183+ days", "unseen 365+ days"], credits),
    ])


def declare(chosen: ParameterSet) -> RatingSystem:
    """Chess Tempo as this parameter set declares it (worker.ratings.parameters)."""
    p = chosen.params
    return RatingSystem(
        NAME, ("puzzle.attempted/chesstempo",), lock_ids, engine_state_keys, partial(rate_attempt_in_day, params=p),
        title="Chess Tempo", docs=docs, categories=CATEGORIES, cause_time=operator.attrgetter("attempted_at"),
        published=is_published, context=partial(top_group_query, params=p), with_context=with_established,
        predict=partial(predict, params=p),
        imports=Imports(partial(imported_state, params=p), lambda imp, states: start_state(p),
                        partial(import_flags, params=p)),
        parameters=chosen.name, established=lambda state: not is_provisional(state.rd, p),
    )


#: Every set Chess Tempo's parameters have had, each in effect from its date on (docs/ratings.md lists them).
PARAMETER_SETS = (
    ParameterSet("chesstempo-1", None, PARAMS, "the seed's values (docs/rules.md#chess-tempo)."),
)
SYSTEM = declare(PARAMETER_SETS[-1])
