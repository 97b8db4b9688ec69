"""A player's ratings at a glance: the terminal's sparkline (worker.terminal.chart) and the picture
(worker.terminal.plot), checked by their data, not their pixels."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from worker.terminal.chart import BLOCKS, PEAK_MARK, Point, Series, render, series_from_rows, sparkline

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _series(ratings, rds=None, floor=None, system="csr", category="blitz") -> Series:
    rds = rds or [None] * len(ratings)
    return Series(system, category, tuple(Point(T0 + timedelta(hours=i), r, d, floor, False)
                                          for i, (r, d) in enumerate(zip(ratings, rds, strict=True))))


def test_a_short_history_is_one_block_a_change_from_the_floor_to_the_peak():
    s = _series([1400.0, 1450.0, 1575.0, 1700.0, 1650.0], floor=1400.0)
    head, line, marker = render(s, 80)
    assert head == "csr blitz: 1650.0, peak 1700.0 (2026-11-01), floor 1400.0, 5 changes"
    # (rating - 1400) / 300 of the 7 steps: 0, 1.2, 4.1, 7, 5.8
    assert line.endswith(BLOCKS[0] + BLOCKS[1] + BLOCKS[4] + BLOCKS[7] + BLOCKS[6])
    assert line.split()[0] == "1400"  # the scale's bottom: the lowest rating, here on the floor
    assert marker.index(PEAK_MARK) == line.index(BLOCKS[-1]) and "1700" in marker
    assert f"{BLOCKS[0]} = floor" in marker  # after the mark: no room before it


def test_a_floor_below_the_lowest_rating_is_said_with_its_value():
    head, line, marker = render(_series([1500.0, 1520.0, 1510.0], floor=1200.0), 80)
    assert line.split()[0] == "1500" and "floor 1200 below" in marker and "floor 1200.0" in head


@pytest.mark.parametrize("width", [40, 80, 120, 200])
def test_a_long_history_fits_the_terminal_and_keeps_its_peak_and_its_end(width):
    ratings = [1500 + 300 * math.sin(i / 40) + i * 0.2 for i in range(2000)]
    s = _series(ratings, floor=1100.0)
    lines = render(s, width)
    assert all(len(line) <= width for line in lines), [len(x) for x in lines]
    blocks = [c for c in lines[1] if c in BLOCKS]
    assert len(blocks) == width - lines[1].index(blocks[0])  # the line uses the whole width
    assert lines[1][lines[2].index(PEAK_MARK)] == BLOCKS[-1]  # the mark under a block at the peak
    assert blocks[-1] == sparkline([ratings[-1]], min(ratings), max(ratings))  # it ends at the rating now
    assert lines[1].split()[0] == f"{min(ratings):.0f}"


def test_without_a_floor_the_scale_starts_at_the_lowest_rating_and_says_no_floor():
    head, line, marker = render(_series([2012.0, 2020.0, 2001.0], system="fide", category="standard"), 80)
    assert "floor" not in head and "floor" not in marker
    assert line.split()[0] == "2001" and line.endswith(BLOCKS[4] + BLOCKS[-1] + BLOCKS[0])


def test_rows_become_one_series_per_rating_without_the_changes_that_left_no_rating():
    rows = [
        {"system": "csr", "category": "blitz", "changes": 40, "changed_at": T0, "rating": 1500.0, "rd": 300.0,
         "floor": None, "provisional": True},
        {"system": "fide", "category": "standard", "changes": 2, "changed_at": T0, "rating": None, "rd": None,
         "floor": None, "provisional": None},  # unlisted
        {"system": "fide", "category": "standard", "changes": 2, "changed_at": T0, "rating": 1450.0, "rd": None,
         "floor": None, "provisional": False},
    ]
    got = series_from_rows(rows)
    assert [(s.system, s.category, [p.rating for p in s.points]) for s in got] == [
        ("csr", "blitz", [1500.0]), ("fide", "standard", [1450.0])]
    assert got[0].points[0].provisional is True and got[0].changes == 40
    assert render(got[0], 80)[0].endswith("1500.0?, peak 1500.0 (2026-11-01), last 1 of 40 changes")
    assert render(got[1], 80)[0].endswith(", 2 changes")


def test_a_floor_that_rose_into_the_line_is_said_with_its_value_not_as_its_bottom():
    head, line, marker = render(_series([1200.0, 1500.0, 1800.0, 1650.0], floor=1600.0), 80)
    assert line.split()[0] == "1200" and "floor 1600" in marker and "= floor" not in marker
    assert render(_series([1700.0]), 80)[0].endswith(", 1 change")


def test_the_picture_has_a_panel_per_system_a_line_per_category_and_the_rd_band(tmp_path):
    pytest.importorskip("matplotlib")
    from worker.terminal import plot

    blitz = _series([1500.0, 1550.0, 1530.0], rds=[350.0, 200.0, 150.0])
    rapid = _series([1500.0, 1480.0], rds=[350.0, 250.0], category="rapid")
    fide = _series([1800.0, 1812.0], system="fide", category="standard")
    fig = plot.figure("anna", [blitz, rapid, fide])
    panels = {ax.get_title(): ax for ax in fig.axes}
    assert set(panels) == {"csr", "fide"}
    csr_lines = {line.get_label(): line for line in panels["csr"].get_lines()}
    assert set(csr_lines) == {"blitz", "rapid"}
    assert list(csr_lines["blitz"].get_ydata()) == [1500.0, 1550.0, 1530.0]
    bands = panels["csr"].collections
    assert sorted(b.get_label() for b in bands) == ["blitz ±2 RD", "rapid ±2 RD"]
    blitz_band = next(b for b in bands if b.get_label() == "blitz ±2 RD")
    ys = blitz_band.get_paths()[0].vertices[:, 1]
    assert min(ys) == pytest.approx(1500.0 - 2 * 350.0) and max(ys) == pytest.approx(1500.0 + 2 * 350.0)
    assert 1550.0 - 2 * 200.0 in ys and 1530.0 + 2 * 150.0 in ys  # each change's band edges
    assert not list(panels["fide"].collections)  # Elo: no RD, no band
    rapid_line = csr_lines["rapid"]
    assert list(rapid_line.get_ydata()) == [1500.0, 1480.0, 1480.0]  # held on to the latest change drawn
    assert rapid_line.get_xdata()[-1] == blitz.points[-1].at
    png, svg = tmp_path / "anna.png", tmp_path / "anna.svg"
    plot.write(fig, str(png))
    plot.write(fig, str(svg))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert b"<svg" in svg.read_bytes()[:1000]


def test_a_rating_with_a_single_change_is_a_dot_with_its_rd_bar():
    pytest.importorskip("matplotlib")
    from worker.terminal import plot

    fig = plot.figure("newcomer", [_series([1500.0], rds=[350.0])])
    (ax,) = fig.axes
    (line,) = ax.get_lines()[:1]
    assert list(line.get_ydata()) == [1500.0] and line.get_marker() == "o"
    bars = [c for c in ax.containers if c.get_label() == "blitz ±2 RD"]
    (segments,) = [c.get_segments() for c in bars[0].lines[2]]
    assert [y for _, y in segments[0]] == [1500.0 - 700.0, 1500.0 + 700.0]
