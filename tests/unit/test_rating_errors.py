"""A bug in rating code for one valid message costs that message only: reported, not applied, not lost."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import math

import pytest

from worker.commands.replay import replay
from worker.dev.streams import games
from worker.ratings import registry
from worker.ratings.parameters import Timeline
from worker.store.memory import MemoryStore


def make_csr_fail_on(monkeypatch, game_id: str) -> None:
    """A bug in CSR for one game: its rating raises ZeroDivisionError('a bug')."""
    adapter = registry.REGISTRY["game.finished"]

    def rate(game, states, closed):
        if game.game_id == game_id:
            raise ZeroDivisionError("a bug")
        return adapter.rate(game, states, closed)

    _replace_csr(monkeypatch, dataclasses.replace(adapter, rate=rate))


def _replace_csr(monkeypatch, system) -> None:
    """Rate game.finished with `system` whatever the game's time (the registry's timeline of CSR)."""
    monkeypatch.setitem(registry.KINDS, "game.finished", Timeline([(-math.inf, system)]))


@pytest.fixture
def csr_fails_on_game_5(monkeypatch):
    make_csr_fail_on(monkeypatch, "g-5")


async def test_the_failing_message_alone_is_left_out(csr_fails_on_game_5):
    values = games(10, players=4, seed=2)
    errors, store = io.StringIO(), MemoryStore()
    await replay(values, io.BytesIO(), store=store, errors=errors)
    assert errors.getvalue() == "line 6: rating_error: ZeroDivisionError: a bug\n"
    assert len(store.processed_ids) == 9 and ("/test/games", "game-5") not in store.processed_ids
    assert len(store.history) == 18


def alter_csr_changes_of(monkeypatch, game_id: str, alter) -> None:
    """A bug in CSR for one game: its changes are `alter(changes)` instead."""
    adapter = registry.REGISTRY["game.finished"]

    def rate(game, states, closed):
        outcome = adapter.rate(game, states, closed)
        return outcome._replace(changes=alter(outcome.changes)) if game.game_id == game_id else outcome

    _replace_csr(monkeypatch, dataclasses.replace(adapter, rate=rate))


def _replay(n: int) -> tuple[str, MemoryStore]:
    errors, store = io.StringIO(), MemoryStore()
    asyncio.run(replay(games(n, players=3, seed=2), io.BytesIO(), store=store, errors=errors))
    return errors.getvalue(), store


def test_a_change_that_skips_a_version_is_a_rating_error(monkeypatch):
    """`version` counts a rating's changes without gaps (plans are checked by versions): a rating module
    whose change does not make the next version has a bug, and its message is left out like any other."""
    def skip_a_version(changes):
        first = changes[0]
        return (first._replace(after=first.after._replace(version=first.after.version + 1)), *changes[1:])

    alter_csr_changes_of(monkeypatch, "g-3", skip_a_version)
    errors, store = _replay(6)
    assert errors.startswith("line 4: rating_error: ValueError: ")
    assert "does not follow" in errors
    assert len(store.processed_ids) == 5 and len(store.history) == 10


def test_a_change_to_a_state_the_batch_did_not_read_or_lock_is_a_rating_error(monkeypatch):
    """A module may change only states it named (state_keys / more_keys) of players it named (players):
    the others were neither read (the change would overwrite whatever is stored) nor locked."""
    def change_a_stranger(changes):
        first = changes[0]
        return (*changes, first._replace(key=first.key._replace(player_id="someone-else")))

    alter_csr_changes_of(monkeypatch, "g-2", change_a_stranger)
    errors, store = _replay(5)
    assert errors.startswith("line 3: rating_error: ValueError: ")
    assert "changed without being read for the batch or its player locked" in errors
    assert len(store.processed_ids) == 4 and all(k.player_id != "someone-else" for k in store.states)
