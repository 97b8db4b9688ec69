"""ChesStresS CSR: Glicko-2 per speed (seed 000 "How CSR works"; decisions in docs/rules.md#csr)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

from worker.ratings import glicko2
from worker.ratings.doctext import plus_minus, signed, table
from worker.ratings.inputs import GameFinished, TimeControl
from worker.ratings.parameters import ParameterSet
from worker.ratings.state import Outcome, RatingChange, RatingState, StateKey
from worker.ratings.system import Imports, Prediction, RatingSystem

NAME = "csr"
# Speed order (docs/rules.md#csr "Start in a new category"): distance in this list decides the weights.
CATEGORIES = ("bullet", "blitz", "rapid", "classical", "correspondence")
DAY = 86400.0


@dataclass(frozen=True, slots=True)
class CsrParams:
    """The seed's parameter table; every value a documented setting (docs/rules.md#csr)."""

    start_rating: float = 1500.0
    start_rd: float = 350.0
    start_volatility: float = 0.06
    tau: float = 0.5
    rd_floor: float = 45.0
    rd_cap: float = 350.0  # for inactivity growth only
    provisional_above: float = 110.0
    white_advantage: float = 35.0
    rating_floor: float = 100.0
    floor_below_peak: float = 400.0
    other_start_min_games: int = 5
    other_start_rd: float = 250.0


PARAMS = CsrParams()

SCORES = {"1-0": (1.0, 0.0), "0-1": (0.0, 1.0), "1/2-1/2": (0.5, 0.5)}


def estimated_length(tc: TimeControl) -> int | None:
    """Base seconds plus 40 increments (an average of 40 moves); None for correspondence."""
    if tc.days_per_move is not None:
        return None
    return (tc.base_seconds or 0) + 40 * (tc.increment_seconds or 0)


def category(tc: TimeControl) -> str:
    """Seed table "CSR category": < 180 s Bullet, < 480 s Blitz, <= 1500 s Rapid, else Classical."""
    length = estimated_length(tc)
    if length is None:
        return "correspondence"
    if length < 180:
        return "bullet"
    if length < 480:
        return "blitz"
    if length <= 1500:
        return "rapid"
    return "classical"


def unrated_reason(game: GameFinished, closed: Mapping[str, float]) -> str | None:
    """docs/rules.md#csr: casual, other variants, guests and fair-play-closed accounts are not rated."""
    if not game.rated:
        return "casual"
    if game.variant != "standard":
        return "variant"
    if game.white_guest or game.black_guest:
        return "guest"
    if game.white_id in closed or game.black_id in closed:
        return "closed_account"
    return None


def is_provisional(rd: float, params: CsrParams = PARAMS) -> bool:
    return rd > params.provisional_above


def floor_for_peak(peak: float | None, params: CsrParams = PARAMS) -> float | None:
    """Seed "Rating floor": 400 below the peak established rating, down to the hundred, at least 100."""
    if peak is None:
        return None
    return max(params.rating_floor, math.floor((peak - params.floor_below_peak) / 100.0) * 100.0)


def apply_floor(old_rating: float, new_rating: float, peak: float | None, params: CsrParams = PARAMS) -> float:
    """A result that would go below the floor (at least 100, or the peak's floor) stops at it.

    A rating already below its floor (after an import) is neither lowered nor lifted by it:
    the effective floor is then the rating itself (docs/rules.md#csr).
    """
    floor = floor_for_peak(peak, params) or params.rating_floor
    if new_rating >= floor:
        return new_rating
    return min(floor, max(old_rating, new_rating))


def start_state(
    player_id: str, cat: str, states: Mapping[StateKey, RatingState], params: CsrParams = PARAMS
) -> RatingState:
    """The state of a category never played: 1500 / 350 / 0.06, or the start from other ratings.

    Seed "Starting from your other ratings" and docs/rules.md#csr: the average of the categories with at least
    5 games, weighted by speed distance (1, 0.5, then 0.25) times 1 / RD^2 (as stored), RD 250.
    """
    here = CATEGORIES.index(cat)
    weight_sum = 0.0
    weighted = 0.0
    for i, other in enumerate(CATEGORIES):
        if other == cat:
            continue
        st = states.get((player_id, NAME, other))  # a plain tuple: see more_keys
        if st is None or st.games < params.other_start_min_games:
            continue
        distance = abs(i - here)
        w = (1.0 if distance == 1 else 0.5 if distance == 2 else 0.25) / (st.rd * st.rd)
        weight_sum += w
        weighted += w * st.rating
    if weight_sum == 0.0:
        return RatingState(params.start_rating, params.start_rd, params.start_volatility)
    return RatingState(weighted / weight_sum, params.other_start_rd, params.start_volatility)


def current_state(
    player_id: str, cat: str, states: Mapping[StateKey, RatingState], params: CsrParams = PARAMS
) -> RatingState:
    return stored_or_start(StateKey(player_id, NAME, cat), states, params)


def stored_or_start(key: StateKey, states: Mapping[StateKey, RatingState], params: CsrParams = PARAMS) -> RatingState:
    st = states.get(key)
    return st if st is not None else start_state(key.player_id, key.category, states, params)


def own_rd(state: RatingState, at: float, params: CsrParams = PARAMS) -> float:
    """The player's own RD, grown for the days since his last rated game in the category."""
    if state.last_at is None:
        return state.rd
    days = max(0.0, (at - state.last_at) / DAY)
    return glicko2.rd_after_inactivity(state.rd, state.volatility, days, params.rd_cap)


def updated_state(
    before: RatingState, opponent: RatingState, score: float, advantage: float, at: float, params: CsrParams
) -> RatingState:
    """One player's side of one game: grow own RD, one Glicko-2 period, RD floor, rating floor, peak."""
    new_rating, new_rd, volatility = glicko2.rate_one(
        before.rating, own_rd(before, at, params), before.volatility, opponent.rating, opponent.rd, score,
        advantage, params.tau,
    )
    rd = max(new_rd, params.rd_floor)
    rating = apply_floor(before.rating, new_rating, before.peak, params)
    peak = before.peak
    if not is_provisional(rd, params):
        peak = rating if peak is None else max(peak, rating)
    last_at = at if before.last_at is None else max(before.last_at, at)
    return RatingState(rating, rd, volatility, before.games + 1, peak, last_at, before.version + 1)


def change(key: StateKey, before: RatingState, after: RatingState, params: CsrParams = PARAMS) -> RatingChange:
    return RatingChange(key, before, after, is_provisional(after.rd, params), floor_for_peak(after.peak, params))


def players(game: GameFinished) -> list[str]:
    return [game.white_id, game.black_id]


def state_keys(game: GameFinished) -> list[StateKey]:
    """The two ratings the game changes."""
    cat = category(game.time_control)
    return [StateKey(game.white_id, NAME, cat), StateKey(game.black_id, NAME, cat)]


def more_keys(game: GameFinished, loaded: Mapping[StateKey, RatingState]) -> list[StateKey]:
    """For a player's first game in a category: his other categories, which the start comes from."""
    cat = category(game.time_control)
    # Looked up with a plain tuple, which finds the StateKey it equals (same hash, tuple equality) and is
    # built in a tenth of a NamedTuple's time: a CSR game looks up a dozen keys (the keys it returns, which
    # the engine stores, are StateKeys).
    return [
        StateKey(p, NAME, c)
        for p in (game.white_id, game.black_id)
        if (p, NAME, cat) not in loaded
        for c in CATEGORIES
        if c != cat
    ]


def rate_game(
    game: GameFinished,
    states: Mapping[StateKey, RatingState],
    closed: Mapping[str, float] = {},  # noqa: B006 - read-only
    params: CsrParams = PARAMS,
) -> Outcome:
    """Rate one finished game: both players against each other's stored values, White +35 in expectation."""
    reason = unrated_reason(game, closed)
    if reason is not None:
        return Outcome(unrated_reason=reason)
    cat = category(game.time_control)
    white_key, black_key = StateKey(game.white_id, NAME, cat), StateKey(game.black_id, NAME, cat)
    white = stored_or_start(white_key, states, params)
    black = stored_or_start(black_key, states, params)
    white_score, black_score = SCORES[game.result]
    at = game.finished_at
    white_after = updated_state(white, black, white_score, params.white_advantage, at, params)
    black_after = updated_state(black, white, black_score, -params.white_advantage, at, params)
    return Outcome(
        changes=(
            change(white_key, white, white_after, params),
            change(black_key, black, black_after, params),
        )
    )


def predict(
    game: GameFinished, states: Mapping[StateKey, RatingState], params: CsrParams = PARAMS
) -> tuple[Prediction, ...]:
    """White's expected score before the game, from the ratings it is rated from (RDs grown for the days
    since each played, White's +35). Between two uncertain ratings the expected outcome weighs the
    difference by g(sqrt(RD_w^2 + RD_b^2)) (Glickman, "The Glicko system", the expected outcome of a game
    between two rated players), here on the Glicko-2 scale that rates the game."""
    if unrated_reason(game, {}) is not None:
        return ()
    cat = category(game.time_control)
    white = current_state(game.white_id, cat, states, params)
    black = current_state(game.black_id, cat, states, params)
    at = game.finished_at
    rd = math.hypot(own_rd(white, at, params), own_rd(black, at, params))
    expected = glicko2.expected_score(white.rating, black.rating, rd, params.white_advantage)
    return (Prediction(cat, expected, SCORES[game.result][0]),)


#: A time control of each category: CSR reads nothing else of a game's time control than its category.
SAMPLE_TIME_CONTROLS = {"bullet": TimeControl(60, 0), "blitz": TimeControl(300, 0), "rapid": TimeControl(600, 0),
                        "classical": TimeControl(1800, 0), "correspondence": TimeControl(days_per_move=3)}


def hypothetical_game(cat: str, white: str, black: str, result: str, at: float) -> GameFinished:
    """A rated game of standard chess in that category, finished at `at` (points at stake:
    worker.engine.preview rates it as a batch would, White's +35 and the start of a category never played
    included)."""
    return GameFinished("preview", True, "standard", SAMPLE_TIME_CONTROLS[cat], white, black, result, at)


def imported_state(imp, version: int, params: CsrParams = PARAMS) -> RatingState:
    """A rating.imported's state: RD and volatility default to the start values."""
    rd = params.start_rd if imp.rd is None else imp.rd
    vol = params.start_volatility if imp.volatility is None else imp.volatility
    return RatingState(imp.rating, rd, vol, imp.games or 0, imp.peak, imp.last_played_at, version)


def import_start(imp, states: Mapping[StateKey, RatingState], params: CsrParams = PARAMS) -> RatingState:
    """What an import into a category never played replaces: the start a game there would rate from
    (from the player's other speeds where that rule applies)."""
    return start_state(imp.player_id, imp.category, states, params)


def import_more_keys(imp, loaded: Mapping[StateKey, RatingState]) -> list[StateKey]:
    """The player's other categories, which the start of a category never played comes from."""
    return [StateKey(imp.player_id, NAME, c) for c in CATEGORIES if c != imp.category]


def import_flags(state: RatingState, params: CsrParams = PARAMS) -> tuple[bool, float | None]:
    return is_provisional(state.rd, params), floor_for_peak(state.peak, params)


def _example_game(result: str, at: float = 0.0) -> GameFinished:
    return GameFinished("example", True, "standard", TimeControl(300, 0), "white", "black", result, at)


def _parameters_table() -> str:
    return table(["Parameter", "Value"], [
        ["Starting rating", round(PARAMS.start_rating)], ["Starting rating deviation (RD)", round(PARAMS.start_rd)],
        ["Starting volatility", PARAMS.start_volatility], ["System constant τ (tau)", PARAMS.tau],
        ["Scale factor (Glicko-2 to rating points)", glicko2.SCALE], ["Lowest possible RD (floor)", round(PARAMS.rd_floor)],
        ["Provisional (“?”) while RD is above", round(PARAMS.provisional_above)],
        ["White’s first-move advantage (CSR only)", f"{round(PARAMS.white_advantage)} rating points"],
        ["Highest RD (after a long break)", round(PARAMS.rd_cap)],
    ])


def _categories_table() -> str:
    rows = []
    for base, inc in [(60, 0), (60, 1), (60, 2), (120, 1), (180, 0), (300, 0), (600, 0), (900, 0), (1500, 0),
                      (1800, 0), (1800, 20)]:
        tc = TimeControl(base, inc)
        rows.append([f"{base // 60}+{inc}", f"{estimated_length(tc)} s", category(tc).capitalize()])
    rows.append(["d3 (correspondence, 3 days a move)", "–", category(TimeControl(days_per_move=3)).capitalize()])
    return table(["Time control", "Estimated length", "CSR category"], rows)


def _rd_growth_table() -> str:
    rows = [[d, round(glicko2.rd_after_inactivity(60, PARAMS.start_volatility, d, PARAMS.rd_cap)),
             round(glicko2.rd_after_inactivity(100, PARAMS.start_volatility, d, PARAMS.rd_cap))]
            for d in (7, 30, 90, 180, 365, 730)]
    return table(["Days without a rated game", "RD 60 becomes", "RD 100 becomes"], rows)


def _provisional_games(opponent_rd: float) -> int:
    """A new player drawing back to back as White against a 1500 ±opponent_rd who does not change."""
    states = {StateKey("o", "csr", "blitz"): RatingState(1500, opponent_rd, 0.06, 50, None, 0.0, 50)}
    n = 0
    while True:
        n += 1
        g = GameFinished("p", True, "standard", TimeControl(300, 0), "p", "o", "1/2-1/2", 0.0)
        drawn = rate_game(g, states).changes[0]
        if not drawn.provisional:
            return n
        states[drawn.key] = drawn.after


def _start_from_other_tables() -> str:
    mine = {"blitz": (1900, 60, 40), "rapid": (1800, 90, 12), "correspondence": (1600, 120, 6)}
    states = {StateKey("p", "csr", c): RatingState(r, rd, 0.06, n, r, 0.0, n) for c, (r, rd, n) in mine.items()}
    have = table(["Your ratings", "Games"], [[f"{c.capitalize()} {r} ±{rd}", n] for c, (r, rd, n) in mine.items()])
    starts = [[c.capitalize(), plus_minus(s.rating, s.rd)] for c in ("bullet", "classical")
              for s in [start_state("p", c, states)]]
    return have + "\n\n" + table(["Category you have not played yet", "It starts at"], starts)


def _floors_table() -> str:
    return table(["Highest established rating (peak)", "Your rating cannot fall below"],
                 [[p, round(floor_for_peak(p))] for p in (1450, 1843, 2000, 2399, 2400)])


def _example_new_players() -> str:
    white, black = rate_game(_example_game("1-0"), {}).changes
    e_w = glicko2.expected_score(1500, 1500, 350, PARAMS.white_advantage)
    e_b = glicko2.expected_score(1500, 1500, 350, -PARAMS.white_advantage)
    return table(["", "Before", "Expected score", "Result", "After"], [
        ["White (new)", plus_minus(1500, 350), f"{e_w:.3f}", "win (1)",
         plus_minus(white.after.rating, white.after.rd)],
        ["Black (new)", plus_minus(1500, 350), f"{e_b:.3f}", "loss (0)",
         plus_minus(black.after.rating, black.after.rd)],
    ])


def _example_established_draw() -> str:
    states = {StateKey("white", "csr", "blitz"): RatingState(1843, 60, 0.06, 50, 1843, 0.0, 50),
              StateKey("black", "csr", "blitz"): RatingState(1700, 80, 0.06, 50, 1700, 0.0, 50)}
    white, black = rate_game(_example_game("1/2-1/2", DAY), states).changes
    e_w = glicko2.expected_score(1843, 1700, 80, PARAMS.white_advantage)
    e_b = glicko2.expected_score(1700, 1843, 60, -PARAMS.white_advantage)
    return table(["", "Before", "Expected score", "Result", "After", "Change"], [
        ["White", plus_minus(1843, 60), f"{e_w:.3f}", "draw (½)", plus_minus(white.after.rating, white.after.rd),
         signed(white.delta)],
        ["Black", plus_minus(1700, 80), f"{e_b:.3f}", "draw (½)", plus_minus(black.after.rating, black.after.rd),
         signed(black.delta)],
    ])


def _faq_example() -> str:
    states = {StateKey("white", "csr", "blitz"): RatingState(1843, 50, 0.06, 50, 1843, 0.0, 50),
              StateKey("black", "csr", "blitz"): RatingState(1600, 60, 0.06, 50, 1600, 0.0, 50)}
    white = rate_game(_example_game("1-0", DAY), states).changes[0]
    e = glicko2.expected_score(1843, 1600, 60, PARAMS.white_advantage)
    return (f"With White, 1843 ±50 against 1600 ±60 (both last played the day before), the expected score is "
            f"{e:.3f}; a win scores 1, so the gain is {signed(white.delta)} (to {round(white.after.rating)}).")


def docs() -> str:
    """CSR's section of docs/ratings.md: seed 000's tables and worked examples, every number computed by this
    module."""
    return "\n\n".join([
        "## CSR (ChesStresS, Glicko-2 per speed)\n\n### Parameters", _parameters_table(),
        "### Categories\n\nEstimated length = base seconds + 40 × increment seconds.", _categories_table(),
        "### RD growth with inactivity\n\nRD′ = √(RD² + (σ × 173.7178)² × days), at most 350; applied to a "
        "player's own RD when he next plays a rated game in the category.", _rd_growth_table(),
        f"### Provisional\n\nA rating is provisional while RD > 110. A new player (±350) drawing game after game, "
        f"with no days between games, against an opponent who stays at 1500 ±60 is established after "
        f"{_provisional_games(60)} games; against 1500 ±200, after {_provisional_games(200)} games.",
        "### Starting from your other ratings", _start_from_other_tables(),
        "### Rating floor", _floors_table(),
        "### Worked example: two new players, 5+0, White wins", _example_new_players(),
        "### Worked example: two established players draw (both last played the day before)",
        _example_established_draw(),
        "### FAQ: why only 3 points for a win?", _faq_example(),
    ])


def declare(chosen: ParameterSet) -> RatingSystem:
    """CSR as this parameter set declares it (worker.ratings.parameters)."""
    p = chosen.params
    return RatingSystem(
        NAME, ("game.finished",), players, state_keys, partial(rate_game, params=p), title="CSR", docs=docs,
        categories=CATEGORIES,
        more_keys=more_keys, predict=partial(predict, params=p), parameters=chosen.name,
        hypothetical_game=hypothetical_game,
        established=lambda state: not is_provisional(state.rd, p),
        imports=Imports(partial(imported_state, params=p), partial(import_start, params=p),
                        partial(import_flags, params=p), import_more_keys),
    )


#: Every set CSR's parameters have had, each in effect from its date on (docs/ratings.md lists them).
PARAMETER_SETS = (
    ParameterSet("csr-1", None, PARAMS, "the seed's parameter table (docs/rules.md#csr)."),
)
SYSTEM = declare(PARAMETER_SETS[-1])
