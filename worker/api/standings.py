"""Where a rating stands on its leaderboard (a player's `rank` and `percentile`), from each board's ratings
held in memory, sorted, and read again at most every AGE_S seconds.

Counting the board for every request cost what the board holds: 40 to 60 ms for a player in the middle
of a board of 280,000 established ratings, over a second at p99 with a worker writing beside it
(`./dev bench api`, docs/performance.md). A sorted array answers by bisection in microseconds; the price
is a rank up to `max_age_s` old (API_RANKS_MAX_AGE_S; the player's own rating is always the current one,
placed among the others as they were) and one read of the board per `max_age_s` per process while the
board is asked for. A board is read the first time it is asked for; later, an answer uses the array in
hand while one task reads the board again (never two at once for a board). With `max_age_s` 0 every
answer reads the board itself (exact, at the price of the whole board per request).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from array import array

from worker.store.reads import OperatorReads

logger = logging.getLogger("rating_worker.api")

class Standings:
    """Each board's ratings, ascending, as a process last read them."""

    def __init__(self, db, max_age_s: float) -> None:
        self.db, self.max_age_s = db, max_age_s
        self._boards: dict[tuple[str, str], tuple[float, array]] = {}
        self._reading: dict[tuple[str, str], asyncio.Task] = {}

    async def place(self, system: str, category: str, rating: float) -> tuple[int, float]:
        """(rank, percentile) of `rating` on the board: 1 + how many rate higher, and the share (in %) of
        the board that rates lower."""
        ratings = await self._ratings((system, category))
        size = len(ratings)
        above = size - bisect.bisect_right(ratings, rating)
        below = bisect.bisect_left(ratings, rating)
        return above + 1, round(100.0 * below / size, 2) if size else 0.0

    async def _ratings(self, board: tuple[str, str]) -> array:
        if self.max_age_s == 0:
            return await OperatorReads(self.db).board_ratings(*board)
        held = self._boards.get(board)
        if held is None:
            return await self._read_once(board)
        if time.monotonic() - held[0] > self.max_age_s and board not in self._reading:
            self._reading[board] = asyncio.create_task(self._read(board), name=f"standings {board[0]} {board[1]}")
            self._reading[board].add_done_callback(self._done)
        return held[1]

    async def _read_once(self, board: tuple[str, str]) -> array:
        """The first read of a board: the requests that ask meanwhile wait for the same one."""
        task = self._reading.get(board)
        if task is None:
            task = self._reading[board] = asyncio.create_task(self._read(board), name=f"standings {board[0]}")
            task.add_done_callback(self._done)
        return await asyncio.shield(task)

    async def _read(self, board: tuple[str, str]) -> array:
        try:
            taken = time.monotonic()
            ratings = await OperatorReads(self.db).board_ratings(*board)
            self._boards[board] = (taken, ratings)
            return ratings
        finally:
            self._reading.pop(board, None)

    @staticmethod
    def _done(task: asyncio.Task) -> None:
        # A failed read in the background is logged; the next request tries again (a first read's failure
        # reaches its request, and is answered like any other database failure).
        if not task.cancelled() and task.exception() is not None:
            logger.warning("reading a leaderboard for ranks failed: %s", task.exception())
