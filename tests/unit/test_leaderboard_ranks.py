"""The leaderboard's ranks: equal ratings share one, and the next skips as many (competition ranking)."""

from worker.commands.leaderboard import ranks


def test_equal_ratings_share_a_rank_and_the_next_says_how_many_are_above():
    assert ranks([2100.0, 2000.0, 2000.0, 1990.5, 1990.5, 1990.5, 1800.0]) == [1, 2, 2, 4, 4, 4, 7]
    assert ranks([1500.0]) == [1]
    assert ranks([]) == []
