"""The contract's message types, each declared once.

An input type is its name (the CloudEvent `type`; its `data` schema is schemas/<name>.json), the field of
`data` whose time is the cause's (the message's time: `changed_at` of the changes it causes, and what
its parameter set is chosen by), how its payload is built (worker.contract.payloads), the hand-written
check of its usual shape where the hot path has one (worker.contract.fastcheck), and the input topic it
comes on by default (None: the platform sends it to any input topic). The decoder's tables and the
default of KAFKA_INPUT_TOPICS (worker.config) are built from these declarations; which system rates a
message is the systems' own declaration (worker.ratings.registry).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from worker.contract import payloads
from worker.contract.fastcheck import game_surely_valid

__all__ = ["INPUTS", "INPUT_TYPES", "OUTPUT_TYPE", "WITHOUT_REF", "InputType", "default_topics"]


@dataclass(frozen=True)
class InputType:
    name: str
    cause_field: str
    build: Callable[[dict], tuple[Any, float, str, str | None]]
    default_topic: str | None
    surely_valid: Callable[[dict], bool] | None = None
    has_ref: bool = True  # its changes carry a `cause.ref` (a game, competition, puzzle or list); else null


INPUTS: tuple[InputType, ...] = (
    InputType("game.finished", "finished_at", payloads.game_finished, "games.finished", game_surely_valid),
    InputType("event.finished", "finished_at", payloads.event_finished, "events.finished"),
    InputType("puzzle.attempted", "attempted_at", payloads.puzzle_attempted, "puzzles.attempted"),
    InputType("account.closed", "closed_at", payloads.account_closed, "accounts.closed", has_ref=False),
    InputType("rating.imported", "imported_at", payloads.rating_imported, "ratings.imported", has_ref=False),
    # a FIDE list, once a month: to any input topic (`rating-worker fide close-period` sends it to events.finished)
    InputType("rating.period_closed", "closed_at", payloads.period_closed, None),
)
INPUT_TYPES: tuple[str, ...] = tuple(t.name for t in INPUTS)
#: the types whose changes have no `cause.ref`: found in the history by their source and id
WITHOUT_REF: frozenset[str] = frozenset(t.name for t in INPUTS if not t.has_ref)
OUTPUT_TYPE = "rating.changed"


def default_topics() -> tuple[str, ...]:
    """The input topics the worker consumes unless told otherwise (KAFKA_INPUT_TOPICS)."""
    return tuple(t.default_topic for t in INPUTS if t.default_topic is not None)
