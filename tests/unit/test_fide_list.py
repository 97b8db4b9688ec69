"""FIDE's monthly list as published (issue 40: `GET /v1/fide/lists/{YYYY-MM}`): worker.ratings.fide.list_entry
and worker.api.fide_lists, against what the engine publishes. Events and a list go through replay (the worker's
engine, the memory store); the CSV of the list must say what its rating.changed records said, and keep saying
it while the players play on."""

from __future__ import annotations

import csv
import io

import orjson
import pytest

from tests.unit.test_fide import at, k, listed
from tests.unit.test_fide_lists import ce
from worker.api import fide_lists
from worker.api.problems import Problem
from worker.commands.replay import replay
from worker.ratings import fide
from worker.store.memory import MemoryStore

HOSTILE = 'a,"b"\nc'
IMPORTS = {  # player: (rating, games, birth year, last played)
    "active": (1800, 60, None, "2026-10-01T00:00:00Z"),
    "junior": (1900, 60, 2012, "2026-10-01T00:00:00Z"),
    "top": (2450, 200, None, "2026-10-01T00:00:00Z"),
    "newbie": (1750, 12, None, "2026-10-01T00:00:00Z"),
    "idle": (2100, 80, None, "2025-06-01T00:00:00Z"),  # marked inactive on the December list
    "low": (1401, 60, None, "2026-10-01T00:00:00Z"),  # loses and falls under 1400: delisted
    "early": (1850, 28, None, "2026-10-01T00:00:00Z"),  # K 40 on the list, 20 once his 30th game is closed
    HOSTILE: (1700, 60, None, "2026-10-01T00:00:00Z"),
    "rest": (2200, 100, None, "2026-10-01T00:00:00Z"),  # never plays
}


def imported(pid: str) -> bytes:
    rating, games, birth, last = IMPORTS[pid]
    data = {"player_id": pid, "system": "fide", "category": "standard", "rating": rating, "games": games,
            "imported_at": "2026-11-01T00:00:00Z", "last_played_at": last}
    if birth is not None:
        data["birth_year"] = birth
    return ce(f"imp-{pid}", "rating.imported", data, "2026-11-01T00:00:00Z")


def fide_event(ident: str, finished: str, games: list[tuple[str, str, str]]) -> bytes:
    ids = sorted({p for w, b, _ in games for p in (w, b)})
    return ce(ident, "event.finished", {
        "competition_id": ident, "kind": "fide", "rated": True, "finished_at": finished, "rating_type": "standard",
        "players": [{"player_id": p} for p in ids],
        "games": [{"round": i + 1, "white": w, "black": b, "result": r} for i, (w, b, r) in enumerate(games)]},
        finished)


NOVEMBER = fide_event("nov", "2026-11-20T18:00:00Z", [  # the December list's period
    ("active", "junior", "1-0"), ("top", "early", "1/2-1/2"), ("low", "newbie", "0-1"), (HOSTILE, "active", "1/2-1/2"),
    ("unrated", "junior", "1-0")])  # a player never listed pools his game; junior's is not rated
DECEMBER_LIST = ce("list-2026-12", "rating.period_closed", {"system": "fide", "list": "2026-12",
                                                            "closed_at": "2026-12-01T00:00:00Z"}, "2026-12-01T00:00:00Z")
DECEMBER = fide_event("dec", "2026-12-10T18:00:00Z", [  # January's period: each player's first game after the list
    ("idle", "active", "1-0"), ("early", "top", "1-0"), ("junior", "newbie", "1/2-1/2"), (HOSTILE, "newbie", "1-0")])
LATE_DECEMBER = fide_event("dec-late", "2026-12-30T18:00:00Z", [  # February's: closes January's periods early
    ("early", "junior", "1-0")])


async def play(store: MemoryStore, lines: list[bytes]) -> list[dict]:
    out, errors = io.BytesIO(), io.StringIO()
    await replay(lines, out, store=store, errors=errors)
    assert errors.getvalue() == ""
    return [orjson.loads(x)["data"] for x in out.getvalue().splitlines()]


async def states(store: MemoryStore, category: str = "standard"):
    for pid, state in sorted(store.states_of("fide", category)):
        yield pid, state


async def download(store: MemoryStore, month: str = "2026-12") -> bytes:
    return b"".join([chunk async for chunk in fide_lists.csv_rows(states(store), month)])


def rows(body: bytes) -> dict[str, dict[str, str]]:
    reader = csv.DictReader(io.StringIO(body.decode(), newline=""))
    assert reader.fieldnames == fide_lists.HEADER.decode().strip().split(",")
    return {r["player_id"]: r for r in reader}


def as_published(records: list[dict]) -> dict[str, dict]:
    """Each player's latest record: what the topic says of his rating now."""
    latest = {}
    for r in records:
        latest[r["player_id"]] = r
    return latest


async def test_the_list_says_what_its_records_said_and_keeps_saying_it():
    store = MemoryStore()
    records = await play(store, [imported(p) for p in IMPORTS] + [NOVEMBER, DECEMBER_LIST])
    published = await download(store)
    lines = rows(published)

    latest = as_published(records)
    listed_ = {p for p, r in latest.items() if r["after"]["rating"] is not None}
    assert set(lines) == listed_ and {"low", "unrated"}.isdisjoint(lines)  # delisted, never listed
    closes = {r["player_id"] for r in records if r["cause"]["type"] == "rating.period_closed"}
    assert {"active", "junior", "top", "early", HOSTILE, "idle"} <= closes  # periods closed, idle marked
    imports = {r["player_id"]: r for r in records if r["cause"]["type"] == "rating.imported"}
    for pid, line in lines.items():
        record = latest[pid]
        assert int(line["rating"]) == record["after"]["rating"]
        assert line["inactive"] == ("true" if record["inactive"] else "false")
        assert int(line["games"]) == record["games"] - imports[pid]["games"]  # November's games: the period's
        assert line["birth_year"] == str(IMPORTS[pid][2] or "")
    assert lines["idle"]["inactive"] == "true" and lines["rest"]["games"] == "0"
    assert int(lines["active"]["games"]) == 2 and int(lines["junior"]["games"]) == 1  # the unrated opponent's is not

    # Everyone's first game after the list fixes the K the list gave him (section 8.3.3).
    await play(store, [DECEMBER])
    for pid in ("idle", "active", "early", "top", "junior", "newbie", HOSTILE):
        assert int(lines[pid]["k"]) == store.states[k(pid)].extra["k"], pid
    # The list as published does not change: idle played again, early's January period closed before
    # January's list, everyone has an open period.
    await play(store, [LATE_DECEMBER])
    early = fide.view(store.states[k("early")])
    assert early.period == "2027-02" and early.k == fide.PARAMS.k_default != int(lines["early"]["k"])
    assert not store.states[k("idle")].extra.get("inactive")
    assert await download(store) == published
    await play(store, [fide_event("rest", "2026-12-30T19:00:00Z", [("rest", "top", "0-1")])])
    assert int(lines["rest"]["k"]) == store.states[k("rest")].extra["k"]  # he had not played since the list


async def test_the_k_column_is_the_k_of_the_next_period():
    """FIDE's lists' K, as rating.imported reads `k`: 10 once 2400, 40 for a junior never 2300 and under 30 games,
    else 20 (docs/rules.md#fide)."""
    store = MemoryStore()
    await play(store, [imported(p) for p in IMPORTS] + [NOVEMBER, DECEMBER_LIST])
    lines = rows(await download(store))
    p = fide.PARAMS
    assert [int(lines[x]["k"]) for x in ("top", "junior", "newbie", "active")] == [p.k_top, p.k_junior, p.k_new,
                                                                                   p.k_default]


async def test_a_hostile_player_id_round_trips():
    store = MemoryStore()
    await play(store, [imported(p) for p in IMPORTS] + [NOVEMBER, DECEMBER_LIST])
    body = await download(store)
    assert b'"a,""b""\nc"' in body
    parsed = list(csv.reader(io.StringIO(body.decode(), newline="")))
    assert HOSTILE in [row[0] for row in parsed] and all(len(row) == 6 for row in parsed)


async def test_an_empty_list_is_its_header():
    assert await download(MemoryStore()) == fide_lists.HEADER


async def test_a_long_list_comes_in_chunks_of_about_64_kb():
    ids = [f"player-{i:06d}-" + "x" * 40 for i in range(3000)]

    async def many():
        for pid in ids:
            yield pid, listed(1500 + len(pid) % 7)

    chunks = [c async for c in fide_lists.csv_rows(many(), "2026-12")]
    assert chunks[0] == fide_lists.HEADER and len(chunks) > 3
    assert all(len(c) < fide_lists.CHUNK_BYTES + 200 for c in chunks)
    assert [r[0] for r in csv.reader(io.StringIO(b"".join(chunks).decode(), newline=""))][1:] == ids


# --- what a state can no longer tell -------------------------------------------------------------------


def test_a_state_tells_nothing_of_a_list_before_its_first():
    imported_state = listed(1800)._replace(extra={**listed(1800).extra, "lists": [["2026-11", 1800]]})
    assert fide.list_entry(imported_state, "2026-10") is None and fide.list_entry(None, "2026-12") is None
    assert fide.list_entry(imported_state, "2026-12").rating == 1800


def test_what_a_later_entry_replaced_is_unknown_not_made_up():
    """An import of a later list replaces the state: the older list's K and inactive mark are gone (empty
    cells), its rating is still known; games of a period closed by an earlier version (no closed_periods)
    are unknown too."""
    base = listed(1800)
    state = base._replace(extra={**base.extra, "lists": [["2026-12", 1800], ["2027-01", 1900]]})
    assert fide.list_entry(state, "2026-12") == fide.ListEntry(1800, None, None, None, None)
    entry = fide.list_entry(state, "2027-01")
    assert entry.rating == 1900 and entry.games is None and entry.k is not None and entry.inactive is False


def test_a_returner_is_inactive_on_the_list_before_his_game():
    """He was inactive on the list; his game after its date ends the mark (inactive_until), not the list's."""
    base = listed(2000)
    state = base._replace(last_at=at(2026, 12, 10),
                          extra={**base.extra, "lists": [["2025-01", 2000]], "inactive_until": at(2026, 12, 10)})
    assert fide.list_entry(state, "2026-12").inactive is True
    assert fide.list_entry(state, "2027-01").inactive is False


# --- which month is served ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "month"), [("2026-12", "2026-12"), ("2026-01", "2026-01"), ("2026-13", None),
                                             ("2026-00", None), ("0000-00", None), ("2026-1", None),
                                             ("2026-12x", None), ("２０２６-12", None), ("", None)])
def test_a_month_is_yyyy_mm(text, month):
    assert fide_lists.month_of(text) == month


def test_the_next_month():
    assert [fide_lists.next_month(m) for m in ("2026-11", "2026-12", "0999-12")] == ["2026-12", "2027-01", "1000-01"]


@pytest.mark.parametrize(("month", "status"), [("2026-12", None), ("2026-11", 410), ("2027-01", 404),
                                               ("2024-05", 410)])
async def test_only_the_newest_list_applied_is_served(month, status):
    applied_lists = {"2024-06", "2026-11", "2026-12"}

    async def applied(m: str) -> bool:
        return m in applied_lists

    if status is None:
        await fide_lists.check_served(month, applied)
        return
    with pytest.raises(Problem) as problem:
        await fide_lists.check_served(month, applied)
    assert problem.value.status == status and problem.value.parameter == "month"
