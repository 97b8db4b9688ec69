"""`rating-worker evaluate FILE`: how well the ratings predicted the results of a history.

It replays the history as `replay` does (the same engine, the streaming store), and before each message
asks its system what the ratings expected (RatingSystem.predict: CSR, White's expected score); once the
message is applied, the prediction is scored against the result (worker.commands.evaluation). One
message per transaction, so that every prediction sees the ratings of every message before it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import textwrap
from collections.abc import Iterable
from dataclasses import asdict

from worker.commands.evaluation import BUCKETS, COIN_LOG_LOSS, Scores, Tally, scores
from worker.commands.operator import emit, table, terminal_width
from worker.commands.plot import unknown_format
from worker.commands.progress import Progress
from worker.commands.replay import decoded_lines, dedupe_window, fair_play_closures
from worker.engine import apply_messages
from worker.ratings.registry import system_for
from worker.store.stream import DEFAULT_DEDUPE_WINDOW_S, StreamStore


async def evaluate(lines: Iterable[bytes], store: StreamStore, errors=sys.stderr,
                   counts: dict | None = None, tick=lambda: None) -> list[Scores]:
    """Every (system, category)'s scores over the history, in the systems' and categories' order."""
    tallies: dict[tuple[str, str], Tally] = {}
    counts = counts if counts is not None else {}
    counts.setdefault("lines", 0)
    counts.setdefault("predicted", 0)
    for number, message in decoded_lines(lines, errors):
        counts["lines"] = number
        system = system_for(message)
        predictions = system.predict(message.payload, store.states) if system is not None else ()
        result = await apply_messages(store, [message])
        if predictions and result.messages[0].status == "applied":
            for p in predictions:
                tallies.setdefault((system.name, p.category), Tally()).add(p.expected, p.observed)
            counts["predicted"] += 1
        if not number & 0xFF:
            tick()
    return [scores(system, category, t) for (system, category), t in sorted(tallies.items())]


def _percent(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _tenth(s: Scores, i: int) -> str:
    for expected, observed, n in s.calibration:
        if min(BUCKETS - 1, int(expected * BUCKETS)) == i:
            return f"{observed:.2f} ({n})"
    return "-"


def report(results: list[Scores], width: int | None) -> str:
    if not results:
        return "nothing predicted: the history has no message of a system that predicts (CSR games)"

    def prose(text: str) -> str:
        return textwrap.fill(text, width) if width else text

    lines = [prose(f"How well the ratings predicted each result before it (lower log-loss and Brier are better; "
                   f"a coin scores {COIN_LOG_LOSS:.3f} and 0.250; favourite: how often the favourite won a "
                   f"decisive game)"), table(
        ["system", "category", "games", "log-loss", "Brier", "favourite", "expected", "observed"],
        [[s.system, s.category, s.n, f"{s.log_loss:.4f}", f"{s.brier:.4f}", _percent(s.favourite_accuracy),
          f"{s.mean_expected:.3f}", f"{s.mean_observed:.3f}"] for s in results], width),
        prose("(CSR: expected and observed are White's mean score: the first-move adjustment is right when they "
              "agree)"),
        ""]
    for system in dict.fromkeys(s.system for s in results):
        mine = [s for s in results if s.system == system]
        lines += [prose(f"{system}: calibration, the observed score of each tenth of the expected (its games)"),
                  table(["expected"] + [s.category for s in mine],
                        [[f"{i / BUCKETS:.1f}-{(i + 1) / BUCKETS:.1f}"] + [_tenth(s, i) for s in mine]
                         for i in range(BUCKETS)], width), ""]
    return "\n".join(lines).rstrip()


def main(args: argparse.Namespace) -> int:
    if args.plot and (why := unknown_format(args.plot)):
        print(f"rating-worker evaluate: --plot {why}", file=sys.stderr)
        return 2
    try:
        source = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        print(f"rating-worker evaluate: cannot read {args.file!r}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    counts = {"lines": 0, "predicted": 0}
    watched = None
    if source.seekable():  # a file is read twice, its fair-play closures first (as replay reads it)
        start = source.tell()
        watched = fair_play_closures(source)
        source.seek(start)
    name = "stdin" if args.file == "-" else os.path.basename(args.file)
    progress = Progress(f"evaluate {name}", describe=lambda: f"{counts['lines']:,} lines, "
                        f"{counts['predicted']:,} predicted", count=lambda: counts["lines"], quiet=args.quiet)
    progress.track(source)
    try:
        results = asyncio.run(evaluate(source, StreamStore(args.dedupe_window, watched=watched), progress, counts,
                                       progress.tick))
    finally:
        progress.end()
        source.close()
    if args.plot and results:
        from worker.commands.plot import PlotUnavailable, calibration_figure, write

        try:
            write(calibration_figure(results), args.plot)
        except (PlotUnavailable, OSError) as exc:
            print(f"rating-worker evaluate: --plot: {exc}", file=sys.stderr)
            return 2
        print(f"rating-worker evaluate: wrote {args.plot}", file=sys.stderr)
    emit(args.json, [asdict(s) for s in results], report(results, terminal_width()))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("evaluate", help="how well the ratings predicted the results of a history", description=(
        "Replay CloudEvents JSON lines (as `replay` does, same engine) and score, per system and category, what "
        "the ratings expected before each result against the result: log-loss, Brier score, how often the "
        "favourite won, calibration by tenth of the expected score, and for CSR White's mean score observed "
        "against expected. Systems that predict: CSR (game.finished). --plot draws the calibration. "
        "Example: rating-worker evaluate history.jsonl --plot calibration.png"))
    p.add_argument("file", help="input file, '-' for stdin")
    p.add_argument("--plot", metavar="FILE", help="also draw the calibration to FILE (.png, .svg or .pdf; needs "
                                                  "the [plot] extra)")
    p.add_argument("--dedupe-window", type=dedupe_window, default=DEFAULT_DEDUPE_WINDOW_S, metavar="DURATION",
                   help="as for replay (default 7d)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress")
    p.set_defaults(func=main)
