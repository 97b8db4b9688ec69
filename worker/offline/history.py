"""A history rated outside the worker's loop, for `replay`, `backfill` and `evaluate` alike: CloudEvents
JSON lines (a file or stdin) decoded in order, a bad line reported with its number and skipped, and the
messages run through the worker's engine (apply_messages) a chunk at a time, each chunk's result reported
(what the rating code failed on, what a short history may have changed). What each command does with a
chunk's result (write its changes, write them to PostgreSQL, score its predictions) is the command's.
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from worker.contract.decode import decode_rateable
from worker.contract.reasons import BadMessage
from worker.engine import BatchResult, apply_messages
from worker.ratings.fairplay import FAIR_PLAY
from worker.ratings.inputs import Message
from worker.ratings.registry import system_for
from worker.store.base import StateStore

if TYPE_CHECKING:  # the commands' progress, only named here
    from worker.terminal.progress import Progress

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def dedupe_window(text: str) -> float | None:
    """`7d`, `12h`, `90m`, `3600` (seconds), or `all` (None: every id is kept)."""
    text = text.strip().lower()
    if text == "all":
        return None
    number, unit = (text[:-1], text[-1]) if text[-1:] in _UNITS else (text, "s")
    try:
        seconds = float(number) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration such as 7d, 12h, 90m or 3600, or 'all'") from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise argparse.ArgumentTypeError(f"{text!r}: must be more than 0 and finite (or 'all')")
    return seconds


def decode_line(number: int, line: bytes, errors) -> Message | None:
    """The message of a (stripped, non-blank) line, or None: a bad line, reported with its number and reason."""
    try:
        return decode_rateable(line)[0]
    except BadMessage as exc:
        errors.write(f"line {number}: {exc.error_class}: {exc.reason}\n")
        return None


def decoded_lines(lines: Iterable[bytes], errors, tally: Counter | None = None) -> Iterator[tuple[int, Message]]:
    """Valid messages in order; a bad line is reported with its number and reason, and skipped (counted
    in tally["bad"], the lines that are not blank in tally["read"])."""
    tally = Counter() if tally is None else tally
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line:
            continue
        tally["read"] += 1
        if (message := decode_line(number, line, errors)) is not None:
            yield number, message
        else:
            tally["bad"] += 1


def fair_play_closures(lines: Iterable[bytes]) -> dict[str, tuple[float, float]]:
    """The accounts a stream closes for fair play, each with its first and last closure time: the players whose
    games a replay must keep for their refunds (a first, cheap pass; only lines naming the type are decoded)."""
    players: dict[str, tuple[float, float]] = {}
    for line in lines:
        line = line if isinstance(line, bytes) else line.encode()
        if b"account.closed" not in line:  # a line that spells it otherwise is reported when it asks
            continue
        try:
            message, _ = decode_rateable(line.strip())
        except BadMessage:
            continue
        closure = message.payload
        if message.type == "account.closed" and getattr(closure, "reason", None) == FAIR_PLAY:
            first, last = players.get(closure.player_id, (math.inf, -math.inf))
            players[closure.player_id] = (min(first, closure.closed_at), max(last, closure.closed_at))
    return players


@dataclass(frozen=True, slots=True)
class Chunk:
    """Messages applied together, with their line numbers, and the engine's result of them."""

    messages: list[Message]
    numbers: list[int]
    result: BatchResult


async def rated_chunks(numbered: Iterable[tuple[int, Message]], store: StateStore, chunk: int,
                       predict: bool = False) -> AsyncIterator[Chunk]:
    """The messages (with their line numbers, in order) applied to `store` `chunk` at a time, as one
    transaction each (a sweep, a FIDE list, in chunks of its own); the last chunk may be shorter. The next
    lines are read only once the caller is done with a chunk. `predict`: the result says what each
    message's system expected of it just before rating it."""
    messages: list[Message] = []
    numbers: list[int] = []
    for number, message in numbered:
        messages.append(message)
        numbers.append(number)
        if len(messages) >= chunk:
            yield Chunk(messages, numbers, await apply_messages(store, messages, predict=predict))
            messages, numbers = [], []
    if messages:
        yield Chunk(messages, numbers, await apply_messages(store, messages, predict=predict))


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def report_chunk(store, messages: list[Message], numbers: list[int], result, errors) -> None:
    """What a chunk's result has to say on stderr: the messages the rating code failed on, and those a
    short history may have changed (each with its line)."""
    for index, error in result.failed:
        errors.write(f"line {numbers[index]}: rating_error: {error}\n")
    _report_short_history(store, messages, numbers, result, errors)


def _report_short_history(store, messages: list[Message], numbers: list[int], result, errors) -> None:
    """A message that asked a StreamStore for history it no longer keeps (a fair-play closure more than
    the dedupe window late, read from stdin) and was applied may have refunded less than the worker would:
    said loudly, once, with its line. One not applied (an account already closed) changed nobody."""
    short = store.short_histories()
    if not short:
        return
    for i, message in enumerate(messages):
        system = system_for(message)
        query = system.history(message.payload) if system is not None else None
        kept_from = short.pop(query, None) if query is not None else None
        if kept_from is None or result.messages[i].status != "applied":
            continue
        kept = f"kept only from {_iso(kept_from)}" if kept_from > -math.inf else "not kept (not a watched player)"
        errors.write(f"line {numbers[i]}: incomplete_history: {query.player_id}'s {query.system} {query.cause_type} "
                     f"history since {_iso(query.since)} asked for, {kept}: the result may differ from the "
                     f"worker's; replay a regular FILE (read twice, exact) or with a longer --dedupe-window, "
                     f"or --dedupe-window all\n")


def counted(lines: Iterable[bytes], counts: dict, progress: Progress) -> Iterator[bytes]:
    """The lines, counted into counts['lines'] and the progress ticked as they go (a first pass)."""
    for counts["lines"], line in enumerate(lines, start=1):  # noqa: B007 - the progress reads it
        if not counts["lines"] & 0x3FFF:
            progress.tick()
        yield line
