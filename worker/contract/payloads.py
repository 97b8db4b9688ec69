"""Payload builders, one per input type (worker.contract.types declares which is whose): a `data` dict its
schema accepted -> (payload, cause time, cause time text, ref).

The payloads are the plain values of worker.ratings.inputs: times as epoch seconds, numbers as real
ints and floats. A time in `data` that the schema's regex let through but that is not a real date and
time, or is before 1970, is refused here (invalid_data).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from worker.contract.reasons import BadMessage, show
from worker.contract.times import MIN_TIME, MIN_TIME_TEXT, parse_normalized
from worker.ratings import fide
from worker.ratings.inputs import (
    AccountClosed,
    EventFinished,
    EventGame,
    EventPlayer,
    GameFinished,
    Message,
    PeriodClosed,
    PuzzleAttempted,
    RatingImported,
    TeamGames,
    TimeControl,
    TurboPlayer,
)

__all__ = ["account_closed", "event_finished", "game_finished", "new_message", "period_closed", "puzzle_attempted",
           "rating_imported", "time_of"]


def time_of(text: str, field: str) -> tuple[float, str]:
    """A time of `data` (already shaped by the schema's regex) -> (epoch seconds, normalized text)."""
    try:
        epoch, normalized = parse_normalized(text)
    except ValueError as exc:
        raise BadMessage("invalid_data", f"{field}: {exc}") from None
    if epoch < MIN_TIME:
        raise BadMessage("invalid_data", f"{field}: must not be before {MIN_TIME_TEXT} (got {normalized})")
    return epoch, normalized



def _int(v: Any) -> int:
    # JSON Schema's "integer" includes 5.0; the payload gets a real int.
    return v if v.__class__ is int else int(v)


def _opt_int(v: Any) -> int | None:
    return None if v is None else _int(v)


def _float(v: Any) -> float:
    # + 0.0 turns -0.0 (which passes "minimum": 0) into 0.0: no negative zero reaches the rating rules.
    return float(v) + 0.0


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v) + 0.0


def _positional_constructor(cls):
    """A constructor taking every field of a frozen slots dataclass positionally, about twice as fast.

    A frozen dataclass's __init__ sets each field through object.__setattr__; this sets the slots
    directly. The object is the same (==, hash, repr), so it is only used on the hot path (game.finished).
    """
    names = [f.name for f in dataclasses.fields(cls)]
    if "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        return cls
    namespace = {"_new": object.__new__, "_cls": cls}
    namespace.update({f"_set_{n}": cls.__dict__[n].__set__ for n in names})
    lines = [f"def make({', '.join(names)}):", "    obj = _new(_cls)"]
    lines += [f"    _set_{n}(obj, {n})" for n in names]
    lines.append("    return obj")
    exec("\n".join(lines), namespace)  # noqa: S102 - generated from the dataclass's own field names
    make = namespace["make"]
    make.__doc__ = f"{cls.__name__}(...) with every field given positionally."
    return make


_new_game = _positional_constructor(GameFinished)
new_message = _positional_constructor(Message)
_TIME_CONTROLS: dict[tuple, TimeControl] = {}


def game_finished(d: dict) -> tuple[GameFinished, float, str, str]:
    tc = d["time_control"]
    days = tc.get("days_per_move")
    key = (days,) if days is not None else (tc["base_seconds"], tc["increment_seconds"])
    time_control = _TIME_CONTROLS.get(key)
    if time_control is None:
        if days is not None:
            time_control = TimeControl(days_per_move=_int(days))
        else:
            time_control = TimeControl(base_seconds=_int(key[0]), increment_seconds=_int(key[1]))
        if len(_TIME_CONTROLS) < 1024:  # the few common controls; never unbounded
            _TIME_CONTROLS[key] = time_control
    white, black = d["white"], d["black"]
    white_id, black_id = white["player_id"], black["player_id"]
    if white_id == black_id:
        raise BadMessage(
            "invalid_rule",
            f"data.black.player_id: a player may not meet himself ({show(white_id)} is also white)",
        )
    finished_at, text = time_of(d["finished_at"], "data.finished_at")
    game_id = d["game_id"]
    return (
        _new_game(
            game_id,
            d["rated"],
            d["variant"],
            time_control,
            white_id,
            black_id,
            d["result"],
            finished_at,
            white.get("guest", False),
            black.get("guest", False),
        ),
        finished_at,
        text,
        game_id,
    )


def event_finished(d: dict) -> tuple[EventFinished, float, str, str]:
    finished_at, text = time_of(d["finished_at"], "data.finished_at")
    kind = d["kind"]
    listed: set[str] = set()
    players: list = []
    for i, p in enumerate(d["players"]):
        pid = p["player_id"]
        if pid in listed:
            raise BadMessage(
                "invalid_rule", f"data.players[{i}].player_id: {show(pid)} is listed more than once"
            )
        listed.add(pid)
        if kind == "turbo_live":
            tg = p["team_games"]
            players.append(
                TurboPlayer(
                    pid,
                    _float(p["agreement"]),
                    _int(p["votes"]),
                    TeamGames(_int(tg["won"]), _int(tg["drawn"]), _int(tg["lost"])),
                    _int(p.get("top_ups", 0)),
                )
            )
        else:
            players.append(EventPlayer(pid, _opt_int(p.get("age")), _opt_int(p.get("birth_year"))))
    games = []
    for j, g in enumerate(d.get("games", ())):
        white, black = g["white"], g["black"]
        if white == black:
            raise BadMessage(
                "invalid_rule",
                f"data.games[{j}].black: a player may not meet himself ({show(white)} is also white)",
            )
        for side, pid in (("white", white), ("black", black)):
            if pid not in listed:
                raise BadMessage(
                    "invalid_rule", f"data.games[{j}].{side}: {show(pid)} is not listed in data.players"
                )
        games.append(EventGame(_int(g["round"]), white, black, g["result"]))
    tc = d.get("time_control")
    competition_id = d["competition_id"]
    started_at = None
    if "started_at" in d:
        started_at, started_text = time_of(d["started_at"], "data.started_at")
        if started_at > finished_at:
            raise BadMessage("invalid_rule", f"data.started_at: {started_text} is after data.finished_at ({text})")
    return (
        EventFinished(
            competition_id,
            kind,
            d["rated"],
            finished_at,
            tuple(players),
            tuple(games),
            d.get("format"),
            None if tc is None else _float(tc["base_minutes"]),
            None if tc is None else _int(tc["increment_seconds"]),
            d.get("rating_type"),
            started_at,
            d.get("rating_period"),
        ),
        finished_at,
        text,
        competition_id,
    )


def puzzle_attempted(d: dict) -> tuple[PuzzleAttempted, float, str, str]:
    attempted_at, text = time_of(d["attempted_at"], "data.attempted_at")
    puzzle_id = d["puzzle_id"]
    return (
        PuzzleAttempted(
            d["system"],
            d["player_id"],
            puzzle_id,
            d["correct"],
            attempted_at,
            d.get("mode"),
            _opt_float(d.get("seconds")),
            _opt_float(d.get("seconds_after_first_move")),
            d.get("challenge", False),
            _opt_float(d.get("puzzle_rating")),
        ),
        attempted_at,
        text,
        puzzle_id,
    )


def account_closed(d: dict) -> tuple[AccountClosed, float, str, None]:
    closed_at, text = time_of(d["closed_at"], "data.closed_at")
    return AccountClosed(d["player_id"], d["reason"], closed_at), closed_at, text, None


def rating_imported(d: dict) -> tuple[RatingImported, float, str, None]:
    imported_at, text = time_of(d["imported_at"], "data.imported_at")
    if d["system"] == fide.NAME and d["rating"] < fide.lowest_listed(text[:7]):
        raise BadMessage("invalid_rule", f"data.rating: {show(d['rating'])} is not a listed FIDE rating on the "
                                         f"{text[:7]} list (the lowest is {fide.lowest_listed(text[:7])})")
    last = d.get("last_played_at")
    last_played_at = None if last is None else time_of(last, "data.last_played_at")[0]
    return (
        RatingImported(
            d["player_id"],
            d["system"],
            d["category"],
            _float(d["rating"]),
            imported_at,
            rd=_opt_float(d.get("rd")),
            volatility=_opt_float(d.get("volatility")),
            games=_opt_int(d.get("games")),
            wins=_opt_int(d.get("wins")),
            draws=_opt_int(d.get("draws")),
            losses=_opt_int(d.get("losses")),
            events=_opt_int(d.get("events")),
            peak=_opt_float(d.get("peak")),
            birth_year=_opt_int(d.get("birth_year")),
            last_played_at=last_played_at,
            k=_opt_int(d.get("k")),
            ever_2300=d.get("ever_2300"),
            ever_2400=d.get("ever_2400"),
        ),
        imported_at,
        text,
        None,
    )


def period_closed(d: dict) -> tuple[PeriodClosed, float, str, str]:
    # closed_at may be any time, FIDE's closing date (3 days before the list) included: no rule reads it
    # (inactivity counts from the list's own date), and a list is applied where the stream meets it.
    closed_at, text = time_of(d["closed_at"], "data.closed_at")
    listed = d["list"]
    return PeriodClosed(d["system"], listed, closed_at), closed_at, text, listed

