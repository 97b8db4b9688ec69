"""The progress line of an import: rewritten in place on a terminal, a line every 10 s otherwise."""

from __future__ import annotations

import time
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from worker.commands.importer.send import Counts


class Progress:
    """One progress line on stderr: rewritten in place on a terminal, a line every 10 s otherwise."""

    def __init__(self, counts: Counts, stream: IO[str], quiet: bool) -> None:
        self.counts, self.stream, self.quiet = counts, stream, quiet
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self.every = 0.5 if self.tty else 10.0
        self.next = self.started + self.every
        self.dirty = False

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def text(self) -> str:
        c = self.counts
        rate = c.read / max(self.elapsed(), 1e-9)
        return (f"{c.read:,} lines read, {c.done:,} imported, {c.rejected:,} rejected, "
                f"{c.duplicates:,} duplicate, {rate:,.0f} lines/s")

    def tick(self) -> None:
        now = time.monotonic()
        if self.quiet or now < self.next:
            return
        self.next = now + self.every
        if self.tty:
            self.stream.write("\r\x1b[K" + self.text())
            self.dirty = True
        else:
            self.stream.write(self.text() + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.dirty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.dirty = False
