"""FIDE's change of 1 March 2024 (seed 001: "the lowest FIDE rating is 1400, after a change in 2024 that also
raised the ratings of lower-rated players"; docs/rules.md#fide): at the list of 2024-03 every published rating R
with 1000 <= R < 2000 becomes R + 0.4 x (2000 - R), once, and the lowest rating moves from 1000 to 1400.
Applied by list month, through replay as the worker applies it."""

from __future__ import annotations

import orjson

from tests.unit.test_fide_lists import ce, run
from worker.ratings import fide


def imported(pid: str, rating: int, month: str, games: int = 60) -> bytes:
    at = f"{month}-01T00:00:00Z"
    return ce(f"imp-{pid}-{month}", "rating.imported", {
        "player_id": pid, "system": "fide", "category": "standard", "rating": rating, "games": games,
        "imported_at": at, "last_played_at": at}, at)


def listing(month: str, closed_at: str | None = None) -> bytes:
    closed_at = closed_at or f"{month}-01T00:00:00Z"
    return ce(f"list-{month}", "rating.period_closed", {"system": "fide", "list": month, "closed_at": closed_at},
              closed_at)


def tournament(ident: str, finished_at: str, games: list[tuple[str, str, str]]) -> bytes:
    ids = sorted({p for g in games for p in g[:2]})
    return ce(ident, "event.finished", {
        "competition_id": ident, "kind": "fide", "rated": True, "finished_at": finished_at,
        "rating_type": "standard", "players": [{"player_id": p} for p in ids],
        "games": [{"round": i + 1, "white": w, "black": b, "result": r} for i, (w, b, r) in enumerate(games)]},
        finished_at)


def of(changes: list[dict], pid: str) -> list[dict]:
    return [c for c in changes if c["player_id"] == pid]


def test_the_raise_itself():
    assert [fide.raised(r) for r in (999, 1000, 1001, 1500, 1999, 2000, 2100)] == [
        999, 1400, 1401, 1700, 1999, 2000, 2100]
    assert (fide.lowest_listed("2024-02"), fide.lowest_listed("2024-03")) == (1000, 1400)


async def test_the_march_2024_list_raises_1500_to_1700_and_leaves_2100_alone():
    """The issue's case: 1500 on the February 2024 list is 1700 on the March list, 2100 unchanged; the
    list closed on FIDE's closing date (27 February). Once: the April list raises nobody again."""
    _, changes = await run([imported("a", 1500, "2024-02"), imported("b", 2100, "2024-02"),
                            imported("c", 1200, "2024-02"), imported("d", 1001, "2024-02"),
                            listing("2024-03", "2024-02-27T06:00:00Z"), listing("2024-04")])
    (a,) = [c for c in of(changes, "a") if c["cause"]["type"] == "rating.period_closed"]
    assert (a["before"]["rating"], a["after"]["rating"], a["delta"]) == (1500.0, 1700.0, 200.0)
    assert a["cause"]["ref"] == "2024-03" and a["version"] == 2
    assert [c["after"]["rating"] for c in of(changes, "c")] == [1200.0, 1520.0]
    assert [c["after"]["rating"] for c in of(changes, "d")] == [1001.0, 1401.0]
    assert [c["cause"]["type"] for c in of(changes, "b")] == ["rating.imported"]  # 2100: nothing to publish
    assert not [c for c in changes if c["cause"].get("ref") == "2024-04"]  # raised once


async def test_a_period_closing_into_the_march_2024_list_is_raised_after_its_games():
    """The March list's ratings were computed as usual, then raised: 1500 + 10 = 1510 -> 1706, and
    1500 - 10 = 1490 -> 1694, each in the one change that closes the period."""
    _, changes = await run([imported("a", 1500, "2024-01"), imported("b", 1500, "2024-01"),
                            tournament("feb", "2024-02-10T18:00:00Z", [("a", "b", "1-0")]),
                            listing("2024-03")])
    closes = {c["player_id"]: c for c in changes if c["cause"]["type"] == "rating.period_closed"}
    assert (closes["a"]["before"]["rating"], closes["a"]["after"]["rating"]) == (1510.0, 1706.0)
    assert (closes["b"]["before"]["rating"], closes["b"]["after"]["rating"]) == (1490.0, 1694.0)
    assert len([c for c in changes if c["cause"]["type"] == "rating.period_closed"]) == 2


async def test_without_the_list_the_first_later_event_raises_him_before_rating_him():
    """No list sent: a rating of the February 2024 list gets the raise at his first event of a later
    period (its own change, before the event's), and that event rates him with 1700: a draw against a
    1700 of the April list changes nothing."""
    _, changes = await run([imported("a", 1500, "2024-02"), imported("o", 1700, "2024-04"),
                            tournament("apr", "2024-04-10T18:00:00Z", [("a", "o", "1/2-1/2")])])
    raise_, game = [c for c in of(changes, "a") if c["cause"]["type"] == "event.finished"]
    assert (raise_["before"]["rating"], raise_["after"]["rating"]) == (1500.0, 1700.0)
    assert (game["before"]["rating"], game["after"]["rating"], game["version"]) == (1700.0, 1700.0, 3)
    assert [c["after"]["rating"] for c in of(changes, "o")] == [1700.0, 1700.0]


async def test_the_lowest_rating_is_1000_before_the_march_2024_list_and_1400_from_it():
    """A 1010 who loses 10 points stays listed on the February 2024 list (at 1000, which today's 1400 would
    delist), and the March list raises him to 1400; after the change a 1405 who loses 10 is delisted."""
    def season(rating, month, finished_at, lists):
        return [imported("x", rating, month), imported("y", rating, month),
                tournament(f"ev-{month}", finished_at, [("x", "y", "0-1")]), *(listing(m) for m in lists)]

    _, before = await run(season(1010, "2024-01", "2024-01-10T18:00:00Z", ["2024-02", "2024-03"]))
    assert [c["after"]["rating"] for c in of(before, "x")] == [1010.0, 1000.0, 1000.0, 1400.0]
    _, after = await run(season(1405, "2025-01", "2025-01-10T18:00:00Z", ["2025-02"]))
    assert [c["after"]["rating"] for c in of(after, "x")] == [1405.0, 1395.0, None]  # delisted


async def test_a_first_rating_under_1400_is_published_before_the_march_2024_list_and_raised_by_it():
    """One win and four losses against five equal opponents, with the two hypothetical 1800 draws: p = 29%,
    dp -158. Against 1100s in the period of the February 2024 list, Ru = 1300 - 158 = 1142 is published
    (from 1000), and the March list raises it to 1485; against 1400s after the change, Ru = 1356 is not
    published (pooling goes on)."""
    def newcomer(opponents, month, finished_at, lists):
        games = [("n", f"o{i}", "1-0" if i == 0 else "0-1") for i in range(5)]
        return [*(imported(f"o{i}", opponents, month) for i in range(5)),
                tournament(f"ev-{month}", finished_at, games), *(listing(m) for m in lists)]

    _, old = await run(newcomer(1100, "2024-01", "2024-01-10T18:00:00Z", ["2024-02", "2024-03"]))
    assert [c["after"]["rating"] for c in of(old, "n")] == [1142.0, 1485.0]
    _, new = await run(newcomer(1400, "2025-01", "2025-01-10T18:00:00Z", ["2025-02"]))
    assert [c["after"]["rating"] for c in of(new, "n")] == [None]


def test_the_records_say_which_list_raised_them():
    """The state keeps the raised rating as its rating on the list of 2024-03 (an event that started under
    that list is rated with it), the February one as it was."""
    state = fide.imported_state(type("Imp", (), {
        "rating": 1500.0, "games": 60, "peak": None, "birth_year": None, "last_played_at": None, "k": None,
        "ever_2300": None, "ever_2400": None, "imported_at": fide.list_date("2024-02")})(), 1)
    change = fide.raise_change(fide.key("a", "standard"), state)
    v = fide.view(change.after)
    assert v.lists == (("2024-02", 1500), ("2024-03", 1700)) and change.after.peak == 1700.0
    assert fide.rating_on_list(v, "2024-02") == 1500 and fide.rating_on_list(v, "2024-06") == 1700
    assert fide.rating_on_list(fide.view(state), "2024-06") == 1700  # the list shows it raised before his change
    assert orjson.loads(orjson.dumps(change.after.extra))["lists"] == [["2024-02", 1500], ["2024-03", 1700]]
