"""A rating's history at a glance: a sparkline per rating for the terminal (`rating-worker player`), and
the series both it and the picture (worker.terminal.plot) are drawn from. Pure: values in, text out.

The sparkline's scale runs from the lowest rating to the peak (a floor far below would squeeze the line
into its top blocks); the peak's column is marked below the line with its value, and so is the floor:
"▁ = floor" when the lowest rating is the floor, its value otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

BLOCKS = "▁▂▃▄▅▆▇█"
PEAK_MARK = "▲"
FLOOR_TOLERANCE = 0.05  # a rating held by its floor equals it, up to how it was stored


@dataclass(frozen=True, slots=True)
class Point:
    """One change of a rating, as published."""

    at: datetime
    rating: float
    rd: float | None
    floor: float | None
    provisional: bool


@dataclass(frozen=True, slots=True)
class Series:
    system: str
    category: str
    points: tuple[Point, ...]  # oldest first; a change that left no rating (FIDE unlisted) is not a point
    changes: int = 0  # the rating's changes in all (its version)
    read: int = 0  # of them, the last ones read (an unlisted FIDE rating's change is read, but not a point)

    @property
    def peak(self) -> Point:
        """The highest rating reached (its first time)."""
        return max(self.points, key=lambda p: p.rating)  # max keeps the first of equals

    @property
    def floor(self) -> float | None:
        """The floor as of the latest change (a floor only rises)."""
        return self.points[-1].floor


def series_from_rows(rows: Iterable) -> list[Series]:
    """The player_series query's rows (oldest first per rating) -> one Series per rating."""
    grouped: dict[tuple[str, str], list[Point]] = {}
    changes: dict[tuple[str, str], int] = {}
    read: dict[tuple[str, str], int] = {}
    for r in rows:
        key = (r["system"], r["category"])
        points = grouped.setdefault(key, [])
        changes[key] = r["changes"]
        read[key] = read.get(key, 0) + 1
        if r["rating"] is not None:
            points.append(Point(r["changed_at"], r["rating"], r["rd"], r["floor"], bool(r["provisional"])))
    return [Series(system, category, tuple(points), changes[system, category], read[system, category])
            for (system, category), points in grouped.items() if points]


def _columns(values: list[float], width: int) -> tuple[list[float], int]:
    """`values` in at most `width` columns (each the last value of its share of the changes, so that the
    line ends at the rating now), and the column of the peak, which shows the peak itself."""
    if len(values) <= width:
        return list(values), max(range(len(values)), key=values.__getitem__)
    peak_index = max(range(len(values)), key=values.__getitem__)
    columns = [values[min(len(values) - 1, (i + 1) * len(values) // width - 1)] for i in range(width)]
    peak_column = min(width - 1, peak_index * width // len(values))
    columns[peak_column] = values[peak_index]
    return columns, peak_column


def sparkline(values: list[float], low: float, high: float) -> str:
    """One block per value, from `low` (▁) to `high` (█)."""
    span = high - low
    if span <= 0:
        return BLOCKS[len(BLOCKS) // 2 - 1] * len(values)
    top = len(BLOCKS) - 1
    return "".join(BLOCKS[max(0, min(top, round((v - low) / span * top)))] for v in values)


def _day(t: datetime) -> str:
    return t.strftime("%Y-%m-%d")


def render(series: Series, width: int) -> list[str]:
    """Three lines, none wider than `width`: what the rating is, its sparkline, and the peak and the floor."""
    now, peak, floor = series.points[-1], series.peak, series.floor
    mark = "?" if now.provisional else ""
    head = f"{series.system} {series.category}: {now.rating:.1f}{mark}, peak {peak.rating:.1f} ({_day(peak.at)})"
    shown = max(series.read, len(series.points))
    total = max(series.changes, shown)
    head += (f", floor {floor:.1f}" if floor is not None else "")
    head += f", last {shown:,} of {total:,} changes" if total > shown else f", {total:,} change" + "s" * (total > 1)
    values = [p.rating for p in series.points]
    low = min(values)
    low_text, high_text = f"{low:.0f}", f"{peak.rating:.0f}"
    margin = max(len(low_text), len(high_text)) + 3  # "  1400 " before the line
    columns, peak_column = _columns(values, max(1, width - margin))
    line = f"  {low_text:>{margin - 3}} " + sparkline(columns, low, peak.rating)
    marker = " " * (margin + peak_column) + PEAK_MARK + f" {high_text}"
    if len(marker) > width:  # the peak near the right end: its value goes to the left of the mark
        marker = " " * max(0, margin + peak_column - len(high_text) - 1) + f"{high_text} " + PEAK_MARK
    if floor is not None:  # said under the line's start, or after the peak's mark, wherever it fits
        if abs(low - floor) <= FLOOR_TOLERANCE:  # he sat on it: the line's bottom is the floor
            legend = f"{BLOCKS[0]} = floor"
        else:  # below the line, or (a floor that rose later) inside its range
            legend = f"floor {floor:.0f}" + (" below" if floor < low else "")
        if len(legend) + 4 <= len(marker) - len(marker.lstrip()):
            marker = "  " + legend + marker[len(legend) + 2:]
        elif len(marker) + len(legend) + 3 <= width:
            marker += "   " + legend
    return [_fit(head, width), _fit(line, width), _fit(marker, width)]


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
