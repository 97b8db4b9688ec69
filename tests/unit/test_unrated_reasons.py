"""Why nothing changed (issue 20, item 2): the reason a valid message changed no rating is stored with its
processed id, for the whole message and for each participant a rated message left out, and repeated
deliveries are counted. Run through `replay` (the worker's engine) against the memory store; the same
scenario runs against PostgreSQL in tests/integration/test_unrated_reasons_postgres.py and must agree."""

from __future__ import annotations

import io
from datetime import timedelta

import orjson
import pytest

from tests.unit.test_fairplay import T0, closure, game, imported, stamp
from worker.commands.replay import replay
from worker.ratings.reasons import EXPLAINED, explain
from worker.store.base import ProcessedMessage
from worker.store.memory import MemoryStore


def ce(ident: str, type_: str, data: dict) -> bytes:
    return orjson.dumps({"specversion": "1.0", "id": ident, "source": "/why", "type": type_,
                         "time": "2026-11-20T00:00:00Z", "data": data})


def fide_import(player: str, rating: int, category: str = "rapid") -> bytes:
    return ce(f"imp-{player}", "rating.imported", {"player_id": player, "system": "fide", "category": category,
                                                  "rating": rating, "games": 60, "imported_at": stamp(T0)})


def scenario() -> list[bytes]:
    """Every kind of "nothing changed": a casual game, a guest, a variant, a TSR player with 9 votes, a FIDE
    rapid game 600 points apart with a player over 2600, a game after a fair-play closure, a closure for
    another reason, and deliveries of the same message again (in the same chunk and in a later one)."""
    at = T0 + timedelta(days=2)
    casual = orjson.loads(game(1, "a", "b", "1-0", at))
    casual["data"]["rated"] = False
    guest = orjson.loads(game(2, "a", "b", "1-0", at))
    guest["data"]["black"]["guest"] = True
    variant = orjson.loads(game(3, "a", "b", "1-0", at))
    variant["data"]["variant"] = "chess960"
    tsr = {"competition_id": "tl-1", "kind": "turbo_live", "rated": True, "finished_at": stamp(at), "format": "10min",
           "players": [{"player_id": p, "agreement": g, "votes": v, "team_games": {"won": 1, "drawn": 0, "lost": 0}}
                       for p, g, v in (("a", 0.7, 20), ("b", 0.6, 12), ("c", 0.5, 9))]}
    fide = {"competition_id": "rapid-1", "kind": "fide", "rated": True, "finished_at": stamp(at),
            "rating_type": "rapid", "players": [{"player_id": p} for p in ("g", "l", "m")],
            "games": [{"round": 1, "white": "g", "black": "l", "result": "1-0"},
                      {"round": 2, "white": "g", "black": "m", "result": "1/2-1/2"}]}
    rated = game(4, "a", "b", "1/2-1/2", at)
    return [
        imported("a", 1600), imported("b", 1650), fide_import("g", 2650), fide_import("l", 2000),
        fide_import("m", 2500),
        orjson.dumps(casual), orjson.dumps(guest), orjson.dumps(variant),
        ce("tl-1-end", "event.finished", tsr), ce("rapid-1-end", "event.finished", fide),
        rated, rated,  # delivered twice in one chunk
        closure("x", at), game(5, "x", "a", "1-0", at + timedelta(hours=1)),
        closure("y", at, reason="abuse"),
        rated, closure("x", at),  # delivered again in a later chunk
    ]


async def run(lines: list[bytes], chunk: int) -> MemoryStore:
    errors = io.StringIO()
    store = await replay(lines, io.BytesIO(), store=MemoryStore(), chunk=chunk, errors=errors)  # it keeps `messages`
    assert errors.getvalue() == ""
    return store


def by_id(store: MemoryStore) -> dict[str, ProcessedMessage]:
    return {i: m for (_, i), m in store.messages.items()}


@pytest.fixture(params=[1, 11], ids=["one_per_batch", "chunks_of_11"])
async def stored(request) -> dict[str, ProcessedMessage]:
    return by_id(await run(scenario(), request.param))


async def test_unrated_games_keep_their_reason_for_both_players(stored):
    for ident, reason in (("game-1", "casual"), ("game-2", "guest"), ("game-3", "variant"),
                          ("game-5", "closed_account")):
        m = stored[ident]
        assert (m.outcome, m.reason) == ("unrated", reason), ident
        assert {p for p, _ in m.left_out} == ({"a", "b"} if ident != "game-5" else {"x", "a"})
        assert {why for _, why in m.left_out} == {reason}
        assert m.system == "csr" and m.at is not None


async def test_a_rated_tsr_event_names_the_player_with_fewer_than_10_votes(stored):
    m = stored["tl-1-end"]
    assert (m.outcome, m.reason, m.left_out) == ("applied", None, (("c", "too_few_votes"),))
    assert m.system == "tsr" and m.ref == "tl-1"


async def test_a_fide_rapid_game_600_apart_over_2600_leaves_its_loser_unchanged(stored):
    """FIDE Rating Regulations (1 March 2024, amended 1 October 2025), rapid and blitz: from 1 December
    2024 a game between players 600 or more points apart, one of them over 2600, is not rated. g's draw
    with m counts, so g and m change; l's only game is the one not rated."""
    m = stored["rapid-1-end"]
    assert (m.outcome, m.left_out) == ("applied", (("l", "rating_gap_600"),))


async def test_closures_say_why_nobody_changed(stored):
    abuse = stored["close-y"]
    assert (abuse.outcome, abuse.reason, abuse.left_out) == ("unrated", "not_fair_play", (("y", "not_fair_play"),))
    assert stored["close-x"].outcome == "applied"


async def test_repeated_deliveries_are_counted_not_applied(stored):
    assert stored["game-4"].outcome == "applied" and stored["game-4"].duplicates == 2
    assert stored["close-x"].duplicates == 1
    assert stored["game-1"].duplicates == 0


async def test_one_message_per_batch_and_chunks_agree():
    assert by_id(await run(scenario(), 1)) == by_id(await run(scenario(), 11))


async def test_every_reason_the_scenario_gives_is_explained(stored):
    words = {m.reason for m in stored.values() if m.reason} | {w for m in stored.values() for _, w in m.left_out}
    assert words and all(w in EXPLAINED for w in words), words - set(EXPLAINED)
    assert explain("casual") != "casual" and explain("not_a_known_word") == "not_a_known_word"
