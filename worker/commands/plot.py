"""`rating-worker player ID --plot FILE.png`: a picture of a player's ratings over time.

One panel per rating system (their scales differ: a CSR 1500 is no FIDE 1500), one line per category,
each with its RD band (rating +/- 2 RD, the 95% interval Glicko's papers use) where the system has an
RD. The line is drawn as steps: a rating holds from one change to the next.

matplotlib is the optional extra [plot] (`pip install 'rating-worker[plot]'`): the worker itself never
draws. Only its object API is used (a Figure and the Agg canvas, no pyplot): no global state, no display.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from worker.commands.chart import Series

BAND_RDS = 2.0  # the band is rating +/- 2 RD


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


def write(fig, path: str) -> None:
    """PNG, SVG or PDF by the file name's extension."""
    fig.savefig(path, dpi=100)
