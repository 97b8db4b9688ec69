"""`rating-worker evaluate FILE`: how well the ratings predicted the results of a history.

It replays the history as `replay` does (the same engine, the streaming store, the same chunks), and the
engine says what each message's system expected of it just before rating it (RatingSystem.predict: CSR,
White's expected score), against the ratings of every message before it; each prediction of a message
applied is scored against the result (worker.commands.evaluation).
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
from worker.commands.replay import counted, decoded_lines, dedupe_window, fair_play_closures, report_chunk
from worker.engine import apply_messages
from worker.ratings.inputs import Message
from worker.ratings.registry import system_for
from worker.store.stream import DEFAULT_DEDUPE_WINDOW_S, StreamStore


async def evaluate(lines: Iterable[bytes], store: StreamStore, errors=sys.stderr, counts: dict | None = None,
                   tick=lambda: None, chunk: int = 1000) -> list[Scores]:
    """Every (system, category)'s scores over the history, in the systems' and categories' order.

    Applied `chunk` messages a transaction, as `replay` applies them (the streaming store's clock and
    windows move as they do there); the engine says what each message's system expected of it just
    before rating it (BatchResult.predictions), and only the messages applied are scored."""
    tallies: dict[tuple[str, str], Tally] = {}
    counts = counts if counts is not None else {}
    counts.setdefault("lines", 0)
    counts.setdefault("predicted", 0)
    pending: list[Message] = []
    numbers: list[int] = []

    async def flush() -> None:
        result = await apply_messages(store, pending, predict=True)
        for i, (outcome, predictions) in enumerate(zip(result.messages, result.predictions, strict=True)):
            if predictions and outcome.status == "applied":
                system = system_for(pending[i])
                for p in predictions:
                    tallies.setdefault((system.name, p.category), Tally()).add(p.expected, p.observed)
                counts["predicted"] += 1
        report_chunk(store, pending, numbers, result, errors)
        pending.clear()
        numbers.clear()
        tick()

    for number, message in decoded_lines(lines, errors):
        counts["lines"] = number
        pending.append(message)
        numbers.append(number)
        if len(pending) >= chunk:
            await flush()
    if pending:
        await flush()
    return [scores(system, category, t) for (system, category), t in sorted(tallies.items())]


def _percent(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _tenth(s: Scores, i: int) -> str:
    for tenth, _, observed, n in s.calibration:
        if tenth == i:
            return f"{observed:.2f} ({n})"
    return "-"


def report(results: list[Scores], width: int | None) -> str:
    if not results:
        return ("nothing predicted: no valid message of a system that predicts (CSR games) was applied (bad lines "
                "are reported on stderr)")

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


def _plot_problem(path: str) -> str | None:
    """Why --plot could not be drawn, found before the replay (which may take hours), or None."""
    if why := unknown_format(path):
        return why
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "needs matplotlib: pip install 'rating-worker[plot]'"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.access(folder, os.W_OK):
        return f"{path!r}: cannot write in {folder}"
    return None


def main(args: argparse.Namespace) -> int:
    if args.plot and (why := _plot_problem(args.plot)):
        print(f"rating-worker evaluate: --plot {why}", file=sys.stderr)
        return 2
    try:
        source = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        print(f"rating-worker evaluate: cannot read {args.file!r}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    counts = {"lines": 0, "predicted": 0}
    name = "stdin" if args.file == "-" else os.path.basename(args.file)

    def progress(label: str) -> Progress:
        shown = Progress(label, describe=lambda: f"{counts['lines']:,} lines, {counts['predicted']:,} predicted",
                         count=lambda: counts["lines"], quiet=args.quiet)
        shown.track(source)
        return shown

    try:
        watched = None
        if source.seekable():  # a file is read twice, its fair-play closures first (as replay reads it)
            start = source.tell()
            first = progress(f"evaluate {name}, closures")
            try:
                watched = fair_play_closures(counted(source, counts, first))
            finally:
                first.end()
            source.seek(start)
            counts["lines"] = 0
        shown = progress(f"evaluate {name}")
        try:
            results = asyncio.run(evaluate(source, StreamStore(args.dedupe_window, watched=watched), shown, counts,
                                           shown.tick))
        finally:
            shown.end()
    finally:
        source.close()
    # The scores first: a picture that fails must not lose them.
    emit(args.json, [asdict(s) for s in results], report(results, terminal_width()))
    if args.plot:
        return _draw(results, args.plot)
    return 0


def _draw(results: list[Scores], path: str) -> int:
    from worker.commands.plot import PlotUnavailable, calibration_figure, write

    if not results:
        print(f"rating-worker evaluate: --plot: nothing predicted, {path} not drawn", file=sys.stderr)
        return 0
    try:
        write(calibration_figure(results), path)
    except (PlotUnavailable, OSError) as exc:
        print(f"rating-worker evaluate: --plot: {exc}", file=sys.stderr)
        return 2
    print(f"rating-worker evaluate: wrote {path}", file=sys.stderr)
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
