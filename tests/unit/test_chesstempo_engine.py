"""Chess Tempo through the engine (as `replay` and the worker run it): problems and repeat records kept
but not published, the day's top group taken from the established users of that moment."""

from __future__ import annotations

import io
from collections import defaultdict

import orjson

from worker.commands.replay import replay
from worker.contract.times import parse_time
from worker.dev.streams import chesstempo_attempts
from worker.ratings import chesstempo


async def run(lines: list[bytes], chunk: int):
    out, errors = io.BytesIO(), io.StringIO()
    store = await replay(lines, out, chunk=chunk, errors=errors)
    assert errors.getvalue() == ""
    return store, [orjson.loads(x)["data"] for x in out.getvalue().splitlines()]


async def test_one_message_per_transaction_and_one_batch_agree_exactly():
    lines = chesstempo_attempts(1500, users=40, problems=30, seed=3)
    one, out_one = await run(lines, chunk=1)
    batch, out_batch = await run(lines, chunk=len(lines))
    assert out_one == out_batch
    assert one.states == batch.states


async def test_only_users_ratings_are_published_problems_and_repeats_are_kept():
    lines = chesstempo_attempts(400, users=20, problems=10, seed=4)
    store, changes = await run(lines, chunk=100)
    assert len(changes) == 400 and {c["system"] for c in changes} == {"chesstempo"}
    assert {c["category"] for c in changes} == {"standard", "blitz"}
    assert all(c["volatility"] is None for c in (x["after"] for x in changes))
    systems = {k.system for k in store.states}
    assert systems == {"chesstempo", "chesstempo-problem", "chesstempo-seen", "chesstempo-top"}
    attempts = sum(st.games for k, st in store.states.items() if k.system == "chesstempo-problem")
    assert attempts == 400
    blitz = [st for k, st in store.states.items() if k.system == "chesstempo-problem" and k.category == "blitz"]
    assert any(st.extra and st.extra["solves"] >= 2 for st in blitz)


async def test_the_days_threshold_is_taken_from_the_established_users_of_that_moment():
    """Rebuilt from the published stream: at the first attempt of each day and mode, the ratings of the
    users with RD <= 110; the stored threshold must be the 2% rule applied to them."""
    lines = chesstempo_attempts(24000, users=120, problems=60, seed=5, days=4)
    for chunk in (1000, 7):
        store, changes = await run(lines, chunk=chunk)
        latest: dict[tuple[str, str], tuple[float, float]] = {}
        expected: dict[tuple[int, str], float | None] = {}
        by_time = defaultdict(list)
        for c in changes:
            by_time[c["changed_at"]].append(c)
        for line in lines:
            data = orjson.loads(line)["data"]
            day = (chesstempo.utc_day(parse_time(data["attempted_at"])), data["mode"])
            if day not in expected:
                established = [r for (p, m), (r, rd) in latest.items() if m == data["mode"] and rd <= 110]
                expected[day] = chesstempo.top_threshold(established)
            for c in by_time.get(orjson.loads(line)["time"], ()):
                latest[(c["player_id"], c["category"])] = (c["after"]["rating"], c["after"]["rd"])
        kept = {(chesstempo.utc_day(st.last_at), k.category): st.extra["threshold"]
                for k, st in store.states.items() if k.system == "chesstempo-top"}
        assert kept == expected
        assert any(t is not None for t in kept.values())  # the stream is long enough for a top group
