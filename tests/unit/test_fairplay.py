"""Fair-play corrections (docs/rules.md#fair-play) through the engine, as `replay` runs it.

Every test runs twice: one message per transaction (the games come from the stored history) and
the whole stream in one batch (the games come from the batch so far); the two must agree exactly.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from worker.commands.replay import replay
from worker.dev.streams import TCS, game_event

BLITZ = TCS[2]
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def imported(player: str, rating: float, rd: float = 60.0, peak: float | None = None) -> bytes:
    data = {
        "player_id": player,
        "system": "csr",
        "category": "blitz",
        "rating": rating,
        "rd": rd,
        "volatility": 0.06,
        "games": 40,
        "imported_at": stamp(T0 - timedelta(days=60)),
    }
    if peak is not None:
        data["peak"] = peak
    return orjson.dumps(
        {
            "specversion": "1.0",
            "id": f"imp-{player}",
            "source": "/import",
            "type": "rating.imported",
            "time": data["imported_at"],
            "data": data,
        }
    )


def game(i: int, white: str, black: str, result: str, at: datetime) -> bytes:
    return orjson.dumps(game_event(i, white, black, result, at, BLITZ))


def closure(player: str, at: datetime, reason: str = "fair_play", ident: str | None = None) -> bytes:
    return orjson.dumps(
        {
            "specversion": "1.0",
            "id": ident or f"close-{player}",
            "source": "/review",
            "type": "account.closed",
            "time": stamp(at),
            "data": {"player_id": player, "reason": reason, "closed_at": stamp(at)},
        }
    )


async def run(lines: list[bytes], chunk: int) -> list[dict]:
    out, errors = io.BytesIO(), io.StringIO()
    await replay(lines, out, chunk=chunk, errors=errors)
    assert errors.getvalue() == ""
    return [orjson.loads(x)["data"] for x in out.getvalue().splitlines()]


async def both(lines: list[bytes]) -> list[dict]:
    one_by_one = await run(lines, chunk=1)
    one_batch = await run(lines, chunk=len(lines))
    assert one_by_one == one_batch
    return one_by_one


def by_cause(changes: list[dict], cause_type: str) -> list[dict]:
    return [c for c in changes if c["cause"]["type"] == cause_type]


def last_rating(changes: list[dict], player: str) -> float:
    return [c for c in changes if c["player_id"] == player][-1]["after"]["rating"]


CLOSED_AT = T0 + timedelta(days=10)


@pytest.fixture
async def scenario() -> tuple[list[bytes], list[dict]]:
    """The cheater x beats a, b and c, draws d (rated far above him: d loses points), loses to e."""
    lines = [
        imported("a", 1600),
        imported("b", 1650),
        imported("c", 1700),
        imported("d", 1900),
        imported("e", 1550),
    ]
    lines += [
        game(1, "x", "a", "1-0", T0),
        game(2, "b", "x", "0-1", T0 + timedelta(days=1)),
        game(3, "x", "c", "1-0", T0 + timedelta(days=2)),
        game(4, "d", "x", "1/2-1/2", T0 + timedelta(days=3)),
        game(5, "x", "e", "0-1", T0 + timedelta(days=4)),
        closure("x", CLOSED_AT),
    ]
    return lines, await both(lines)


async def test_losers_and_the_drawer_are_refunded_exactly_the_winner_keeps_his_gain(scenario):
    lines, changes = scenario
    games = by_cause(changes, "game.finished")
    lost = {c["player_id"]: c["delta"] for c in games if c["player_id"] != "x"}
    assert all(lost[p] < 0 for p in "abcd") and lost["e"] > 0  # the scenario is what it says
    refunds = by_cause(changes, "account.closed")
    assert sorted(r["player_id"] for r in refunds) == ["a", "b", "c", "d"]
    for r in refunds:
        before = [c for c in games if c["player_id"] == r["player_id"]][-1]["after"]
        assert r["delta"] == pytest.approx(-lost[r["player_id"]], abs=1e-9)
        assert r["after"]["rating"] == pytest.approx(before["rating"] - lost[r["player_id"]], abs=1e-9)
        assert (r["after"]["rd"], r["after"]["volatility"]) == (before["rd"], before["volatility"])
        assert r["games"] == 41 and r["version"] == 3  # import, game, refund: games unchanged
        assert r["cause"] == {"type": "account.closed", "source": "/review", "id": "close-x", "ref": None}
        assert r["changed_at"] == stamp(CLOSED_AT)
    assert "e" not in {r["player_id"] for r in refunds}


async def test_the_closed_account_is_frozen_everywhere_afterwards(scenario):
    lines, _ = scenario
    later = T0 + timedelta(days=11)
    changes = await both(
        lines
        + [
            game(6, "x", "a", "0-1", later),
            game(7, "a", "b", "1-0", later),
            game(8, "e", "x", "1-0", T0 - timedelta(days=1)),
        ]
    )  # older, but processed after
    after_closure = [c for c in changes if c["cause"]["id"] in ("game-6", "game-7", "game-8")]
    assert [c["cause"]["id"] for c in after_closure] == ["game-7", "game-7"]


async def test_refund_is_capped_at_150_per_victim_and_category():
    lines = [
        game(1, "x", "n", "1-0", T0),
        game(2, "n", "x", "0-1", T0 + timedelta(hours=1)),
        closure("x", CLOSED_AT),
    ]
    changes = await both(lines)
    lost = sum(c["delta"] for c in by_cause(changes, "game.finished") if c["player_id"] == "n")
    assert lost < -150  # two losses of a newcomer
    (refund,) = by_cause(changes, "account.closed")
    assert refund["player_id"] == "n" and refund["delta"] == pytest.approx(150.0, abs=1e-9)


async def test_only_games_inside_the_30_day_window_are_refunded():
    lines = [
        imported("a", 1600),
        imported("b", 1600),
        imported("c", 1600),
        game(1, "x", "a", "1-0", CLOSED_AT - timedelta(days=30, seconds=1)),  # just outside
        game(2, "x", "b", "1-0", CLOSED_AT - timedelta(days=30)),  # the first second inside
        game(3, "x", "c", "1-0", CLOSED_AT + timedelta(seconds=1)),  # after the closure's time
        closure("x", CLOSED_AT),
    ]
    changes = await both(lines)
    assert [r["player_id"] for r in by_cause(changes, "account.closed")] == ["b"]


async def test_a_closure_delivered_twice_or_closed_again_refunds_once(scenario):
    lines, first = scenario
    again = await both(
        lines + [closure("x", CLOSED_AT), closure("x", CLOSED_AT + timedelta(days=1), ident="close-2")]
    )
    assert again == first


@pytest.mark.parametrize("reason", ["abuse", "under_13", "owner_request", "other"])
async def test_other_reasons_change_nobody_and_leave_games_rated(reason):
    lines = [
        imported("a", 1600),
        game(1, "x", "a", "1-0", T0),
        closure("x", CLOSED_AT, reason=reason),
        game(2, "x", "a", "1-0", CLOSED_AT + timedelta(days=1)),
    ]
    changes = await both(lines)
    assert by_cause(changes, "account.closed") == []
    assert [c["cause"]["id"] for c in changes if c["player_id"] == "x"] == ["game-1", "game-2"]


async def test_a_victim_closed_for_fair_play_himself_is_not_refunded():
    lines = [
        imported("a", 1600),
        imported("b", 1600),
        game(1, "x", "a", "1-0", T0),
        game(2, "x", "b", "1-0", T0),
        closure("a", T0 + timedelta(days=1)),
        closure("x", CLOSED_AT),
    ]
    changes = await both(lines)
    assert [r["player_id"] for r in by_cause(changes, "account.closed")] == ["b"]


async def test_a_refund_lifts_the_peak_and_floor_of_an_established_rating():
    lines = [imported("a", 1810, rd=100.0), game(1, "x", "a", "1-0", T0), closure("x", CLOSED_AT)]
    changes = await both(lines)
    (lost,) = [c for c in by_cause(changes, "game.finished") if c["player_id"] == "a"]
    assert lost["floor"] == 1300.0 and not lost["provisional"]  # peak = the rating after the loss, < 1800
    (refund,) = by_cause(changes, "account.closed")
    assert refund["after"]["rating"] == pytest.approx(1810.0, abs=1e-9)
    assert refund["floor"] == 1400.0  # the peak is now 1810


def test_the_pure_rule_itself_keeps_only_the_window_s_games():
    """The store's query reads the window only, but the rule does not rely on it."""
    from worker.ratings import fairplay
    from worker.ratings.inputs import AccountClosed, GameSide
    from worker.ratings.state import RatingState, StateKey

    at = CLOSED_AT.timestamp()
    sides = (
        GameSide("/g", "1", "x", "blitz", 100.0, at - 31 * 86400),
        GameSide("/g", "1", "a", "blitz", -90.0, at - 31 * 86400),
        GameSide("/g", "2", "x", "blitz", 50.0, at - 86400),
        GameSide("/g", "2", "a", "blitz", -40.0, at - 86400),
        GameSide("/g", "3", "b", "blitz", -10.0, at - 86400),
        GameSide("/g", "3", "c", "blitz", 10.0, at - 86400),
    )
    states = {StateKey("a", "csr", "blitz"): RatingState(1500.0, 200.0, 0.06, 3, None, at - 86400, 3)}
    outcome = fairplay.rate_closure(AccountClosed("x", "fair_play", at, sides), states)
    (change,) = outcome.changes  # game 1 is outside the window; game 3 is not the account's
    assert change.key.player_id == "a" and change.after.rating == 1540.0 and outcome.closure == ("x", at)
