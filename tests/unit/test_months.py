"""worker.store.months without a database: which month a time is in, and when the store must ask for months."""

from __future__ import annotations

from contextlib import asynccontextmanager
from datetime import UTC, date, datetime

import pytest

from worker.store.months import Months, month_of

NOV = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
DEC = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
JAN = datetime(2027, 1, 1, tzinfo=UTC).timestamp()
FEB = datetime(2027, 2, 1, tzinfo=UTC).timestamp()


def test_a_time_is_in_its_utc_month():
    assert month_of(NOV) == date(2026, 11, 1)
    assert month_of(NOV - 1) == date(2026, 10, 1)
    assert month_of(DEC - 0.001) == date(2026, 11, 1)
    assert month_of(-1) == date(1969, 12, 1)


class FakeConnection:
    """What Months asks of a connection: the attached months, and a month added."""

    def __init__(self, ranges):
        self.ranges = sorted(ranges)
        self.added: list[date] = []

    async def fetch(self, sql, *args):
        assert "months_attached" in sql
        return [(f"m{lo}", lo, hi) for lo, hi in self.ranges]

    async def execute(self, sql, *args):
        if "months_add" in sql:
            month = args[0]
            lo = datetime(month.year, month.month, 1, tzinfo=UTC).timestamp()
            hi = datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC).timestamp()
            self.added.append(month)
            self.ranges = sorted([*self.ranges, (lo, hi)])

    def transaction(self):
        @asynccontextmanager
        async def tx():
            yield
        return tx()


def months_on(conn: FakeConnection) -> tuple[Months, list[int]]:
    opened = []

    @asynccontextmanager
    async def side():
        opened.append(1)
        yield conn

    return Months(side), opened


async def test_a_write_inside_the_last_month_asks_nothing():
    conn = FakeConnection([(float("-inf"), NOV), (NOV, DEC)])
    months, opened = months_on(conn)
    await months.ensure([NOV + 10, NOV + 20])  # the first write reads the months
    assert len(opened) == 1 and conn.added == []
    for _ in range(3):
        await months.ensure([NOV + 30, DEC - 1])
    assert len(opened) == 1


async def test_only_the_months_with_rows_are_made_and_a_gap_without_rows_is_left():
    conn = FakeConnection([(NOV, DEC)])
    months, opened = months_on(conn)
    await months.ensure([NOV + 5, FEB + 5])  # November and February: December and January have no row
    assert conn.added == [date(2027, 2, 1)]
    await months.ensure([NOV + 6, FEB + 6])  # known now, with the gap: nothing to ask
    assert len(opened) == 1 and months.created == 1
    await months.ensure([JAN + 1])
    assert conn.added == [date(2027, 2, 1), date(2027, 1, 1)] and len(opened) == 2


async def test_a_forgotten_month_is_read_again():
    conn = FakeConnection([(NOV, DEC)])
    months, opened = months_on(conn)
    await months.ensure([NOV + 1])
    months.forget()
    await months.ensure([NOV + 2])
    assert len(opened) == 2


@pytest.mark.parametrize("times", [[], [NOV]])
async def test_nothing_to_write_or_all_known(times):
    conn = FakeConnection([(float("-inf"), float("inf"))])
    months, opened = months_on(conn)
    await months.ensure(times)
    await months.ensure(times)
    assert len(opened) == (1 if times else 0)
