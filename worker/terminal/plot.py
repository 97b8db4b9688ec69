"""Pictures: a player's ratings over time (`rating-worker player ID --plot FILE.png`), and how well ratings
predicted results (`rating-worker evaluate --plot`).

One panel per rating system (their scales differ: a CSR 1500 is no FIDE 1500), one line per category,
each with its RD band (rating +/- 2 RD, the 95% interval Glicko's papers use) where the system has an
RD. The line is drawn as steps: a rating holds from one change to the next.

matplotlib is the optional extra [plot] (`pip install 'rating-worker[plot]'`): the worker itself never
draws. Only its object API is used (a Figure and the Agg canvas, no pyplot): no global state, no display.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from worker.terminal.chart import Series

if TYPE_CHECKING:  # only named here
    from worker.offline.evaluation import Scores

BAND_RDS = 2.0  # the band is rating +/- 2 RD
FORMATS = (".png", ".svg", ".pdf")  # what write() can write, told by the file name


def unknown_format(path: str) -> str | None:
    """Why `path` cannot be written (checked before the work that draws it), or None."""
    if path.lower().endswith(FORMATS):
        return None
    return f"{path!r}: the file name ends the format: {', '.join(FORMATS)}"


class PlotUnavailable(Exception):
    """matplotlib is not installed."""


def figure(player_id: str, series: Sequence[Series]):
    """The picture as a matplotlib Figure (not yet written: tests read its data from it)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'rating-worker[plot]'") from None
    systems = sorted({s.system for s in series})
    fig = Figure(figsize=(10, 3.2 * max(1, len(systems))), layout="constrained")
    axes = fig.subplots(len(systems), 1, sharex=True, squeeze=False)[:, 0]
    last = max(s.points[-1].at for s in series)
    for ax, system in zip(axes, systems, strict=True):
        for s in (s for s in series if s.system == system):
            # A rating holds until the next change: the last one is drawn on to the picture's latest change,
            # and a rating with a single change gets a dot (a step of one point draws nothing).
            points = list(s.points)
            if points[-1].at < last:
                points.append(replace(points[-1], at=last))
            times = [p.at for p in points]
            (line,) = ax.step(times, [p.rating for p in points], where="post", label=s.category,
                              marker="o" if len(points) == 1 else None)
            with_rd = [p for p in points if p.rd is not None]
            if len(with_rd) == 1:
                ax.errorbar([with_rd[0].at], [with_rd[0].rating], yerr=[BAND_RDS * with_rd[0].rd], capsize=4,
                            color=line.get_color(), label=f"{s.category} ±{BAND_RDS:g} RD")
            elif with_rd:
                ax.fill_between([p.at for p in with_rd], [p.rating - BAND_RDS * p.rd for p in with_rd],
                                [p.rating + BAND_RDS * p.rd for p in with_rd], step="post", alpha=0.2,
                                color=line.get_color(), label=f"{s.category} ±{BAND_RDS:g} RD", linewidth=0)
        ax.set_title(system)
        ax.set_ylabel("rating")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    axes[-1].set_xlabel("time of the change (the message's own time)")
    fig.suptitle(f"{player_id}: ratings over time")
    return fig


STYLES = ("-", "-.", ":", (0, (5, 1, 1, 1, 1, 1)))  # each run of a calibration: declared, then each --params
# (the diagonal's "--" is none of them)


def calibration_figure(runs: Mapping[str, Sequence[Scores]]):
    """`rating-worker evaluate --plot`: per system, the mean observed score against the mean expected, a
    point per tenth of the expected score (its size: its games), a line per category; with several runs (the
    parameter sets as declared, and each --params) a category keeps its colour and each run has its own line
    style. On the diagonal the ratings predict exactly."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'rating-worker[plot]'") from None
    several = len(runs) > 1
    results = [(label, s) for label, scores in runs.items() for s in scores]
    systems = sorted({s.system for _, s in results})
    fig = Figure(figsize=(6.5 * len(systems), 6), layout="constrained")
    axes = fig.subplots(1, len(systems), squeeze=False)[0]
    for ax, system in zip(axes, systems, strict=True):
        ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect")
        colours = {}
        for label, s in ((label, s) for label, s in results if s.system == system):
            expected = [e for _, e, _, _ in s.calibration]
            observed = [o for _, _, o, _ in s.calibration]
            name = f"{s.category}, {label}" if several else s.category
            style = STYLES[list(runs).index(label) % len(STYLES)]
            (line,) = ax.plot(expected, observed, marker=None, linestyle=style, color=colours.get(s.category),
                              label=f"{name} ({s.n:,}, log-loss {s.log_loss:.3f})")
            colours.setdefault(s.category, line.get_color())
            ax.scatter(expected, observed, s=[max(6.0, 300.0 * n / s.n) for *_, n in s.calibration],
                       color=line.get_color())
        ax.set_title(f"{system}: observed against expected score")
        ax.set_xlabel("expected score before the game (mean of a tenth)")
        ax.set_ylabel("observed score")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize="small")
    return fig


def write(fig, path: str) -> None:
    """PNG, SVG or PDF by the file name's extension."""
    fig.savefig(path, dpi=100)
