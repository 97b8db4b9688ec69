"""The progress of a long command (import, replay, and what comes after them), on stderr.

On a terminal: a bar (rich's) with the share of the input read, the command's own counts, the rate and
the time left, redrawn in place and cleared at the end so that the summary is what stays. Otherwise
(a log file, CI, a pipe): a plain line every `every` seconds, with the same figures, so that a long run
in a job's log still says how far it is.

How far is measured in bytes of the input file (what the operating system has handed over, read-ahead
included: close enough for a bar), so that the time left is known before the last line is counted; from
a pipe there is no total, and the bar shows the rate and counts without a time left.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress as Bar


__all__ = ["Progress", "file_position"]


def file_position(fileobj) -> tuple[Callable[[], int], int] | None:
    """(how many bytes of it were read so far, its size) for a regular file, through any wrapper that
    has fileno() (a gzip or text stream gives its file's compressed position); None for a pipe or a
    terminal, which have no size."""
    try:
        fd = fileobj.fileno()
        info = os.fstat(fd)
    except (AttributeError, OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (lambda: os.lseek(fd, 0, os.SEEK_CUR)), info.st_size


BAR = 12  # characters of the bar itself


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class Progress:
    """One progress display. `describe()` gives the command's counts ("1,234 lines, 3 rejected") and
    `count()` the number the rate is of (lines); `track(fileobj)` tells how far through its input it is."""

    def __init__(self, label: str, describe: Callable[[], str], count: Callable[[], int], unit: str = "lines",
                 stream: IO[str] | None = None, quiet: bool = False, every: float = 10.0,
                 terminal: bool | None = None) -> None:
        self.label, self.describe, self.count, self.unit = label, describe, count, unit
        self.stream = stream if stream is not None else sys.stderr
        self.quiet, self.every = quiet, every
        self.terminal = bool(getattr(self.stream, "isatty", lambda: False)()) if terminal is None else terminal
        self.started = time.monotonic()
        self.next = self.started + (0.2 if self.terminal else every)
        self._position: Callable[[], int] | None = None
        self._total: int | None = None
        self._bar: Bar | None = None
        self._task = None
        self._notes: list[str] = []  # written while the bar is up, printed above it at the next redraw
        self._input = None
        self._last_fraction: float | None = None
        self._from = 0.0  # the share of the input already read when it was tracked

    def track(self, fileobj) -> None:
        """Measure the share done by how far `fileobj` (the input) has been read, if it is a file."""
        found = file_position(fileobj)
        if found is not None:
            self._input = fileobj
            self._position, self._total = found
            # Read from here on (a run that resumes part way): the time left is the rate since then.
            self._from = self.fraction() or 0.0

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def fraction(self) -> float | None:
        """The share of the input read, or None when its size is not known."""
        if self._position is None or not self._total:
            return None
        if getattr(self._input, "closed", False):  # read to its end (its descriptor may be another file's now)
            return self._last_fraction
        try:
            self._last_fraction = min(1.0, self._position() / self._total)
        except OSError:
            pass
        return self._last_fraction

    def line(self) -> str:
        """The plain line: what a log shows every `every` seconds."""
        elapsed = max(self.elapsed(), 1e-9)
        text = f"{self.label}: {self.describe()}, {self.count() / elapsed:,.0f} {self.unit}/s"
        done = self.fraction()
        if done is not None:
            text += f", {done:.0%} of the input" + (f", {self._left(elapsed, done)} left" if done > self._from else "")
        return text + f", {_duration(elapsed)} elapsed"

    def _left(self, elapsed: float, done: float) -> str:
        return _duration(elapsed * (1 - done) / (done - self._from))

    def tick(self) -> None:
        """Cheap enough to call every few hundred lines: it does something only when it is due."""
        now = time.monotonic()
        if self.quiet or now < self.next:
            return
        if self.terminal:
            self.next = now + 0.2
            self._draw()
        else:
            self.next = now + self.every
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def _draw(self) -> None:
        elapsed = max(self.elapsed(), 1e-9)
        done = self.fraction()
        rate = f"{self.count() / elapsed:,.0f} {self.unit}/s"
        left = self._left(elapsed, done) + " left" if done is not None and done > self._from else ""
        if self._bar is None:
            # Imported at the first bar, not with the command: rich takes a tenth of a second to import,
            # which a run that is not on a terminal (a pipe, a job) never needs.
            from rich.console import Console
            from rich.progress import BarColumn, TaskProgressColumn, TextColumn
            from rich.progress import Progress as Bar
            from rich.table import Column

            self._columns = [Column(no_wrap=True, overflow="ellipsis"), Column(no_wrap=True), Column(no_wrap=True)]
            self._bar = Bar(
                # markup=False: a file name such as "ratings[old].csv" is text, not rich markup
                TextColumn("{task.description} {task.fields[counts]}", markup=False, table_column=self._columns[0]),
                BarColumn(bar_width=BAR), TaskProgressColumn(table_column=Column(width=4)),
                TextColumn("{task.fields[rate]}", markup=False, table_column=self._columns[1]),
                TextColumn("{task.fields[left]}", markup=False, table_column=self._columns[2]),
                console=Console(file=self.stream, force_terminal=True), transient=True, auto_refresh=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self._total, counts="", rate="", left="")
        # The terminal's width is shared out here: the rate and the time left whole, the bar and its share
        # at their size, and the label with the counts in what is left (cut with an ellipsis): rich would
        # otherwise squeeze the bar away first.
        info, kept_rate, kept_left = self._columns
        kept_rate.width, kept_left.width = len(rate), len(left)
        counts = self.describe()
        room = self._bar.console.width - BAR - 4 - len(rate) - len(left) - 4
        info.width = max(8, min(room, len(self.label) + 1 + len(counts)))
        self._bar.update(self._task, completed=(done or 0) * (self._total or 0), counts=counts,
                         rate=rate, left=left)
        self._print_notes()
        self._bar.refresh()

    def write(self, text: str) -> None:
        """A note for the reader (a bad line, a warning): above the bar on a terminal, so that the bar stays
        whole and at the bottom, gathered and printed at the next redraw (printing above a live bar costs
        ~0.3 ms a call: a million bad lines would cost minutes); as is otherwise. Lets a Progress stand for
        the stream it writes to."""
        if self._bar is not None:
            self._notes.append(text)
        else:
            self.stream.write(text)

    def _print_notes(self) -> None:
        if self._notes and self._bar is not None:
            self._bar.console.print("".join(self._notes), end="", markup=False, highlight=False, emoji=False,
                                    soft_wrap=True)
        self._notes.clear()

    def end(self) -> None:
        """Take the bar away (the command prints its summary next); a plain line is left as it is."""
        if self._bar is not None:
            try:
                self._print_notes()
            finally:
                self._bar.stop()
                self._bar = None
