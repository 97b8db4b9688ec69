"""What the operator's commands print: ranks, and tables that fit the terminal without losing a character."""

from worker.commands.leaderboard import ranks
from worker.terminal.table import table


def test_equal_ratings_share_a_rank_and_the_next_says_how_many_are_above():
    assert ranks([2100.0, 2000.0, 2000.0, 1990.5, 1990.5, 1990.5, 1800.0]) == [1, 2, 2, 4, 4, 4, 7]
    assert ranks([1500.0]) == [1]
    assert ranks([]) == []


HEADERS = ["at", "rating", "after", "change", "cause", "ref"]
ROWS = [["2026-11-12 00:00:00", "csr", "unchanged", "closed_account", "game.finished", "g-6"],
        ["2026-11-11 00:00:00", "csr blitz #3", 1600.0, "-12.3", "account.closed", "close-x-reference-id-123456"]]


def test_a_table_that_fits_is_drawn_as_it_always_was():
    assert table(HEADERS, ROWS, 200) == table(HEADERS, ROWS)
    assert max(len(line) for line in table(HEADERS, ROWS).splitlines()) > 80  # the case below is real


def test_a_wide_table_gives_way_from_the_right_and_wraps_without_losing_a_character():
    for width in (80, 60):
        text = table(HEADERS, ROWS, width)
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= width, text
        assert lines[2].startswith("2026-11-12 00:00:00  csr")  # the time and the rating keep their width
        ref = lines[0].index("ref")
        assert "".join(line[ref:].strip() for line in lines[2:]) == "g-6close-x-reference-id-123456"  # whole
