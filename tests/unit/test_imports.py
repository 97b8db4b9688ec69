"""rating.imported: the state replaced, start values for what is left out, then play goes on from it."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import orjson

from worker.commands.replay import replay
from worker.contract.times import parse_time
from worker.dev.streams import game_event
from worker.store.memory import MemoryStore

T0 = "2026-11-01T00:00:00Z"


def imported(i: int, player: str, system: str, category: str, rating, **fields) -> bytes:
    return orjson.dumps({"specversion": "1.0", "id": f"imp-{i}", "source": "/import", "type": "rating.imported",
                         "time": T0, "data": {"player_id": player, "system": system, "category": category,
                                              "rating": rating, "imported_at": T0, **fields}})


def fide_event(i: int, players: list[str], games: list[tuple[str, str, str]], day: str) -> bytes:
    at = f"{day}T18:00:00Z"
    return orjson.dumps({"specversion": "1.0", "id": f"fide-{i}", "source": "/fide", "type": "event.finished",
                         "time": at, "data": {"competition_id": f"t{i}", "kind": "fide", "rated": True,
                                              "finished_at": at, "rating_type": "standard",
                                              "players": [{"player_id": p} for p in players],
                                              "games": [{"round": r + 1, "white": w, "black": b, "result": res}
                                                        for r, (w, b, res) in enumerate(games)]}})


async def run(lines: list[bytes]) -> tuple[MemoryStore, list[dict], str]:
    out, errors = io.BytesIO(), io.StringIO()
    store = await replay(lines, out, errors=errors)
    return store, [orjson.loads(x)["data"] for x in out.getvalue().splitlines()], errors.getvalue()


async def test_csr_import_then_a_loss_stops_at_the_floor_from_the_imported_peak():
    lose = orjson.dumps(game_event(1, "anna", "ben", "0-1", datetime(2026, 11, 2, tzinfo=UTC)))
    store, changes, errors = await run([
        imported(1, "anna", "csr", "blitz", 1602.0, rd=60.0, volatility=0.06, games=80, peak=2000.0),
        imported(2, "ben", "csr", "blitz", 1700.0, rd=60.0, games=50),
        lose,
    ])
    assert errors == ""
    first = changes[0]
    assert (first["cause"]["type"], first["version"], first["after"]["rating"], first["floor"]) == (
        "rating.imported", 1, 1602.0, 1600.0)
    anna = [c for c in changes if c["player_id"] == "anna"][-1]
    assert anna["after"]["rating"] == 1600.0 and anna["version"] == 2  # the floor from the imported peak


async def test_fide_import_then_play_k10_after_a_2400_peak():
    store, changes, _ = await run([
        imported(1, "gm", "fide", "standard", 2350, games=300, peak=2410),
        imported(2, "im", "fide", "standard", 2350, games=300, peak=2350),
        fide_event(1, ["gm", "im"], [("gm", "im", "1-0")], "2026-11-20"),
    ])
    gm = [c for c in changes if c["player_id"] == "gm"][-1]
    im = [c for c in changes if c["player_id"] == "im"][-1]
    assert round(gm["delta"], 2) == 5.0 and round(im["delta"], 2) == -10.0  # K 10 after 2400; K 20 otherwise


async def test_fide_import_keeps_a_juniors_birth_year_and_his_k_40():
    store, changes, _ = await run([
        imported(1, "junior", "fide", "standard", 1800, games=100, birth_year=2010),
        imported(2, "adult", "fide", "standard", 1800, games=100, birth_year=2007),  # 19 in 2026: K 20
        fide_event(1, ["junior", "adult"], [("junior", "adult", "1-0")], "2026-11-20"),
    ])
    junior = [c for c in changes if c["player_id"] == "junior"][-1]
    adult = [c for c in changes if c["player_id"] == "adult"][-1]
    assert round(junior["delta"], 2) == 20.0 and round(adult["delta"], 2) == -10.0  # 40 x 0.5, 20 x 0.5


async def test_fide_newcomer_gets_a_first_rating_against_imported_opponents():
    opponents = ["o1", "o2", "o3", "o4", "o5"]
    lines = [imported(i, p, "fide", "standard", r, games=100) for i, (p, r) in
             enumerate(zip(opponents, (1900, 1900, 1900, 1900, 1907), strict=True))]
    games = [("new", "o1", "1-0"), ("o2", "new", "0-1"), ("new", "o3", "1/2-1/2"), ("o4", "new", "1/2-1/2"),
             ("new", "o5", "0-1")]
    lines.append(fide_event(1, ["new", *opponents], games, "2026-11-20"))
    store, changes, _ = await run(lines)
    new = [c for c in changes if c["player_id"] == "new"][-1]
    assert new["after"]["rating"] == 1922 and new["games"] == 5


async def test_uscf_import_keeps_the_counters_and_the_floor():
    store, changes, _ = await run([imported(1, "p", "uscf", "regular", 1650, games=120, wins=3, draws=1, losses=100,
                                            events=10, peak=1941)])
    assert changes[0]["floor"] == 1700 and changes[0]["provisional"] is False
    assert store.states[next(iter(store.states))].extra == {"wins": 3, "draws": 1, "losses": 100, "events3": 10}


async def test_a_correction_mid_stream_replaces_the_state_and_counts_as_a_version():
    game = orjson.dumps(game_event(1, "anna", "ben", "1-0", datetime(2026, 11, 2, tzinfo=UTC)))
    store, changes, _ = await run([game, imported(1, "anna", "csr", "blitz", 1800.0, rd=80.0, games=30)])
    last = changes[-1]
    assert (last["version"], last["after"]["rating"], last["after"]["rd"], last["games"]) == (2, 1800.0, 80.0, 30)
    assert last["before"]["rating"] > 1600  # what the game left


async def test_an_import_delivered_twice_is_applied_once():
    line = imported(1, "anna", "chesskite", "puzzle", 1234.0, games=7)
    store, changes, _ = await run([line, line])
    assert len(changes) == 1 and changes[0]["after"] == {"rating": 1234.0, "rd": None, "volatility": None}
    assert parse_time(changes[0]["changed_at"]) == parse_time(T0)


async def test_chesstempo_import_then_an_attempt_starts_from_it():
    at = "2026-11-02T10:00:00Z"
    attempt = orjson.dumps({"specversion": "1.0", "id": "a-1", "source": "/tempo", "type": "puzzle.attempted",
                            "time": at, "data": {"system": "chesstempo", "mode": "standard", "player_id": "anna",
                                                 "puzzle_id": "p1", "correct": True, "attempted_at": at}})
    store, changes, errors = await run([
        imported(1, "anna", "chesstempo", "standard", 1900.0, rd=80.0, games=500, last_played_at=T0), attempt])
    assert errors == ""
    first, second = changes
    assert (first["after"], first["provisional"], first["version"]) == (
        {"rating": 1900.0, "rd": 80.0, "volatility": None}, False, 1)
    # The imported 80 grows for the 1.42 days since last_played_at (c = 10 per sqrt(day): 80.9), then one
    # Glicko-1 game against a new problem lowers it; a solve raises the rating.
    assert second["before"]["rating"] == 1900.0 and second["version"] == 2 and second["games"] == 501
    assert second["after"]["rating"] > 1900.0 and 50.0 <= second["after"]["rd"] < 80.9


async def test_chesstempo_import_with_a_volatility_is_a_bad_message():
    _, changes, errors = await run([imported(1, "anna", "chesstempo", "blitz", 1900.0, volatility=0.06)])
    assert changes == [] and "volatility" in errors


async def test_fide_import_with_the_list_k_rates_the_next_period_with_it():
    """Issue 20, item 4: an adult imported with the list's K 20 and no games is rated with K 20, not 40."""
    _, changes, errors = await run([
        imported(1, "adult", "fide", "standard", 1800, k=20),
        imported(2, "peer", "fide", "standard", 1800, games=100),
        fide_event(1, ["adult", "peer"], [("adult", "peer", "1-0")], "2026-11-10"),
    ])
    assert errors == ""
    adult = [c for c in changes if c["player_id"] == "adult"][-1]
    assert adult["after"]["rating"] == 1810.0  # 1800 + 20 x 0.5


async def test_list_k_and_ever_flags_on_another_system_or_out_of_range_are_bad_messages():
    """docs/contract.md#ratingimported-an-existing-rating-brought-in: `k`, `ever_2300`, `ever_2400` on another system make the message bad."""
    lines = [imported(1, "a", "csr", "blitz", 1500.0, k=20), imported(2, "b", "uscf", "regular", 1500.0,
                                                                      ever_2400=True),
             imported(3, "c", "fide", "standard", 1800, k=30), imported(4, "d", "fide", "standard", 1800,
                                                                       ever_2300="yes")]
    _, changes, errors = await run(lines)
    assert changes == [] and [e.split(":")[0] for e in errors.splitlines()] == [f"line {i}" for i in (1, 2, 3, 4)]
    assert "only a fide import carries the list's K" in errors.splitlines()[0]
