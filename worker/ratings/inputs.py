"""The decoded, validated inputs the rating systems read: plain values, no JSON, no Kafka.

`worker.contract.decode` turns CloudEvents into these; the rating systems never see bytes.
Times are epoch seconds (float, UTC), taken from the message itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True, slots=True)
class TimeControl:
    base_seconds: int | None = None
    increment_seconds: int | None = None
    days_per_move: int | None = None


@dataclass(frozen=True, slots=True)
class GameFinished:
    game_id: str
    rated: bool
    variant: str
    time_control: TimeControl
    white_id: str
    black_id: str
    result: str  # "1-0", "0-1", "1/2-1/2"
    finished_at: float
    white_guest: bool = False
    black_guest: bool = False


@dataclass(frozen=True, slots=True)
class TeamGames:
    won: int
    drawn: int
    lost: int


@dataclass(frozen=True, slots=True)
class TurboPlayer:
    player_id: str
    agreement: float
    votes: int
    team_games: TeamGames
    top_ups: int = 0


@dataclass(frozen=True, slots=True)
class EventPlayer:
    player_id: str
    age: int | None = None
    birth_year: int | None = None


@dataclass(frozen=True, slots=True)
class EventGame:
    round: int
    white: str
    black: str
    result: str


@dataclass(frozen=True, slots=True)
class EventFinished:
    """`kind` is turbo_live (players are TurboPlayer, format set) or uscf / fide (EventPlayer, games)."""

    competition_id: str
    kind: str
    rated: bool
    finished_at: float
    players: tuple  # tuple[TurboPlayer, ...] or tuple[EventPlayer, ...]
    games: tuple[EventGame, ...] = ()
    format: str | None = None
    time_control_minutes: float | None = None  # uscf/fide: base_minutes
    time_control_increment: int | None = None  # uscf/fide: increment_seconds
    rating_type: str | None = None  # fide
    started_at: float | None = None  # fide: the first round's start (the list in force then rates it)
    rating_period: str | None = None  # fide: "YYYY-MM", the list the platform was told it goes to


@dataclass(frozen=True, slots=True)
class PuzzleAttempted:
    system: str  # chesskite | chesstempo
    player_id: str
    puzzle_id: str
    correct: bool
    attempted_at: float
    mode: str | None = None
    seconds: float | None = None
    seconds_after_first_move: float | None = None
    challenge: bool = False
    puzzle_rating: float | None = None
    # Chess Tempo: attached by the engine at the first rated attempt of a UTC day in a mode: the
    # ratings of the mode's established users at that moment, from which the day's top group is taken.
    established: tuple[float, ...] | None = None


class GameSide(NamedTuple):
    """One player's side of one rated game, as kept in the history: what the game did to his rating."""

    cause_source: str
    cause_id: str
    player_id: str
    category: str
    delta: float
    at: float  # the game's finished_at (epoch seconds)


@dataclass(frozen=True, slots=True)
class AccountClosed:
    player_id: str
    reason: str
    closed_at: float
    # Attached by the engine before rating (docs/rules.md#fair-play): both sides of every
    # CSR game the account played in the refund window, from the history and the batch so far.
    games: tuple[GameSide, ...] = ()


@dataclass(frozen=True, slots=True)
class RatingImported:
    player_id: str
    system: str
    category: str
    rating: float
    imported_at: float
    rd: float | None = None
    volatility: float | None = None
    games: int | None = None
    wins: int | None = None
    draws: int | None = None
    losses: int | None = None
    events: int | None = None
    peak: float | None = None
    birth_year: int | None = None
    last_played_at: float | None = None
    # FIDE only (docs/rules.md#fide): the list's K (the K of the next period), and whether he was ever rated
    # 2300 / 2400 or more
    k: int | None = None
    ever_2300: bool | None = None
    ever_2400: bool | None = None


@dataclass(frozen=True, slots=True)
class PeriodClosed:
    """A rating list is published (`rating.period_closed`): every open period up to it closes."""

    system: str  # fide
    list: str  # "YYYY-MM": the list's month (published on its 1st)
    closed_at: float


Payload = GameFinished | EventFinished | PuzzleAttempted | AccountClosed | RatingImported | PeriodClosed


@dataclass(frozen=True, slots=True)
class Message:
    """One valid input message: the CloudEvent's identity plus its typed payload."""

    source: str
    id: str
    type: str  # game.finished | event.finished | puzzle.attempted | account.closed | rating.imported
    time: str  # the cause's time as RFC 3339 UTC text, used as `changed_at` on the way out
    payload: Payload
    ref: str | None = None  # game_id / competition_id / puzzle_id: `cause.ref` in rating.changed
