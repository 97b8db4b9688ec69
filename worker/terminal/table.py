"""Tables for people: `rating-worker`'s operator commands and `evaluate` print their results with `table`,
fitted to the terminal's width (`terminal_width`); `cell` is how one value is written."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from datetime import datetime
from typing import Any

MIN_COLUMN = 6  # the narrowest a column gives way to, or its header's width


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def table(headers: list[str], rows: list[list[Any]], width: int | None = None) -> str:
    """A plain text table: numbers to one decimal (rounding is for display; JSON keeps them whole).

    Wider than `width` (the terminal's, when the command passes it), the columns give way from the right
    (where the tables keep their free text: causes, references, reasons), each down to its header or
    MIN_COLUMN, and their cells wrap onto more lines: nothing is cut, and a table that fits is drawn as
    it always was."""
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    gaps = 2 * (len(headers) - 1)
    if width is not None:
        for i in reversed(range(len(widths))):
            excess = sum(widths) + gaps - width
            if excess <= 0:
                break
            widths[i] -= min(excess, max(0, widths[i] - max(len(headers[i]), MIN_COLUMN)))

    def lines(row: list[str]) -> list[str]:
        parts = [textwrap.wrap(c, w, break_on_hyphens=False) or [""] if len(c) > w else [c]
                 for c, w in zip(row, widths, strict=True)]
        return ["  ".join((p[i] if i < len(p) else "").ljust(w) for p, w in zip(parts, widths, strict=True)).rstrip()
                for i in range(max(len(p) for p in parts))]

    out = lines(headers) + ["  ".join("-" * w for w in widths)]
    for r in cells:
        out += lines(r)
    return "\n".join(out)


def terminal_width() -> int | None:
    """The width to fit the output to: COLUMNS if set, else the terminal's when stdout is one; None when
    the output goes to a file or a pipe (a table is then drawn whole, for grep and friends)."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None
