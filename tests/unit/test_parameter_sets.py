"""Dated parameter sets (worker.ratings.parameters, issue 22 item 4): each message is rated with the set in
effect at its own time, ratings earned before a change are kept, every rating.changed names its set."""

from __future__ import annotations

import asyncio
import io
import math
import time
from dataclasses import replace
from datetime import UTC, datetime

import orjson
import pytest

from worker.commands.ratings_page import parameter_sets
from worker.commands.replay import replay
from worker.contract.changed import ChangeRecord, encode_change
from worker.dev.streams import every_type, game_event, games
from worker.ratings import csr, fairplay, registry
from worker.ratings.parameters import ParameterSet, Timeline, check_sets
from worker.ratings.registry import TIMELINES, system_for
from worker.ratings.state import StateKey
from worker.store.memory import MemoryStore

CHANGE = "2026-01-01T03:00:00Z"  # the second CSR set takes effect here, in the middle of the games below
SECOND = ParameterSet("csr-2", CHANGE, replace(csr.PARAMS, white_advantage=0.0, tau=0.3), "no White advantage")


def with_sets(monkeypatch, *sets: ParameterSet) -> dict[str, Timeline]:
    """CSR declared with these sets, as the registry declares every system from its modules' (fair play's refunds
    apply CSR's rules: they follow); its timelines."""
    check_sets("csr", sets)
    timelines = registry.declare_systems({**registry.DECLARED_SETS, "csr": sets})
    monkeypatch.setattr(registry, "KINDS", registry.kinds(timelines))
    return timelines


def run(values: list[bytes]) -> list[dict]:
    out = io.BytesIO()
    asyncio.run(replay(values, out, store=MemoryStore(), errors=io.StringIO()))
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


def at(value: bytes) -> float:
    return datetime.fromisoformat(orjson.loads(value)["data"]["finished_at"].replace("Z", "+00:00")).timestamp()


def test_a_timeline_gives_what_is_in_effect_at_a_time():
    t = Timeline([(-math.inf, "a"), (100.0, "b"), (200.0, "c")])
    assert [t.at(x) for x in (-1e12, 99.999, 100.0, 150.0, 200.0, 1e12)] == ["a", "a", "b", "b", "c", "c"]
    assert t.only is None and Timeline([(-math.inf, "a")]).only == "a"
    with pytest.raises(ValueError, match="from the beginning"):
        Timeline([(0.0, "a")])
    with pytest.raises(ValueError, match="must increase"):
        Timeline([(-math.inf, "a"), (5.0, "b"), (5.0, "c")])


def test_a_systems_sets_are_checked_as_the_registry_takes_them():
    first = csr.PARAMETER_SETS[0]
    with pytest.raises(ValueError, match="named csr-<n>"):
        check_sets("csr", [first, replace(SECOND, name="tsr-2")])
    with pytest.raises(ValueError, match="UTC time"):
        check_sets("csr", [first, replace(SECOND, effective_from="2027-03-01T00:00:00")])
    with pytest.raises(ValueError, match="from the beginning"):
        check_sets("csr", [SECOND])
    with pytest.raises(ValueError, match="names must differ"):
        check_sets("csr", [first, replace(SECOND, name="csr-1")])
    with pytest.raises(ValueError, match="must increase"):
        check_sets("csr", [first, SECOND, replace(SECOND, name="csr-3", effective_from="2025-01-01T00:00:00Z")])
    with pytest.raises(ValueError, match="same kind"):
        check_sets("csr", [first, replace(SECOND, params=fairplay.PARAMS)])


def test_every_system_is_declared_from_its_sets_and_every_record_names_its_set():
    for name, timeline in TIMELINES.items():
        assert [s.parameters for s in timeline.items()][0] == f"{name}-1", name
    records = run(every_type())
    assert records and {r["data"]["parameters"] for r in records} >= {"csr-1", "tsr-1", "uscf-1", "fide-1",
                                                                        "chesskite-1", "chesstempo-1", "fairplay-1"}
    for r in records:
        if r["data"]["cause"]["type"] == "account.closed":
            assert r["data"]["parameters"] == "fairplay-1"
        else:
            assert r["data"]["parameters"] == f"{r['data']['system']}-1"


def test_games_before_a_change_are_rated_as_before_and_those_after_it_by_the_new_set(monkeypatch):
    values = games(400, players=12, seed=7)  # one a minute from 2026-01-01 (worker.dev.streams.games)
    change = SECOND.starts_at
    before = [v for v in values if at(v) < change]
    assert 0 < len(before) < len(values)
    without = run(values)
    with_sets(monkeypatch, csr.PARAMETER_SETS[0], SECOND)
    dated = run(values)
    # Every change caused before the date is the same, to the byte but for nothing: ratings earned before it kept.
    cut = 2 * len(before)
    assert dated[:cut] == without[:cut]
    assert {r["data"]["parameters"] for r in dated[:cut]} == {"csr-1"}
    # After it, the new set rates (no White advantage, another tau): other numbers, named csr-2.
    assert {r["data"]["parameters"] for r in dated[cut:]} == {"csr-2"}
    assert [r["data"]["after"] for r in dated[cut:]] != [r["data"]["after"] for r in without[cut:]]


def test_a_message_is_rated_by_its_own_time_not_by_when_it_arrives(monkeypatch):
    with_sets(monkeypatch, csr.PARAMETER_SETS[0], SECOND)
    late = orjson.dumps(game_event(1, "late-w", "late-b", "1-0", datetime(2026, 1, 1, 2, 59, tzinfo=UTC)))
    later = orjson.dumps(game_event(2, "x-w", "x-b", "1-0", datetime(2026, 1, 1, 3, 0, tzinfo=UTC)))
    # delivered after a game past the change, the game played before it is still rated by csr-1
    records = run([later, late])
    assert [r["data"]["parameters"] for r in records] == ["csr-2", "csr-2", "csr-1", "csr-1"]
    # and with White's advantage of csr-1: the same numbers as without the second set
    monkeypatch.undo()
    assert run([late])[0]["data"]["after"] == records[2]["data"]["after"]


def test_a_replay_gives_the_same_answer_whatever_the_day_it_runs(monkeypatch):
    with_sets(monkeypatch, csr.PARAMETER_SETS[0], SECOND)
    values = games(200, players=8, seed=3)
    today = run(values)
    for clock in (0.0, 4e9):  # 1970 and 2096: the wall clock never picks a set
        monkeypatch.setattr(time, "time", lambda clock=clock: clock)
        assert run(values) == today


def test_a_fair_play_refund_follows_the_csr_set_in_effect_at_the_closure(monkeypatch):
    floor_gone = ParameterSet("csr-2", CHANGE, replace(csr.PARAMS, rating_floor=0.0, provisional_above=400.0),
                              "no floor, nobody provisional")
    refunds = with_sets(monkeypatch, csr.PARAMETER_SETS[0], floor_gone)["fairplay"].first
    key = StateKey("v", "csr", "blitz")
    from worker.ratings.inputs import AccountClosed, GameSide

    def closure(closed_at: float) -> AccountClosed:
        return AccountClosed("cheat", "fair_play", closed_at, games=(
            GameSide("/g", "1", "cheat", "blitz", 10.0, closed_at - 60), GameSide("/g", "1", "v", "blitz", -10.0,
                                                                                  closed_at - 60)))

    state = csr.RatingState(1500.0, 300.0, 0.06, 3, None, 0.0, 3)
    old = refunds.rate(closure(floor_gone.starts_at - 3600), {key: state}, {}).changes[0]
    new = refunds.rate(closure(floor_gone.starts_at + 3600), {key: state}, {}).changes[0]
    assert old.provisional is True and new.provisional is False  # RD 300: provisional under csr-1 only
    assert old.after.peak is None and new.after.peak == new.after.rating
    # a what-if of CSR's rules reaches the refunds too (evaluate --params)
    with registry.rated_with({"csr": replace(floor_gone, name="csr-9", effective_from=None)}):
        closing = closure(floor_gone.starts_at - 3600)
        from worker.ratings.inputs import Message

        message = Message("/r", "x", "account.closed", "t", closing)
        assert registry.system_for(message).rate(closing, {key: state}, {}).changes[0].provisional is False
    assert fairplay.rate_closure(closure(0.0), {key: state}).changes[0].provisional is True  # alone: the seed's


def test_a_record_from_before_parameter_sets_is_published_again_as_it_was():
    record = ChangeRecord("e", StateKey("p", "csr", "blitz"), 1, 1500.0, 0.0, "game.finished", "/s", "1", "g", 0.0,
                          b"", (1500.0, 350.0, 0.06), (1500.0, 340.0, 0.06), True, None, 1, "2026-01-01T00:00:00Z")
    assert "parameters" not in orjson.loads(encode_change(record))["data"]
    assert orjson.loads(encode_change(record._replace(parameters="csr-1")))["data"]["parameters"] == "csr-1"


def test_docs_list_every_set_with_its_date_and_what_it_changed(monkeypatch):
    monkeypatch.setitem(registry.DECLARERS, "csr", replace(registry.DECLARERS["csr"],
                                                           sets=(csr.PARAMETER_SETS[0], SECOND)))
    text = parameter_sets()
    assert "| CSR | `csr-1` | the beginning | the first set" in text
    assert "| CSR | `csr-2` | 2026-01-01T03:00:00Z | `tau` 0.5 → 0.3, `white_advantage` 35.0 → 0.0: no White advantage |" in text


def test_the_registry_picks_the_set_of_the_message_time(monkeypatch):
    with_sets(monkeypatch, csr.PARAMETER_SETS[0], SECOND)
    from worker.contract.decode import decode_rateable

    early, _ = decode_rateable(orjson.dumps(game_event(1, "a", "b", "1-0", datetime(2026, 1, 1, tzinfo=UTC))))
    late, _ = decode_rateable(orjson.dumps(game_event(2, "a", "b", "1-0", datetime(2026, 2, 1, tzinfo=UTC))))
    assert (system_for(early).parameters, system_for(late).parameters) == ("csr-1", "csr-2")


def test_a_what_if_of_the_fair_play_window_is_what_the_streaming_store_keeps():
    from worker.store.stream import DAY, StreamStore

    longer = ParameterSet("fairplay-9", None, replace(fairplay.PARAMS, window_days=90.0), "what-if")
    assert StreamStore(dedupe_window_s=DAY)._history_s == 31 * DAY
    with registry.rated_with({"fairplay": longer}):
        assert StreamStore(dedupe_window_s=DAY)._history_s == 91 * DAY
