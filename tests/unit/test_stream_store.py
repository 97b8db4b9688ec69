"""The replay's bounded store (worker.store.stream): the memory store's answers, in flat memory.

Within its windows it must write exactly what the memory store writes (which the worker = replay tests
tie to PostgreSQL); outside them it keeps its documented behaviour: a duplicate later than the dedupe
window is applied again, a closure reaching before the kept games is reported, `all` keeps everything.
"""

from __future__ import annotations

import io
import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from worker.commands.replay import dedupe_window, fair_play_closures, replay
from worker.dev.streams import TCS, every_type, game_event
from worker.store.memory import MemoryStore
from worker.store.stream import DAY, StreamStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def game(i: int, white: str, black: str, at: datetime, result: str = "1-0") -> bytes:
    return orjson.dumps(game_event(i, white, black, result, at, TCS[2]))


def closure(player: str, at: datetime) -> bytes:
    return orjson.dumps({"specversion": "1.0", "id": f"close-{player}", "source": "/review", "type": "account.closed",
                         "time": stamp(at), "data": {"player_id": player, "reason": "fair_play", "closed_at": stamp(at)}})


def daily_games(days: int, per_day: int, players: int, seed: int = 1, first: int = 0) -> list[bytes]:
    """`per_day` games a day for `days` days among `players` players: a constant rate of message time."""
    rng = random.Random(seed)
    names = [f"p{i:03d}" for i in range(players)]
    out = []
    for i in range(days * per_day):
        white, black = rng.sample(names, 2)
        at = T0 + timedelta(days=i // per_day, minutes=(i % per_day) * (1440 // per_day))
        out.append(game(first + i, white, black, at, rng.choice(["1-0", "0-1", "1/2-1/2"])))
    return out


async def run(lines: list[bytes], store, chunk: int = 1000) -> tuple[bytes, str]:
    out, errors = io.BytesIO(), io.StringIO()
    await replay(lines, out, store=store, chunk=chunk, errors=errors)
    return out.getvalue(), errors.getvalue()


@pytest.mark.parametrize("chunk", [1, 7, 1000])
async def test_every_type_gives_the_memory_store_s_bytes_and_states(chunk):
    lines = every_type()
    memory, stream = MemoryStore(), StreamStore(watched=fair_play_closures(lines))
    expected, expected_errors = await run(lines, memory, chunk)
    got, errors = await run(lines, stream, chunk)
    assert got == expected and errors == expected_errors
    assert stream.states == memory.states and stream.closures == memory.closures
    assert b'"type":"account.closed"' in expected  # refunds: p001's games were there when asked for
    assert stream.games_kept() == 0  # and went once his closure was applied
    by_default = io.BytesIO()
    assert isinstance(await replay(lines, by_default, chunk=chunk, errors=io.StringIO()), StreamStore)
    assert by_default.getvalue() == expected


async def test_every_type_read_once_says_which_closure_came_too_late_for_its_window():
    """Its fair-play closure comes after months of other messages: from one pass (stdin), its games are
    no longer kept, and replay says so rather than refunding less in silence."""
    _, errors = await run(every_type(), StreamStore(), 1)  # one message a commit: the clock follows each
    assert "line 4021: incomplete_history: p001's csr game.finished history since 2025-12-04T00:00:00Z" in errors
    assert errors.count("incomplete_history") == 1


async def test_a_closure_refunds_from_the_kept_games_exactly_as_from_the_whole_history():
    """70 days of games, trimmed as they go; a closure 6.5 days late still finds every game of its 30 days
    (kept for 30 + 7 days, trimmed a day at a time)."""
    lines = daily_games(70, 24, 12)
    lines.insert(60 * 24, closure("p003", T0 + timedelta(days=53, hours=12)))
    expected, _ = await run(lines, MemoryStore(), chunk=5)
    stream = StreamStore()
    got, errors = await run(lines, stream, chunk=5)
    assert b'"account.closed"' in expected and got == expected and errors == ""
    assert stream.history_short == {}
    assert stream.history_from > T0.timestamp() + 20 * DAY  # the first 20 days' games were dropped


async def test_a_closure_later_than_the_window_is_reported_and_all_keeps_it_exact():
    lines = daily_games(60, 24, 12)
    lines.append(closure("p003", T0 + timedelta(days=20)))  # delivered 40 days after its time
    expected, _ = await run(lines, MemoryStore(), chunk=5)
    _, errors = await run(lines, StreamStore(), chunk=5)
    assert errors.count("incomplete_history") == 1  # read twice under the locks, said once
    assert "line 1441: incomplete_history: p003's csr game.finished history since 2025-12-22T00:00:00Z" in errors
    assert "--dedupe-window all" in errors
    exact, errors = await run(lines, StreamStore(dedupe_window_s=None), chunk=5)
    assert exact == expected and errors == ""


async def test_a_file_read_for_its_closures_first_keeps_their_players_games_whole_and_only_theirs():
    lines = daily_games(60, 24, 12)
    lines.append(closure("p003", T0 + timedelta(days=20)))  # 40 days late, as above
    closed_at = (T0 + timedelta(days=20)).timestamp()
    assert fair_play_closures([b"not json", *lines]) == {"p003": (closed_at, closed_at)}
    expected, _ = await run(lines, MemoryStore(), chunk=5)
    stream = StreamStore(watched={"p003"})
    got, errors = await run(lines, stream, chunk=5)
    assert got == expected and errors == ""
    assert stream.games_kept() == 0  # p003's games went with his closure
    before = StreamStore(watched=fair_play_closures(lines))
    await run(lines[:-1], before, chunk=5)  # all but the closure: his 30 days' games are waiting for it
    assert 0 < before.games_kept() <= 21 * 24 / 4  # p003's (about 2 games in 12) of days 0 to 20, not all 60
    _, errors = await run(lines, StreamStore(watched={"somebody else"}), chunk=5)
    assert "line 1441: incomplete_history: p003's csr game.finished" in errors and "not a watched player" in errors


async def test_a_second_closure_of_the_same_account_is_not_reported():
    lines = daily_games(60, 24, 12)
    lines += [closure("p003", T0 + timedelta(days=20)), closure("p003", T0 + timedelta(days=20))]
    lines[-1] = lines[-1].replace(b"close-p003", b"close-p003-again")
    _, errors = await run(lines, StreamStore(), chunk=1)
    assert errors.count("incomplete_history") == 1 and "line 1441:" in errors


async def test_a_duplicate_inside_the_window_is_skipped_one_later_is_applied_again_unless_all():
    first = game(1, "a", "b", T0)
    later = daily_games(20, 4, 6, first=100)  # the clock moves 20 days on
    inside = [first, *later[:3 * 4], first]  # again after 3 days: skipped
    after = [first, *later, first]  # again after 20 days: outside the 7-day window

    def changes(out: bytes) -> int:
        return sum(orjson.loads(line)["data"]["cause"]["id"] == "game-1" for line in out.splitlines())

    out, _ = await run(inside, StreamStore(), chunk=1)
    assert changes(out) == 2  # both players, once
    out, _ = await run(after, StreamStore(), chunk=1)
    assert changes(out) == 4  # applied again: the documented price of a window
    out, _ = await run(after, StreamStore(dedupe_window_s=None), chunk=1)
    assert changes(out) == 2
    assert out == (await run(after, MemoryStore(), chunk=1))[0]


async def test_what_is_kept_stays_flat_in_the_stream_s_length():
    per_day = 50
    lines = daily_games(120, per_day, 40)
    sizes = {}
    for day in (45, 120):
        # chunks of a fifth of a day: a chunk's ids are kept from the clock after it (longer, never shorter)
        await run(lines[:day * per_day], stream := StreamStore(), chunk=per_day // 5)
        sizes[day] = (stream.ids_kept(), stream.games_kept(), len(stream._games_of))
    # ids: the 7-day window and at most a day more; games: 30 days + 7 + at most a day more
    assert sizes[45][0] <= 9 * per_day and sizes[120][0] <= 9 * per_day
    assert sizes[45][1] <= 39 * per_day and sizes[120][1] <= 39 * per_day
    assert sizes[120] == pytest.approx(sizes[45], rel=0.05)
    assert stream.history_from >= (T0 + timedelta(days=120 - 39)).timestamp() - DAY


async def test_a_long_window_is_kept_in_a_few_sets_and_still_finds_its_duplicates():
    """A lookup asks each span's set: a 90-day window is kept in spans of 12 days, not in 90 sets."""
    per_day = 10
    lines = daily_games(200, per_day, 40)
    # Delivered again 80 days after their first delivery: inside the window.
    again = lines[:100 * per_day] + lines[20 * per_day:21 * per_day] + lines[100 * per_day:]
    out, _ = await run(again, stream := StreamStore(dedupe_window_s=90 * DAY), chunk=per_day)
    assert out == (await run(lines, StreamStore(dedupe_window_s=90 * DAY), chunk=per_day))[0]
    assert len(stream._ids_by_span) <= 9
    assert 90 * per_day <= stream.ids_kept() <= (90 + 12 + 1) * per_day  # the window and at most a span more


def test_the_window_reads_durations_and_all():
    assert dedupe_window("7d") == 7 * DAY and dedupe_window("12h") == 43200 and dedupe_window("90m") == 5400
    assert dedupe_window("3600") == 3600 and dedupe_window("ALL") is None
    for bad in ("0", "-1d", "week", "", "inf", "1e999d"):
        with pytest.raises(Exception, match="duration|more than 0 and finite"):
            dedupe_window(bad)


def test_what_it_does_not_keep_cannot_be_read_by_mistake():
    store = StreamStore()
    with pytest.raises(AttributeError):
        store.history  # noqa: B018
    with pytest.raises(TypeError, match="MemoryStore"):
        store.processed_ids  # noqa: B018


async def test_the_command_reads_a_file_twice_and_stdin_once(tmp_path):
    """`rating-worker replay FILE` keeps the closed accounts' games whole (exact); from stdin it has only
    the window, and says so for a closure that came too late (100 days: the clock, a median of each
    1,000-message commit, is well past its window)."""
    lines = daily_games(120, 24, 12)
    lines.append(closure("p003", T0 + timedelta(days=20)))
    expected, _ = await run(lines, MemoryStore(), chunk=1000)
    source = tmp_path / "history.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    command = [sys.executable, "-m", "worker", "replay"]
    from_file = subprocess.run([*command, str(source), "-o", str(tmp_path / "out")], capture_output=True, timeout=120)
    assert from_file.returncode == 0 and from_file.stderr == b""
    assert (tmp_path / "out").read_bytes() == expected
    from_stdin = subprocess.run([*command, "--dedupe-window", "3d"], input=source.read_bytes(), capture_output=True,
                                timeout=120)
    assert from_stdin.returncode == 0 and b"line 2881: incomplete_history" in from_stdin.stderr
    assert b"--dedupe-window all" in from_stdin.stderr


def test_every_system_that_reads_history_declares_what_is_kept():
    """A history query the stream store was not told about would stop a replay with a traceback."""
    from worker.ratings.registry import SYSTEMS

    for system in SYSTEMS:
        reads = system.history is not type(system).__dataclass_fields__["history"].default
        assert (system.history_kept is not None) == reads, system.name
