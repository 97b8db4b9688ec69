"""The operator's commands: player, leaderboard, dlq, outbox (issue 5; being built)."""

from __future__ import annotations


def add_parsers(sub) -> None:
    return None
