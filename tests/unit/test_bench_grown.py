"""bench/grown.py, the rows of `./dev bench lifecycle`'s grown database: what the worker relies on when it
continues them (versions from 1 without a gap per rating, `ratings` at each rating's last version, players
named as the stream names them) and a platform's keys. No database: the loading is the benchmark's."""

from collections import Counter, defaultdict
from uuid import UUID

import orjson

from bench.grown import (
    CATEGORIES,
    CHANGE_COLUMNS,
    PROCESSED_COLUMNS,
    RATING_COLUMNS,
    SOURCES,
    Builder,
    Plan,
    platform_games,
)
from worker.contract.decode import decode
from worker.dev.streams import games

PLAN = Plan(games_per_day=600, days=2, players=40, end=1_780_000_000.0, seed=7)


def _build(plan: Plan = PLAN, chunk: int = 250):
    builder = Builder(plan)
    processed, changes = [], []
    while (rows := builder.next_chunk(chunk)) is not None:
        processed += rows.processed
        changes += rows.changes
    return builder, processed, changes


def test_every_game_is_one_processed_id_and_two_history_rows_in_time_order():
    builder, processed, changes = _build()
    assert len(processed) == PLAN.games and len(changes) == 2 * PLAN.games
    assert all(len(row) == len(PROCESSED_COLUMNS) for row in processed)
    assert all(len(row) == len(CHANGE_COLUMNS) for row in changes)
    col = {name: i for i, name in enumerate(CHANGE_COLUMNS)}
    assert [row[col["id"]] for row in changes] == list(range(1, 2 * PLAN.games + 1))
    times = [row[col["changed_at"]].timestamp() for row in changes]
    assert times == sorted(times)
    assert PLAN.start <= times[0] and times[-1] < PLAN.end
    by_message = Counter((row[col["cause_source"]], row[col["cause_id"]]) for row in changes)
    assert set(by_message.values()) == {2}
    assert set(by_message) == {(row[0], row[1]) for row in processed}


def test_keys_are_random_uuids_over_eight_sources():
    _, processed, changes = _build()
    ids = [row[1] for row in processed]
    refs = [row[PROCESSED_COLUMNS.index("ref")] for row in processed]
    assert len(set(ids)) == len(ids) and len(set(refs)) == len(refs)
    assert all(UUID(i).version == 4 for i in ids[:50] + refs[:50])
    assert {row[0] for row in processed} == set(SOURCES) and len(SOURCES) == 8
    assert len({row[CHANGE_COLUMNS.index("event_id")] for row in changes}) == len(changes)


def test_versions_count_from_one_without_a_gap_and_ratings_hold_the_last():
    builder, _, changes = _build()
    col = {name: i for i, name in enumerate(CHANGE_COLUMNS)}
    versions = defaultdict(list)
    for row in changes:
        versions[(row[col["player_id"]], row[col["category"]])].append(row[col["version"]])
        assert row[col["delta"]] == row[col["after_rating"]] - row[col["before_rating"]]
        assert row[col["games"]] == row[col["version"]]
    assert all(v == list(range(1, len(v) + 1)) for v in versions.values())
    ratings = list(builder.histories.rating_rows(0, PLAN.players))
    assert all(len(r) == len(RATING_COLUMNS) for r in ratings)
    last = {(r[0], r[2]): r[RATING_COLUMNS.index("version")] for r in ratings}
    assert last == {key: len(v) for key, v in versions.items()}
    assert {category for _, category in last} == set(CATEGORIES)


def test_the_same_plan_gives_the_same_rows_whatever_the_chunks():
    assert _build(chunk=1000)[2] == _build(chunk=77)[2]


def test_the_stream_is_the_realistic_case_with_a_platforms_keys():
    start = PLAN.end
    values = platform_games(300, 20, start, PLAN.spacing)
    again = platform_games(300, 20, start, PLAN.spacing)
    model = [orjson.loads(v) for v in games(300, 20, seed=3)]
    ours = [orjson.loads(v) for v in values]
    for a, b in zip(ours, model, strict=True):  # the same players, time controls and results as games()
        assert (a["data"]["white"], a["data"]["black"], a["data"]["time_control"], a["data"]["result"]) == \
               (b["data"]["white"], b["data"]["black"], b["data"]["time_control"], b["data"]["result"])
    assert not {e["id"] for e in ours} & {orjson.loads(v)["id"] for v in again}  # fresh ids every call
    assert {e["source"] for e in ours} == set(SOURCES)
    message = decode(values[0])  # a valid game.finished for the worker
    assert (message.type, message.source, message.id) == ("game.finished", ours[0]["source"], ours[0]["id"])
    assert UUID(message.id).version == 4 and UUID(ours[0]["data"]["game_id"]).version == 4
    assert ours[1]["time"] > ours[0]["time"] >= "2026-05-28T"  # from `start` on, PLAN.end
