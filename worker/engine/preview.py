"""Points at stake: what each result of a game not played yet would do to both players' ratings.

The read API's `GET /v1/preview/{system}/{category}` (issue 40). A system says what one rated game of it
is (RatingSystem.hypothetical_game); the game is rated three times, once per result, the way a batch
rates it: the states read by `reads.load` (the start of a rating never played included, from the other
ratings where the system says so), the system declared from the parameter set in effect at the game's
time (`system_for`), the one pure loop (`compute`). Nothing is written and nothing is locked: `reader` is
the store's lock-free reader (its `load_states` and `closed_accounts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType

from worker.engine.compute import Computed, compute
from worker.engine.reads import load, needs_of
from worker.ratings.inputs import Message
from worker.ratings.reasons import explain
from worker.ratings.registry import SYSTEMS, TIMELINES
from worker.ratings.state import RatingState, StateKey
from worker.ratings.system import RatingSystem

__all__ = ["PREVIEWS", "NotRatable", "PreviewUnsupported", "first_game_start", "points_at_stake"]

#: system -> the categories whose points at stake can be asked for (the systems that declare a game).
PREVIEWS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {s.name: s.categories for s in SYSTEMS if s.hypothetical_game is not None and s.categories})

# White's results, in the order a side's stakes are named: (name, White's result, Black's same result).
_RESULTS = (("win", "1-0", "0-1"), ("draw", "1/2-1/2", "1/2-1/2"), ("loss", "0-1", "1-0"))
_SOURCE = "/rating-worker/preview"  # the hypothetical messages' source (nothing is stored under it)


class PreviewUnsupported(LookupError):
    """No points at stake for this system or category; the message names those there are."""

    def __init__(self, system: str, category: str | None = None) -> None:
        self.system, self.category = system, category
        supported = "; ".join(f"{name} ({', '.join(cats)})" for name, cats in PREVIEWS.items())
        what = system if category is None else f"{system} {category}"
        super().__init__(f"no points at stake for {what}: supported are {supported}")


class NotRatable(Exception):
    """The game would change nobody's rating, whatever its result, or cannot be played: `reason` is a word
    of worker/ratings/reasons.py (`explanation` its sentence), `left_out` each player's own reason."""

    def __init__(self, reason: str, left_out: tuple[tuple[str, str], ...] = ()) -> None:
        self.reason, self.left_out = reason, left_out
        super().__init__(f"{reason}: {explain(reason)}")

    @property
    def explanation(self) -> str:
        return explain(self.reason)


def _declared(system: str, category: str, at: float) -> RatingSystem:
    if category not in PREVIEWS.get(system, ()):
        raise PreviewUnsupported(system, None if system in PREVIEWS else category)
    return TIMELINES[system].at(at)


def _games(declared: RatingSystem, category: str, white: str, black: str, at: float) -> list[Message]:
    """The game, once per result (White's win, draw, loss), as the message a platform would send."""
    time = datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")
    make = declared.hypothetical_game
    kind = declared.rates[0]  # "event.finished/fide": the type, then what picks the system among its kinds
    return [Message(_SOURCE, f"{name}-{white}-{black}", kind.partition("/")[0], time,
                    make(category, white, black, result, at), "preview")
            for name, result, _ in _RESULTS]


def _last_played(states: Mapping[StateKey, RatingState], keys: list[StateKey]) -> float | None:
    times = [st.last_at for k in keys if (st := states.get(k)) is not None and st.last_at is not None]
    return max(times, default=None)


async def points_at_stake(
    reader, system: str, category: str, white: str, black: str, at: float,
) -> dict[str, dict[str, float | str | None]]:
    """`{"white": {"win", "draw", "loss", "reason"}, "black": {...}}`: each player's stakes, as if the game
    finished at `at` (epoch seconds); a stored last game of either player in the category later than `at`
    counts as the present (the game's time is the later of them: RD grows with the days since, a FIDE game
    goes to the list of that date, and the parameter set in effect then rates it).

    A stake is the `delta` that `rating.changed` would publish for the game's change of the player's rating
    (its last change: one the game makes whatever the result, such as FIDE closing his earlier period first,
    is not at stake); None where that delta is null (he has no published rating before or after it: a FIDE
    or US Chess newcomer, whose games go to his first rating); 0.0 where his rating would not change, and
    then `reason` says why when no result changes it (FIDE: "unrated_opponent"), else it is None.

    Raises PreviewUnsupported for a system or category without points at stake (PREVIEWS); NotRatable for
    the same player on both sides ("same_player"), an account closed for fair play ("closed_account"), and a
    game that would change nobody's rating whatever its result (the one reason both players are left out
    for, else the message's: "unrated_opponent" for two FIDE newcomers, "rating_gap_600"); RuntimeError
    where the system's rating code fails on the game (a bug, as a dead-lettered message would be).
    """
    declared = _declared(system, category, at)
    if white == black:
        raise NotRatable("same_player")
    closed = await reader.closed_accounts([white, black])
    if closed:
        raise NotRatable("closed_account", tuple((p, "closed_account") for p in sorted(closed)))
    keys = [StateKey(white, system, category), StateKey(black, system, category)]
    messages = _games(declared, category, white, black, at)
    needs = needs_of(messages)
    states, asked = await load(reader, messages, needs)
    last = _last_played(states, keys)
    if last is not None and last > at:  # his stored last game is the present
        messages = _games(_declared(system, category, last), category, white, black, last)
        needs = needs_of(messages)
        states, asked = await load(reader, messages, needs)
    outcomes = [compute([m], [s], dict(states), set(), {}, asked, set(needs.players))
                for m, s in zip(messages, needs.systems, strict=True)]
    for c in outcomes:
        if c.result.messages[0].status == "failed":
            raise RuntimeError(f"{system} could not rate the game: {c.result.messages[0].error}")
    if not any(c.result.records for c in outcomes):
        raise NotRatable(*_why_nobody(outcomes))
    shown = needs.systems[0].shown_rating
    now = {k: shown(st) if (st := states.get(k)) is not None else None for k in keys}
    return {side: _stakes(outcomes, key, now[key], column) for side, key, column in
            (("white", keys[0], 1), ("black", keys[1], 2))}


def _stakes(outcomes: list[Computed], key: StateKey, shown_now: float | None, column: int) -> dict:
    """One side's stakes: per result, the published delta of the game's change of his rating."""
    by_result = {r[1]: c for r, c in zip(_RESULTS, outcomes, strict=True)}
    out: dict[str, float | str | None] = {}
    reasons = []
    for result in _RESULTS:
        computed = by_result[result[column]]
        mine = [r for r in computed.result.records if r.key == key]
        if mine:
            last = mine[-1]
            out[result[0]] = None if last.before[0] is None or last.after[0] is None else last.delta
        else:
            out[result[0]] = 0.0 if shown_now is not None else None
            reasons.append(_reason_for(computed, key.player_id))
    out["reason"] = reasons[0] if len(reasons) == len(_RESULTS) else None
    return out


def _reason_for(computed: Computed, player_id: str) -> str | None:
    """Why the message left this player's rating alone (its left-out reason for him, else the message's)."""
    for processed in computed.processed:
        for pid, reason in processed.left_out:
            if pid == player_id:
                return reason
    return computed.result.messages[0].reason


def _why_nobody(outcomes: list[Computed]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The reason a game that changes nobody gives: the one reason every player was left out for (more telling
    than FIDE's "no_rated_games"), else the message's."""
    computed = outcomes[0]
    left_out = tuple(lo for p in computed.processed for lo in p.left_out)
    words = {reason for _, reason in left_out}
    reason = words.pop() if len(words) == 1 else computed.result.messages[0].reason or "no_rated_games"
    return reason, left_out


#: The opponent of a start's hypothetical game: an id no message can carry (the contract's ids have no
#: NUL), so that no stored state is his.
_NEWCOMER = "\x00newcomer"


def first_game_start(system: str, category: str, player_id: str, stored: Mapping[StateKey, RatingState],
                     at: float) -> tuple[float | None, float | None, float | None]:
    """The rating, RD and volatility his first game in this category would be rated from at `at`: the
    `before` of that game's record, the game rated as a batch rates it, against a newcomer, from his
    `stored` states (all of his in the system: CSR starts a speed from the other speeds he has played).
    The read API shows it for a rating not played yet (RatingSystem.hypothetical_game; pure, no reads)."""
    declared = _declared(system, category, at)
    message = _games(declared, category, player_id, _NEWCOMER, at)[0]
    needs = needs_of([message], [declared])
    asked = needs.keys | set(declared.more_keys(message.payload, stored))
    states = {k: v for k, v in stored.items() if k in asked}
    computed = compute([message], [declared], states, set(), {}, asked, set(needs.players))
    key = StateKey(player_id, system, category)
    (record, *_) = [r for r in computed.result.records if r.key == key]
    return record.before
