"""`rating-worker evaluate FILE`: how well the ratings predicted the results of a history.

It replays the history as `replay` does (the same engine, the streaming store, the same chunks), and the
engine says what each message's system expected of it just before rating it (RatingSystem.predict: CSR,
FIDE and US Chess White's expected score of each game, TSR each field comparison, ChessKite and Chess Tempo
the player's against the puzzle), against the ratings of every message before it; each prediction of a message applied is scored
against the result (worker.offline.evaluation). `--params` replays the history again per what-if, its
systems declared from those parameters for every message (registry.rated_with), and the runs are shown side
by side.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import textwrap
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict

import orjson

from worker.commands.operator import emit
from worker.offline import history
from worker.offline.evaluation import BUCKETS, COIN_LOG_LOSS, Scores, Tally, scores
from worker.ratings.inputs import Message
from worker.ratings.parameters import ParameterSet
from worker.ratings.registry import DECLARERS, rated_with, system_for
from worker.store.stream import DEFAULT_DEDUPE_WINDOW_S, StreamStore
from worker.terminal.plot import unknown_format
from worker.terminal.progress import Progress
from worker.terminal.table import table, terminal_width

DECLARED = "declared"  # the label of the parameter sets as the systems declare them


class ParamsFileError(ValueError):
    """A --params FILE that cannot be used (one line, exit 2)."""


def read_params(path: str) -> tuple[str, dict[str, ParameterSet]]:
    """A what-if's label and, per system it names, the parameter set to rate every message of it with: the
    system's latest set with the file's values instead. The file is JSON, e.g.
    `{"name": "white-50", "csr": {"white_advantage": 50}}` (name: the file's name without extension)."""
    try:
        with open(path, "rb") as f:
            data = orjson.loads(f.read())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ParamsFileError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not isinstance(data, dict):
        raise ParamsFileError(f"{path}: a JSON object of system -> {{parameter: value}}")
    label = data.pop("name", None) or os.path.splitext(os.path.basename(path))[0]
    if not isinstance(label, str) or label == DECLARED:
        raise ParamsFileError(f"{path}: name must be a string other than {DECLARED!r}")
    chosen = {}
    for system, values in data.items():
        if system not in DECLARERS:
            raise ParamsFileError(f"{path}: {system!r} is not a system with parameters ({', '.join(DECLARERS)})")
        latest = DECLARERS[system].sets[-1]
        if not isinstance(values, dict) or not values:
            raise ParamsFileError(f"{path}: {system}: an object of parameter -> value")
        known = {f.name: getattr(latest.params, f.name) for f in dataclasses.fields(latest.params)}
        for name, value in values.items():
            if name not in known:
                raise ParamsFileError(f"{path}: {system} has no parameter {name!r} (it has: {', '.join(known)})")
            was = known[name]
            if type(value) is not type(was) and not (isinstance(was, float) and type(value) is int):
                raise ParamsFileError(f"{path}: {system}.{name} is a {type(was).__name__} ({was!r}), not {value!r}")
        params = dataclasses.replace(latest.params, **{k: float(v) if isinstance(known[k], float) else v
                                                       for k, v in values.items()})
        chosen[system] = ParameterSet(label, None, params, f"what-if from {path}")
    if not chosen:
        raise ParamsFileError(f"{path}: names no system's parameters")
    return label, chosen


async def evaluate(lines: Iterable[bytes], store: StreamStore, errors=sys.stderr, counts: dict | None = None,
                   tick=lambda: None, chunk: int = 1000) -> list[Scores]:
    """Every (system, category)'s scores over the history, in the systems' and categories' order.

    Applied `chunk` messages a transaction, as `replay` applies them (the streaming store's clock and
    windows move as they do there); the engine says what each message's system expected of it just
    before rating it (BatchResult.predictions), and only the messages applied are scored. `counts`: the
    last line read so far, the messages predicted; at the end the lines read (not blank), those that were bad
    and the messages the rating code failed on (each reported on `errors`)."""
    tallies: dict[tuple[str, str], Tally] = {}
    counts = counts if counts is not None else {}
    for name in ("lines", "predicted", "read", "bad", "failed"):
        counts.setdefault(name, 0)
    decoded = Counter()

    def messages() -> Iterator[tuple[int, Message]]:
        for number, message in history.decoded_lines(lines, errors, decoded):
            counts["lines"] = number
            yield number, message

    async for rated in history.rated_chunks(messages(), store, chunk, predict=True):
        result = rated.result
        for i, (outcome, predictions) in enumerate(zip(result.messages, result.predictions, strict=True)):
            if predictions and outcome.status == "applied":
                system = system_for(rated.messages[i])
                for p in predictions:
                    tallies.setdefault((system.name, p.category), Tally()).add(p.expected, p.observed)
                counts["predicted"] += 1
        counts["failed"] += len(result.failed)
        history.report_chunk(store, rated.messages, rated.numbers, result, errors)
        tick()
    counts["read"], counts["bad"] = decoded["read"], decoded["bad"]
    return [scores(system, category, t) for (system, category), t in sorted(tallies.items())]


def _percent(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _tenth(s: Scores, i: int) -> str:
    for tenth, _, observed, n in s.calibration:
        if tenth == i:
            return f"{observed:.2f} ({n})"
    return "-"


def report(runs: dict[str, list[Scores]], width: int | None) -> str:
    """The scores of every run (a label per parameter choice: DECLARED, then each --params), side by side:
    per system a table of its categories (a row per run), then the calibration of each."""
    if not any(runs.values()):
        return ("nothing predicted: no rated game, event or puzzle attempt was applied (bad lines are reported "
                "on stderr)")
    several = len(runs) > 1

    def prose(text: str) -> str:
        return textwrap.fill(text, width) if width else text

    rows = sorted(((s.system, s.category, order, label, s) for order, (label, results) in enumerate(runs.items())
                   for s in results), key=lambda r: r[:3])
    lines = [prose(f"How well the ratings predicted each result before it (lower log-loss and Brier are better; "
                   f"a coin scores {COIN_LOG_LOSS:.3f} and 0.250; fav. won: how often the favourite won a decisive "
                   f"game; exp and obs: the mean expected and observed score, for CSR White's: the first-move "
                   f"adjustment is right when they agree)"), ""]
    headers = ["category"] + (["set"] if several else []) + ["games", "log-loss", "Brier", "fav. won", "exp", "obs"]
    for system in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == system]
        lines += [prose(f"{system}:" + (" a row per parameter set, * the best log-loss of each category"
                                        if several else "")),
                  table(headers, [[category] + ([label] if several else []) + [
                      s.n, f"{s.log_loss:.4f}" + _best(mine, category, s), f"{s.brier:.4f}",
                      _percent(s.favourite_accuracy), f"{s.mean_expected:.3f}", f"{s.mean_observed:.3f}"]
                      for _, category, _, label, s in mine], width), ""]
    for label, results in runs.items():
        for system in dict.fromkeys(s.system for s in results):
            mine = [s for s in results if s.system == system]
            title = f"{system}{f' ({label})' if several else ''}"
            lines += [prose(f"{title}: calibration, the observed score of each tenth of the expected (its games)"),
                      table(["expected"] + [s.category for s in mine],
                            [[f"{i / BUCKETS:.1f}-{(i + 1) / BUCKETS:.1f}"] + [_tenth(s, i) for s in mine]
                             for i in range(BUCKETS)], width), ""]
    return "\n".join(lines).rstrip()


def _best(rows, category: str, s: Scores) -> str:
    """'*' for the run with the lowest log-loss of its category, when there are several."""
    mine = [r[4].log_loss for r in rows if r[1] == category]
    return "*" if len(mine) > 1 and s.log_loss == min(mine) else ""


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
        what_ifs = [read_params(path) for path in args.params or ()]
    except ParamsFileError as exc:
        print(f"rating-worker evaluate: --params {exc}", file=sys.stderr)
        return 2
    labels = [DECLARED] + [label for label, _ in what_ifs]
    if len(set(labels)) != len(labels):
        print(f"rating-worker evaluate: --params: two runs named alike ({', '.join(labels)}): give each file its "
              f"own \"name\"", file=sys.stderr)
        return 2
    if what_ifs and args.file == "-":
        print("rating-worker evaluate: --params reads FILE once per parameter choice: not standard input",
              file=sys.stderr)
        return 2
    try:
        source = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        print(f"rating-worker evaluate: cannot read {args.file!r}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    counts = {"lines": 0, "predicted": 0, "read": 0, "bad": 0, "failed": 0}
    name = "stdin" if args.file == "-" else os.path.basename(args.file)

    def progress(label: str) -> Progress:
        shown = Progress(label, describe=lambda: f"{counts['lines']:,} lines, {counts['predicted']:,} predicted",
                         count=lambda: counts["lines"], quiet=args.quiet)
        shown.track(source)
        return shown

    runs: dict[str, list[Scores]] = {}
    troubles: dict[str, dict] = {}  # label -> its counts, when some lines were bad or some messages failed
    try:
        watched = None
        start = source.tell() if source.seekable() else 0
        if source.seekable():  # a file is read twice, its fair-play closures first (as replay reads it)
            first = progress(f"evaluate {name}, closures")
            try:
                watched = history.fair_play_closures(history.counted(source, counts, first))
            finally:
                first.end()
        for label, chosen in [(DECLARED, {}), *what_ifs]:
            if source.seekable():
                source.seek(start)
            counts.update(lines=0, predicted=0, read=0, bad=0, failed=0)
            shown = progress(f"evaluate {name}" + (f", {label}" if what_ifs else ""))
            try:
                with rated_with(chosen):
                    runs[label] = asyncio.run(evaluate(source, StreamStore(args.dedupe_window, watched=watched),
                                                       shown, counts, shown.tick))
            finally:
                shown.end()
            if counts["bad"] or counts["failed"]:
                troubles[label] = dict(counts)
    finally:
        source.close()
    # The scores first: a picture that fails must not lose them.
    listed = [{**asdict(s), "parameters": label} for label, results in runs.items() for s in results]
    emit(args.json, listed, report(runs, terminal_width()))
    drawn = _draw(runs, args.plot) if args.plot else 0
    for label, c in troubles.items():  # as replay: scores of what could be read, but not a clean exit
        print(f"rating-worker evaluate {name}" + (f", {label}" if what_ifs else "") + f": {c['read']:,} lines read: "
              f"{c['predicted']:,} predicted, {c['bad']:,} bad, {c['failed']:,} failed (each reported above)",
              file=sys.stderr)
    return drawn or (1 if troubles else 0)


def _draw(runs: dict[str, list[Scores]], path: str) -> int:
    from worker.terminal.plot import PlotUnavailable, calibration_figure, write

    if not any(runs.values()):
        print(f"rating-worker evaluate: --plot: nothing predicted, {path} not drawn", file=sys.stderr)
        return 0
    try:
        write(calibration_figure(runs), path)
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
        "against expected. What each system predicts: CSR a game, FIDE and US Chess each game of an event between "
        "two rated players, TSR each field comparison of an event, ChessKite and Chess Tempo an attempt (the "
        "player's expected score against the puzzle). --plot draws the calibration. With "
        "--params, the history is replayed once more per FILE with other parameters (a what-if), and the scores "
        "are shown side by side with those of the parameter sets as declared. Bad lines are reported on stderr "
        "with their line number and skipped; the scores of the rest are shown, then a summary, and exit 1. "
        "Example: rating-worker evaluate history.jsonl --params white-50.json --plot calibration.png"))
    p.add_argument("file", help="input file, '-' for stdin")
    p.add_argument("--plot", metavar="FILE", help="also draw the calibration to FILE (.png, .svg or .pdf; needs "
                                                  "the [plot] extra)")
    p.add_argument("--dedupe-window", type=history.dedupe_window, default=DEFAULT_DEDUPE_WINDOW_S, metavar="DURATION",
                   help="as for replay (default 7d)")
    p.add_argument("--params", action="append", metavar="FILE",
                   help="replay again with these parameters and compare (repeatable): a JSON object of system -> "
                        "{parameter: value} replacing the system's latest values for every message, with an optional "
                        "\"name\", e.g. {\"name\": \"white-50\", \"csr\": {\"white_advantage\": 50}}; the "
                        "parameters are the fields of each system's Params in worker/ratings/")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress")
    p.set_defaults(func=main)
