"""What `rating-worker demo` shows: a snapshot of the demo (plain values) -> one rich renderable that fits
the terminal it is drawn in. Pure: the demo's loop gathers the snapshot (worker.commands.demo).

Sections, top to bottom: the stream and the worker (rates, consumer lag, changes awaiting publication, dead
letters with the last reason, the metrics URL and the log file); the leaderboard of each CSR category as
the seed defines one (established ratings only: RD <= 110, the "?" gone); apart from them, the biggest
provisional movers of the last half minute. The number of entries per leaderboard follows the
terminal's height, the number of leaderboards side by side its width.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Group
from rich.table import Table
from rich.text import Text

TITLE = "rating-worker demo"
BOARD_WIDTH = 30  # one leaderboard: "10 player-0123 1712.4 ±62" and its gaps
MOVERS_SHOWN = 6  # at most
MIN_ENTRIES = 3  # per leaderboard, while the height allows
STATUS_LINES = 7


@dataclass(frozen=True, slots=True)
class Entry:
    player_id: str
    rating: float
    rd: float | None


@dataclass(frozen=True, slots=True)
class Mover:
    player_id: str
    category: str
    moved: float  # the sum of his changes in the window
    rating: float
    rd: float


@dataclass(slots=True)
class Snapshot:
    games_sent: int = 0
    sent_per_s: float = 0.0
    duplicates: int = 0
    bad: int = 0
    handled: int = 0  # input messages the worker finished with, whatever their outcome
    handled_per_s: float = 0.0
    lag: int | None = None  # records behind the end of the input partitions (None: not measured yet)
    unpublished: int = 0
    dead_letters: int = 0
    last_dead_letter: str | None = None
    metrics_url: str = ""
    api_url: str = ""  # the blitz leaderboard's page of the read API (rating-worker serve beside the worker)
    log_path: str = ""
    boards: dict[str, list[Entry]] = field(default_factory=dict)  # category -> established, best first
    movers: list[Mover] = field(default_factory=list)
    movers_window_s: float = 30.0


def layout(width: int, height: int, categories: int, status: int = 6) -> tuple[int, int, int]:
    """(leaderboards side by side, entries per leaderboard, movers shown) for a terminal of width x height:
    the status lines and headings first, then the leaderboards, at least MIN_ENTRIES each, and the movers
    in what is left, at least one; more entries as the height allows."""
    per_row = max(1, min(categories, width // (BOARD_WIDTH + 2)))
    rows = -(-categories // per_row)
    left = height - status - 4  # the `status` lines, the title, a blank line, and the two parts' headings
    entries = max(MIN_ENTRIES, min(10, (left - MOVERS_SHOWN) // rows - 1))
    if rows * (entries + 1) + 1 > left:
        entries = max(1, min(MIN_ENTRIES, (left - 1) // rows - 1))
    movers = max(1, min(MOVERS_SHOWN, left - rows * (entries + 1)))
    return per_row, entries, movers


LABEL_WIDTH = len("dead letters") + 1


def _status(s: Snapshot) -> Table:
    """STATUS_LINES lines, each cut to the width (the log file has the whole of a dead letter's reason),
    but the log file's name, which wraps: it is where to look."""
    lines = Table.grid(padding=(0, 1))
    lines.add_column(style="bold", no_wrap=True, min_width=LABEL_WIDTH - 1)
    lines.add_column(overflow="fold")
    lag = "measuring" if s.lag is None else f"{s.lag:,}"

    def cut(text: str) -> Text:
        return Text(text, no_wrap=True, overflow="ellipsis")

    lines.add_row("stream", cut(f"{s.games_sent:,} games sent ({s.sent_per_s:,.0f}/s), {s.duplicates:,} duplicates, "
                                f"{s.bad:,} bad"))
    lines.add_row("worker", cut(f"{s.handled:,} messages processed ({s.handled_per_s:,.0f}/s), consumer lag {lag}"))
    lines.add_row("outbox", cut(f"{s.unpublished:,} changes awaiting publication"))
    last = f", last: {s.last_dead_letter}" if s.last_dead_letter else ""
    lines.add_row("dead letters", cut(f"{s.dead_letters:,}{last}"))
    lines.add_row("metrics", cut(s.metrics_url))
    lines.add_row("read API", cut(s.api_url or "not started"))
    lines.add_row("log", Text(s.log_path, overflow="fold"))
    return lines


def status_lines(s: Snapshot, width: int) -> int:
    return STATUS_LINES - 1 + max(1, -(-len(s.log_path) // max(1, width - LABEL_WIDTH)))


def _board(category: str, entries: list[Entry], shown: int) -> Table:
    board = Table(title=category.upper(), title_justify="left", title_style="bold", box=None, show_header=False,
                  padding=(0, 1, 0, 0), min_width=BOARD_WIDTH)
    board.add_column(justify="right", no_wrap=True)
    board.add_column(no_wrap=True, overflow="ellipsis", max_width=14)
    board.add_column(justify="right", no_wrap=True)
    board.add_column(justify="right", no_wrap=True, style="dim")
    for rank, e in enumerate(entries[:shown], start=1):
        board.add_row(str(rank), e.player_id, f"{e.rating:.1f}", "" if e.rd is None else f"±{e.rd:.0f}")
    if not entries:
        board.add_row("", Text("(nobody established yet)", style="dim"), "", "")
    return board


def _grid(cells: list, per_row: int) -> Table:
    grid = Table.grid(padding=(0, 2))
    for _ in range(per_row):
        grid.add_column()
    for i in range(0, len(cells), per_row):
        row = cells[i:i + per_row]
        grid.add_row(*row, *[""] * (per_row - len(row)))
    return grid


def _movers(s: Snapshot, shown: int) -> Table:
    movers = Table(box=None, show_header=False, padding=(0, 1, 0, 0))
    for justify in ("left", "left", "right", "right", "right"):
        movers.add_column(justify=justify, no_wrap=True, overflow="ellipsis")
    for m in s.movers[:shown]:
        movers.add_row(m.player_id, m.category, f"{m.rating - m.moved:.0f} -> {m.rating:.0f}?", f"{m.moved:+.0f}",
                       f"±{m.rd:.0f}")
    if not s.movers:
        movers.add_row(Text("(no provisional rating moved)", style="dim"), "", "", "", "")
    return movers


def screen(s: Snapshot, categories: list[str], width: int, height: int) -> Group:
    """The whole screen for a terminal of `width` x `height`."""
    status = status_lines(s, width)
    per_row, entries, movers = layout(width, height, len(categories), status)
    boards = [_board(c, s.boards.get(c, []), entries) for c in categories]
    # Leaderboards with fewer entries than their room (early on, nobody established) leave it to the movers.
    used = sum(1 + max(max(1, min(entries, len(s.boards.get(c, [])))) for c in categories[i:i + per_row])
               for i in range(0, len(categories), per_row))
    movers = max(movers, min(MOVERS_SHOWN, height - status - 4 - used))
    return Group(
        Text(f"{TITLE}   Ctrl-C stops everything", style="bold reverse", overflow="ellipsis", no_wrap=True),
        _status(s),
        Text(""),
        Text(f"Leaderboards: established ratings only (RD <= 110), top {entries}", style="bold underline",
             overflow="ellipsis", no_wrap=True),
        _grid(boards, per_row),
        Text(f"Provisional (?): the biggest movers of the last {s.movers_window_s:.0f} s, on no leaderboard",
             style="bold underline", overflow="ellipsis", no_wrap=True),
        _movers(s, movers),
    )
