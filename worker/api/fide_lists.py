"""FIDE's monthly list as published (`GET /v1/fide/lists/{YYYY-MM}`): CSV, one line per listed player,
streamed as the states come from the database (by player id), in chunks.

Only the newest list the worker has applied is served (worker.ratings.fide.list_entry says why: once a
player plays again, his state no longer tells whether he was inactive on an older list, nor its K). A
month whose list has not been applied is a 404, one a later list replaced a 410: a platform downloads
each list when its `rating.period_closed` has been applied.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import AsyncIterator, Awaitable, Callable

from worker.api.problems import Problem
from worker.ratings import fide
from worker.ratings.state import RatingState

HEADER = b"player_id,rating,games,k,inactive,birth_year\n"
CHUNK_BYTES = 64 * 1024  # a chunk of the response: a few hundred lines
MONTH = re.compile(r"[0-9]{4}-(0[1-9]|1[0-2])")


def month_of(text: str) -> str | None:
    """The list month a path gives ("YYYY-MM", month 01 to 12), None when it is not one."""
    return text if MONTH.fullmatch(text) else None


def next_month(month: str) -> str:
    year, number = int(month[:4]), int(month[5:7])
    return f"{year + number // 12:04d}-{number % 12 + 1:02d}"


async def check_served(month: str, applied: Callable[[str], Awaitable[bool]]) -> None:
    """Raise the problem of a list that is not served: not applied yet (404), or replaced by the next (410).
    `applied(month)`: whether the worker has applied that month's `rating.period_closed`."""
    if await applied(next_month(month)):
        raise Problem(410, f"the list of {month} was replaced by the list of {next_month(month)}: only the newest "
                           "list is served, download each one when it is applied", "month")
    if not await applied(month):
        raise Problem(404, f"the list of {month} has not been applied (its rating.period_closed)", "month")


def _cell(value: int | bool | None) -> str | int:
    if value is None:
        return ""  # unknown (worker.ratings.fide.list_entry), or no birth year
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


async def csv_rows(states: AsyncIterator[tuple[str, RatingState]], month: str) -> AsyncIterator[bytes]:
    """The header, then a line per player on the list of `month`, in the order the states come, in chunks of
    about CHUNK_BYTES. Quoted by the csv module's rules (an id with a comma, a quote or a line break)."""
    yield HEADER
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    async for player_id, state in states:
        entry = fide.list_entry(state, month)
        if entry is None:
            continue
        writer.writerow([player_id, entry.rating, _cell(entry.games), _cell(entry.k), _cell(entry.inactive),
                         _cell(entry.birth_year)])
        if buffer.tell() >= CHUNK_BYTES:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue().encode()
