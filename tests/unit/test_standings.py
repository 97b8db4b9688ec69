"""A rating's place on its board from the board held in memory (worker.api.standings): rank and percentile
by bisection, one read of a board for requests at once, a read again once older than the setting, and with
0 a read for every request."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace

from worker.api import standings as standings_mod
from worker.api.standings import Standings


class Board:
    """A database that answers the board_ratings statement with the ratings it holds, counting its reads."""

    def __init__(self, ratings: list[float]) -> None:
        self.ratings, self.reads = ratings, 0

    async def fetchval(self, sql: str, system: str, category: str) -> bytes:
        assert "board_ratings" in sql
        self.reads += 1
        await asyncio.sleep(0.01)
        return b"".join(struct.pack(">d", r) for r in sorted(self.ratings))  # as float8send writes them


async def test_rank_and_percentile_by_bisection():
    s = Standings(Board([2000, 1900, 1900, 1800, 1700]), max_age_s=10)
    assert await s.place("csr", "blitz", 2000) == (1, 80.0)
    assert await s.place("csr", "blitz", 1900) == (2, 40.0)  # equal ratings share a rank
    assert await s.place("csr", "blitz", 1800) == (4, 20.0)
    assert await s.place("csr", "blitz", 1700) == (5, 0.0)


async def test_requests_at_once_share_one_read_and_a_later_one_reads_again(monkeypatch):
    db = Board([1500.0, 1600.0])
    s = Standings(db, max_age_s=10)
    now = [1000.0]
    # the module's clock only (the event loop keeps the real one)
    monkeypatch.setattr(standings_mod, "time", SimpleNamespace(monotonic=lambda: now[0]))
    await asyncio.gather(*(s.place("csr", "blitz", 1550) for _ in range(20)))
    assert db.reads == 1
    db.ratings.append(1700.0)  # the board changes: within max_age_s, the board in hand
    assert await s.place("csr", "blitz", 1550) == (2, 50.0)
    now[0] += 11  # older than max_age_s: this answer from the board in hand, the next from the new read
    assert await s.place("csr", "blitz", 1550) == (2, 50.0)
    await asyncio.sleep(0.05)
    assert db.reads == 2 and await s.place("csr", "blitz", 1550) == (3, round(100 / 3, 2))


async def test_zero_reads_the_board_for_every_request():
    db = Board([1500.0])
    s = Standings(db, max_age_s=0)
    assert await s.place("csr", "blitz", 1500) == (1, 0.0)
    db.ratings.append(1600.0)
    assert await s.place("csr", "blitz", 1500) == (2, 0.0) and db.reads == 2
