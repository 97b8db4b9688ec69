"""FIDE's monthly lists (issue 20, item 6; docs/rules.md#fide): `rating.period_closed` closes every open period up
to the list, publishes each list rating, delists under 1400 and marks inactive the players with no rated
game in the 12 months before it; applied by worker.engine.sweep in chunks, exactly once, resumable."""

from __future__ import annotations

import dataclasses
import io

import orjson
import pytest

from tests.unit.test_fide import at, event, k, listed
from worker.commands.replay import replay
from worker.contract.decode import decode
from worker.engine import apply_sweep
from worker.engine import sweep as sweep_module
from worker.ratings import fide
from worker.ratings.inputs import PeriodClosed
from worker.ratings.registry import system_for
from worker.store.memory import MemoryStore

DEC_LIST = PeriodClosed("fide", "2026-12", at(2026, 12, 1, 0))
NOV_20 = at(2026, 11, 20)


def open_period(rating, live_sum, period="2026-12", n=2, kk=20, last=NOV_20, **kw):
    st = listed(rating, **kw)
    return st._replace(rating=rating + kk * live_sum, last_at=last,
                       extra=dict(st.extra, period=period, k=kk, period_games=n, sum=live_sum))


def test_a_list_closes_every_open_period_up_to_it_and_no_later_one():
    """docs/rules.md#fide: a rating.period_closed closes every open period up to that list (rounded half away
    from zero, section 8.3.4), with its own change, also when the rounded rating equals the live one."""
    (ch,) = fide.close_list(DEC_LIST, k("a"), open_period(1800, 0.36))  # live 1807.2
    assert ch.after.extra["published"] == 1807 and ch.after.rating == 1807.0 and ch.after.extra["period"] is None
    assert ch.after.extra["lists"][-1] == ["2026-12", 1807] and ch.after.version == ch.before.version + 1
    assert ch.after.last_at == at(2026, 11, 20)  # a list is no game of his
    (same,) = fide.close_list(DEC_LIST, k("a"), open_period(1800, 0.0))
    assert same.after.rating == same.before.rating == 1800.0
    assert fide.close_list(DEC_LIST, k("a"), open_period(1800, 0.36, period="2027-01")) == ()
    assert fide.close_list(PeriodClosed("fide", "2027-01", at(2027, 1, 1, 0)), k("a"),
                           open_period(1800, 0.36, period="2026-11"))[0].after.extra["published"] == 1807


def test_a_rating_below_1400_at_the_list_is_delisted():
    """Section 7.2.1 (docs/rules.md#fide): under 1400 the player is shown unrated on the next list."""
    (ch,) = fide.close_list(DEC_LIST, k("a"), open_period(1410, -0.75))  # 1395
    assert ch.after.extra["published"] is None and fide.listed_rating(ch.after) is None
    assert ch.after.extra["lists"][-1] == ["2026-12", None]


def test_no_rated_game_in_12_months_before_the_list_marks_inactive_once():
    """docs/rules.md#fide: inactive on the list after 12 months without a rated game (pooled games count); the
    rating does not change; a second list does not mark him again; his next rated game makes him active."""
    old = listed(2100)._replace(last_at=at(2025, 11, 30))  # before 2025-12-01: 12 months before the list
    (mark,) = fide.close_list(DEC_LIST, k("a"), old)
    assert mark.after.extra["inactive"] is True and mark.after.rating == 2100.0 and fide.is_inactive(mark.after)
    assert fide.close_list(PeriodClosed("fide", "2027-01", at(2027, 1, 1, 0)), k("a"), mark.after) == ()
    assert fide.close_list(DEC_LIST, k("a"), listed(2100)._replace(last_at=at(2025, 12, 1, 0))) == ()
    unlisted = listed(2100)._replace(last_at=at(2020, 1, 1), extra={**listed(2100).extra, "published": None})
    assert fide.close_list(DEC_LIST, k("a"), unlisted) == ()  # no listed rating: nothing to mark
    states = {k("a"): mark.after, k("b"): listed(2100)}
    (game,) = [c for c in fide.rate_event(event([("a", "b", "1-0")], when=at(2026, 12, 5)), states).changes
               if c.key == k("a")]
    assert not fide.is_inactive(game.after) and "inactive" not in game.after.extra


# --- through the engine, as replay and the worker apply it ---------------------------------------------


def ce(ident: str, type_: str, data: dict, time: str) -> bytes:
    return orjson.dumps({"specversion": "1.0", "id": ident, "source": "/lists", "type": type_, "time": time,
                         "data": data})


def stream(players: int = 12, closed_at: str = "2026-12-01T00:00:00Z") -> list[bytes]:
    """Imported players, some of whom play in November (their periods go to the December list), some
    long idle, one who falls under 1400; then the December list (closed at `closed_at`), delivered twice,
    then a December event."""
    lines = []
    for i in range(players):
        last = "2025-06-01T00:00:00Z" if i % 3 == 0 else "2026-10-01T00:00:00Z"
        lines.append(ce(f"imp-{i}", "rating.imported", {
            "player_id": f"p{i:02d}", "system": "fide", "category": "standard", "rating": 1401 if i == 1 else 1800 + i,
            "games": 60, "imported_at": "2026-11-01T00:00:00Z", "last_played_at": last}, "2026-11-01T00:00:00Z"))
    games = [{"round": 1, "white": "p01", "black": "p02", "result": "0-1"},
             {"round": 2, "white": "p04", "black": "p05", "result": "1-0"},
             {"round": 3, "white": "p07", "black": "p08", "result": "1/2-1/2"}]
    ids = sorted({g[s] for g in games for s in ("white", "black")})
    lines.append(ce("nov-open", "event.finished", {
        "competition_id": "nov-open", "kind": "fide", "rated": True, "finished_at": "2026-11-20T18:00:00Z",
        "rating_type": "standard", "players": [{"player_id": p} for p in ids], "games": games},
        "2026-11-20T18:00:00Z"))
    close = ce("fide-list-2026-12", "rating.period_closed", {"system": "fide", "list": "2026-12",
                                                             "closed_at": closed_at}, closed_at)
    lines += [close, close]
    lines.append(ce("dec-open", "event.finished", {
        "competition_id": "dec-open", "kind": "fide", "rated": True, "finished_at": "2026-12-10T18:00:00Z",
        "rating_type": "standard", "players": [{"player_id": "p00"}, {"player_id": "p04"}],
        "games": [{"round": 1, "white": "p00", "black": "p04", "result": "1-0"}]}, "2026-12-10T18:00:00Z"))
    return lines


async def run(lines, chunk=1000):
    out, errors = io.BytesIO(), io.StringIO()
    store = await replay(lines, out, store=MemoryStore(), chunk=chunk, errors=errors)  # it keeps `messages`
    assert errors.getvalue() == ""
    return store, [orjson.loads(x)["data"] for x in out.getvalue().splitlines()]


async def test_the_list_closes_periods_delists_and_marks_inactive_through_replay():
    store, changes = await run(stream())
    listed_ = [c for c in changes if c["cause"]["type"] == "rating.period_closed"]
    closed = {c["player_id"] for c in listed_ if not c["inactive"]}
    assert closed == {"p01", "p02", "p04", "p05", "p07", "p08"}  # the November players' periods
    assert all(c["cause"]["ref"] == "2026-12" and c["changed_at"] == "2026-12-01T00:00:00Z" for c in listed_)
    p01 = next(c for c in listed_ if c["player_id"] == "p01")
    assert p01["after"]["rating"] is None and p01["delta"] is None  # 1401 lost 1.6: 1399, delisted
    inactive = {c["player_id"] for c in listed_ if c["inactive"]}
    assert inactive == {"p00", "p03", "p06", "p09"}  # idle since June 2025 (p00 plays again in December)
    p00 = [c for c in changes if c["player_id"] == "p00"]
    assert [c["inactive"] for c in p00] == [False, True, False]  # imported, marked, active again
    assert store.messages[("/lists", "fide-list-2026-12")].duplicates == 1  # delivered twice, applied once
    versions = [(c["player_id"], c["version"]) for c in changes]
    assert len(versions) == len(set(versions))


@pytest.mark.parametrize("closed_at", ["2026-11-28T06:00:00Z", "2026-11-30T23:59:59Z", "2026-12-02T09:00:00Z"])
async def test_a_list_closed_on_its_closing_date_or_after_its_1st_gives_the_same_records(closed_at):
    """closed_at may be any time: FIDE's closing date (28 November for the December list), the day before
    the list, or a day after it. The records are those of a list closed on the 1st, but for changed_at,
    which is the cause's time (the list's closed_at)."""
    _, on_the_1st = await run(stream())
    store, changes = await run(stream(closed_at=closed_at))
    assert store.messages[("/lists", "fide-list-2026-12")].outcome == "applied"
    listed_ = [c for c in changes if c["cause"]["type"] == "rating.period_closed"]
    assert len(listed_) == 10 and all(c["changed_at"] == closed_at for c in listed_)

    def but_the_time(records):
        return [{**c, "changed_at": None} if c["cause"]["type"] == "rating.period_closed" else c for c in records]

    assert but_the_time(changes) == but_the_time(on_the_1st)


@pytest.mark.parametrize("chunk", [1, 2, 5])
async def test_chunks_of_any_size_give_the_same_result(chunk, monkeypatch):
    """The sweep's chunk size (SWEEP_CHUNK) changes how many transactions, not what they change."""
    from worker.engine import sweep

    whole_store, whole = await run(stream())
    calls = []
    real = sweep.apply_sweep

    async def counted(store, message, published=None, size=sweep.CHUNK, progress=None, after_chunk=None,
                      system=None):
        progress = progress or sweep.SweepProgress()
        result = await real(store, message, published, size, progress, after_chunk, system)
        calls.append(progress.chunks)
        return result

    monkeypatch.setattr(sweep, "CHUNK", chunk)
    monkeypatch.setattr(sweep, "apply_sweep", counted)
    chunked_store, chunked = await run(stream())
    assert calls[0] == -(-10 // chunk)  # 10 states change (6 closes, 4 marks), at most `chunk` a transaction
    assert chunked == whole and chunked_store.states == whole_store.states


async def test_a_sweep_cut_short_resumes_and_changes_nothing_twice():
    """A crash after some chunks: the message is delivered again, the sweep goes over the pages again and
    changes only what is left; its id is recorded processed once, at the end."""
    lines = stream()
    before, close, after = lines[:-3], lines[-3], lines[-1]
    store, first = MemoryStore(), io.BytesIO()
    await replay(before, first, store=store)

    class Crash(Exception):
        pass

    def crash_after(n: int) -> None:
        if n == 2:
            raise Crash()

    message = decode(close)
    done = []

    async def keep(part) -> None:
        done.extend(part.records)

    with pytest.raises(Crash):
        await apply_sweep(store, message, keep, 2, after_chunk=crash_after)
    assert ("/lists", "fide-list-2026-12") not in store.messages and len(done) == 4
    again = await apply_sweep(store, message, keep, 2)
    assert [m.status for m in again.messages] == ["applied"]
    keys = [(r.key, r.version) for r in done]
    assert len(keys) == len(set(keys))  # nothing changed twice
    await replay([after], io.BytesIO(), store=store)
    reference, changes = await run(stream())
    assert store.states == reference.states  # the same as if it had never been cut short
    listed_ = [c for c in changes if c["cause"]["type"] == "rating.period_closed"]
    assert sorted(orjson.dumps(orjson.loads(r.payload)["data"], option=orjson.OPT_SORT_KEYS) for r in done) == sorted(
        orjson.dumps(c, option=orjson.OPT_SORT_KEYS) for c in listed_)


async def test_a_bug_in_the_sweep_s_rating_code_fails_the_message_not_the_worker(monkeypatch):
    """Like any message the rating code fails on: reported as failed (the pipeline dead-letters it as
    rating_error), its chunk rolled back, nothing recorded processed; re-submitted after a fix, it resumes."""
    lines = stream()
    store = MemoryStore()
    await replay(lines[:-3], io.BytesIO(), store=store)
    states_before = dict(store.states)

    def broken(closing, k, state, params=fide.PARAMS):
        raise ZeroDivisionError("a bug")

    message = decode(lines[-3])
    system = system_for(message)
    with_bug = dataclasses.replace(system, sweep=dataclasses.replace(system.sweep, rate_state=broken))
    monkeypatch.setattr(sweep_module, "system_for", lambda m: with_bug)
    result = await apply_sweep(store, message, None, 4)
    assert [(m.status, m.error) for m in result.messages] == [("failed", "ZeroDivisionError: a bug")]
    assert store.states == states_before and ("/lists", "fide-list-2026-12") not in store.messages
    monkeypatch.undo()
    fixed = await apply_sweep(store, message, None, 4)
    assert [m.status for m in fixed.messages] == ["applied"] and len(fixed.records) == 10


# --- what the review of this change found (each once wrong) ----------------------------------------------


def test_a_player_delisted_by_the_close_at_his_event_pools_its_games():
    """Section 7.2.1: under 1400 he is unrated from then on: the games of the event whose close delisted
    him are pooled for him, and his opponent's game against him is not rated (nobody is rated against a
    rating he no longer has)."""
    a = open_period(1405, -1.0, period="2026-03")  # live 1385: delisted at the close
    states = {k("a"): a, k("b"): listed(1600)}
    ev = event([("a", "b", "1-0"), ("b", "a", "0-1")], when=at(2026, 3, 10))
    out = fide.rate_event(dataclasses.replace(ev, started_at=at(2026, 2, 20)), states)
    close, pooled = [c for c in out.changes if c.key == k("a")]
    assert close.after.extra["published"] is None and len(pooled.after.extra["pool"]) == 2
    assert not [c for c in out.changes if c.key == k("b")] and out.left_out == (("b", "unrated_opponent"),)


def test_an_event_arriving_after_its_list_came_out_goes_to_the_next_list():
    """docs/rules.md#fide (rated into the open period): a late event never reopens a list already published,
    which would then be rewritten at the next close."""
    x = listed(1500)._replace(extra={**listed(1500).extra, "lists": [["2026-12", 1500]]})
    states = {k("x"): x, k("y"): listed(1500)}
    late = event([("x", "y", "1-0")], when=at(2026, 11, 20))  # the December list's event, after it came out
    (xs,) = [c for c in fide.rate_event(late, states).changes if c.key == k("x")]
    assert xs.after.extra["period"] == "2027-01"


def test_a_close_by_an_event_is_no_game_of_his():
    """docs/rules.md#fide: inactive after 12 months without a rated game; a period closed because he played
    an event where none of his games counted does not make him active."""
    x = open_period(1800, 0.0, period="2025-01", last=at(2024, 12, 10))
    states = {k("x"): x, k("o"): listed(1800)}
    out = fide.rate_event(event([("x", "new", "1-0")], when=at(2026, 1, 10)), states)  # an unrated opponent
    (close,) = [c for c in out.changes if c.key == k("x")]
    assert close.after.last_at == at(2024, 12, 10)
    marks = fide.close_list(PeriodClosed("fide", "2026-02", at(2026, 2, 1, 0)), k("x"), close.after)
    assert [m.after.extra.get("inactive") for m in marks] == [True]


def test_each_player_keeps_his_reason_when_nobody_in_the_event_changed():
    """Issue 20, item 2: a lone rapid game 650 points apart with a player over 2600 (rapid and blitz
    regulations, from 1 December 2024) leaves both unchanged for that reason, not a generic one."""
    states = {k("g", "rapid"): listed(2650), k("l", "rapid"): listed(2000)}
    out = fide.rate_event(event([("g", "l", "1-0")], when=at(2026, 11, 10), rating_type="rapid"), states)
    assert out.unrated_reason == "no_rated_games"
    assert out.left_out == (("g", "rating_gap_600"), ("l", "rating_gap_600"))
