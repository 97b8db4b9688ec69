"""Hostile and broken input (issue 9): every kind of bad record becomes a dead letter with a clear reason,
message values reach SQL only as bound parameters, and secrets and player ids stay out of logs and metrics.

The fuzzing of the decoder is in tests/property/test_fuzz_decoder.py; the PostgreSQL side of the
injection check in tests/integration/test_hostile_input.py.
"""

from __future__ import annotations

import ast
import asyncio
import io
import logging
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from worker import config as config_mod
from worker.contract import decode as decoding
from worker.contract.changed import validate_output
from worker.contract.decode import MAX_BYTES, decode
from worker.contract.reasons import ERROR_CLASSES, BadMessage
from worker.engine import apply_batch
from worker.observability import JsonFormatter, Metrics
from worker.store.memory import MemoryStore
from worker.store.queries import QUERIES

ROOT = Path(__file__).resolve().parents[2]

GAME = {"game_id": "g-1", "rated": True, "variant": "standard",
        "time_control": {"base_seconds": 300, "increment_seconds": 0},
        "white": {"player_id": "anna"}, "black": {"player_id": "ben"},
        "result": "1-0", "finished_at": "2026-11-30T12:00:00Z"}
TURBO = {"competition_id": "tl-1", "kind": "turbo_live", "rated": True, "finished_at": "2026-11-30T12:00:00Z",
         "format": "10min",
         "players": [{"player_id": "anna", "agreement": 0.7, "votes": 10, "team_games": {"won": 1, "drawn": 0, "lost": 1}},
                     {"player_id": "ben", "agreement": 0.4, "votes": 3, "team_games": {"won": 0, "drawn": 1, "lost": 1}}]}
USCF = {"competition_id": "open-1", "kind": "uscf", "rated": True, "finished_at": "2026-11-30T12:00:00Z",
        "time_control": {"base_minutes": 90, "increment_seconds": 30},
        "players": [{"player_id": "p1"}, {"player_id": "p2"}],
        "games": [{"round": 1, "white": "p1", "black": "p2", "result": "1-0"}]}
FIDE = {**USCF, "competition_id": "fide-1", "kind": "fide", "rating_type": "standard"}
KITE = {"system": "chesskite", "player_id": "anna", "puzzle_id": "k-1", "correct": True, "challenge": True,
        "puzzle_rating": 1240, "attempted_at": "2026-11-30T12:00:00Z"}
TEMPO = {"system": "chesstempo", "mode": "standard", "player_id": "anna", "puzzle_id": "t-1", "correct": True,
         "attempted_at": "2026-11-30T12:00:00Z"}
CLOSED = {"player_id": "cheat99", "reason": "fair_play", "closed_at": "2026-11-30T12:00:00Z"}
T = "2026-11-30T12:00:00Z"
IMPORTED = {"player_id": "p1", "system": "csr", "category": "blitz", "rating": 1712.5,
            "last_played_at": "2026-10-28T18:30:00Z", "imported_at": "2026-11-30T12:00:00Z"}
CAUSE = {"game.finished": (GAME, "finished_at"), "event.finished": (TURBO, "finished_at"),
         "puzzle.attempted": (KITE, "attempted_at"), "account.closed": (CLOSED, "closed_at"),
         "rating.imported": (IMPORTED, "imported_at")}


def envelope(type_: str, data, **attributes) -> dict:
    return {"specversion": "1.0", "id": "m-1", "source": "/game-server/eu-1", "type": type_,
            "time": "2026-11-30T12:00:00Z", "data": data, **attributes}


def ce(type_: str, data, **attributes) -> bytes:
    return orjson.dumps(envelope(type_, data, **attributes))


def rejected(value, **kwargs) -> BadMessage:
    with pytest.raises(BadMessage) as info:
        decode(value, **kwargs)
    exc = info.value
    assert exc.error_class in ERROR_CLASSES
    assert exc.reason and "\n" not in exc.reason and len(exc.reason) < 400, exc.reason
    exc.reason.encode("utf-8")  # a Kafka header
    return exc


def cpu_seconds(fn, *args) -> float:
    """CPU time of one call (not wall time: a loaded machine does not make it longer)."""
    start = time.process_time()
    try:
        fn(*args)
    except BadMessage:
        pass
    return time.process_time() - start


# --- Oversized records ---------------------------------------------------------------------------------


def test_the_size_limit_is_the_configured_one_and_defaults_to_a_mebibyte():
    assert config_mod.Config().max_message_bytes == MAX_BYTES == 1_048_576
    padded = envelope("game.finished", GAME, padding="x" * MAX_BYTES)
    raw = orjson.dumps(padded)
    exc = rejected(raw)
    assert (exc.error_class, exc.reason) == (
        "too_large", f"record value: {len(raw)} bytes, over the limit of {MAX_BYTES} bytes")
    # The pipeline passes MAX_MESSAGE_BYTES: any limit is honoured, to the byte.
    small = ce("game.finished", GAME)
    assert decode(small, max_bytes=len(small)).id == "m-1"
    assert rejected(small, max_bytes=len(small) - 1).reason == (
        f"record value: {len(small)} bytes, over the limit of {len(small) - 1} bytes")


def test_a_text_record_is_measured_in_utf8_bytes():
    text = ce("game.finished", {**GAME, "note": "é" * 600}).decode()
    assert len(text) < 1500 < len(text.encode())
    assert rejected(text, max_bytes=1500).error_class == "too_large"
    assert decode(text, max_bytes=len(text.encode())).id == "m-1"


def test_a_huge_record_is_refused_before_it_is_parsed():
    raw = b"[" * (50 * MAX_BYTES)  # 50 MiB: parsing it would be the first thing to hurt
    assert cpu_seconds(decode, raw) < 0.5
    assert rejected(raw).error_class == "too_large"


# --- Deep nesting ---------------------------------------------------------------------------------------


def test_json_nested_deeper_than_the_limit_is_invalid_json():
    deep = b'{"a":' * (decoding.MAX_DEPTH + 1) + b"1" + b"}" * (decoding.MAX_DEPTH + 1)
    exc = rejected(deep)
    assert exc.error_class == "invalid_json"
    assert exc.reason.startswith("record value: JSON nested deeper than 1024 levels, at line 1 column")


def test_deep_nesting_in_an_ignored_field_is_accepted_and_cheap():
    event = envelope("game.finished", GAME)
    deep = b'{"a":' * 1000 + b"[]" + b"}" * 1000
    raw = orjson.dumps(event)[:-2] + b',"deep":' + deep + b"}}"
    assert decode(raw).payload.white_id == "anna"
    assert cpu_seconds(decode, raw) < 0.5


def test_a_nul_at_the_bottom_of_a_wide_deep_tree_is_found_without_blowing_up():
    """A megabyte of siblings 900 levels down with one U+0000: the reason names the field, and finding
    it costs milliseconds (the path of every field on the way used to be spelled out: 4 s, 1.8 GB)."""
    key = "k" * 40
    inner = b"{" + b",".join(b'"%d":0' % i for i in range(50_000)) + b',"z":"\\u0000"}'
    deep = (b'{"' + key.encode() + b'":') * 900 + inner + b"}" * 900
    raw = orjson.dumps(envelope("game.finished", GAME))[:-2] + b',"deep":' + deep + b"}}"
    assert len(raw) < MAX_BYTES
    exc = rejected(raw)
    assert exc.error_class == "invalid_data"
    assert exc.reason.startswith(f"data.deep.{key}.") and exc.reason.endswith(
        ".z: must not contain the NUL character (U+0000)")
    assert cpu_seconds(decode, raw) < 1.0


# --- Huge numbers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("literal", [b"1e400", b"-1e400", b"1" + b"0" * 400, b"1.5E+999"])
def test_a_number_beyond_a_double_is_invalid_json(literal):
    raw = ce("game.finished", GAME).replace(b'"base_seconds":300', b'"base_seconds":' + literal)
    exc = rejected(raw)
    assert exc.error_class == "invalid_json"
    assert exc.reason.startswith("record value: a number too large for a 64-bit float (like 1e400), at line 1")


@pytest.mark.parametrize("type_,data,path,literal,reason", [
    ("game.finished", GAME, ("time_control", "base_seconds"), b"18446744073709551616",
     "data.time_control.base_seconds: must be <= 1000000000 (got 1.8446744073709552e+19)"),
    ("game.finished", GAME, ("time_control", "base_seconds"), b"9223372036854775807",
     "data.time_control.base_seconds: must be <= 1000000000 (got 9223372036854775807)"),
    ("game.finished", {**GAME, "time_control": {"days_per_move": 3}}, ("time_control", "days_per_move"), b"1e300",
     "data.time_control.days_per_move: must be <= 1000000000 (got 1e+300)"),
    ("event.finished", TURBO, ("players", 0, "votes"), b"1e19",
     "data.players[0].votes: must be <= 1000000000 (got 1e+19)"),
    ("event.finished", TURBO, ("players", 0, "agreement"), b"1.0000000000000002",
     "data.players[0].agreement: must be <= 1 (got 1.0000000000000002)"),
    ("event.finished", USCF, ("time_control", "base_minutes"), b"1e308",
     "data.time_control.base_minutes: must be <= 1000000 (got 1e+308)"),
    ("puzzle.attempted", KITE, ("puzzle_rating",), b"-1e308", "data.puzzle_rating: must be >= 0 (got -1e+308)"),
    ("rating.imported", IMPORTED, ("rating",), b"1e308", "data.rating: must be <= 5000 (got 1e+308) (the csr maximum)"),
    ("rating.imported", {**IMPORTED, "system": "uscf", "category": "regular", "last_played_at": T}, ("rating",),
     b"1e308", "data.rating: must be <= 10000 (got 1e+308)"),
    ("rating.imported", IMPORTED, ("volatility",), b"5e-324", "data.volatility: must be >= 0.001 (got 5e-324)"),
    ("rating.imported", IMPORTED, ("games",), b"99999999999999999999",
     "data.games: must be <= 1000000000 (got 1e+20)"),
])
def test_huge_numbers_are_out_of_range(type_, data, path, literal, reason):
    marker = "__NUMBER__"
    event = envelope(type_, orjson.loads(orjson.dumps(data)))
    parent = event["data"]
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = marker
    raw = orjson.dumps(event).replace(f'"{marker}"'.encode(), literal)
    exc = rejected(raw)
    assert (exc.error_class, exc.reason) == ("invalid_data", reason)


async def test_imports_at_the_bounds_leave_ratings_that_can_still_be_rated():
    """The import bounds are where the rating maths stays finite: a csr rating of 9999 (expected score
    1.0: division by zero) or a volatility of 1e-300 (ln(0)) made every later game of the player a
    rating_error; at 5000 and 0.001 they rate."""
    lines = [
        ce("rating.imported", {**IMPORTED, "player_id": "hi", "rating": 5000, "rd": 45, "volatility": 0.001}, id="i1"),
        ce("rating.imported", {**IMPORTED, "player_id": "lo", "rating": 0, "rd": 45, "volatility": 1}, id="i2"),
        ce("game.finished", {**GAME, "white": {"player_id": "hi"}, "black": {"player_id": "lo"}}, id="g1"),
        ce("game.finished", {**GAME, "white": {"player_id": "lo"}, "black": {"player_id": "hi"}}, id="g2"),
    ]
    result = await apply_batch(MemoryStore(), [decode(raw) for raw in lines])
    assert not result.failed and result.outcomes == ["applied"] * 4
    for record in result.records:
        validate_output(orjson.loads(record.payload))
    for data, field in (({**IMPORTED, "rating": 5000.5}, "rating"), ({**IMPORTED, "volatility": 0.000999}, "volatility")):
        assert rejected(ce("rating.imported", data)).reason.startswith(f"data.{field}: must be ")


def test_negative_zero_becomes_zero():
    e = decode(ce("event.finished", {**TURBO, "players": [{**TURBO["players"][0], "agreement": -0.0}]})).payload
    assert str(e.players[0].agreement) == "0.0"


# --- NUL characters and invalid UTF-8 --------------------------------------------------------------------


@pytest.mark.parametrize("value,error_class,reason", [
    (ce("game.finished", {**GAME, "white": {"player_id": "an\x00na"}}), "invalid_data",
     "data.white.player_id: must not contain the NUL character (U+0000)"),
    (ce("event.finished", {**USCF, "games": [{**USCF["games"][0], "white": "p1\x00"}]}), "invalid_data",
     "data.games[0].white: must not contain the NUL character (U+0000)"),
    (ce("game.finished", GAME, id="m\x001"), "invalid_envelope", "id: must not contain the NUL character (U+0000)"),
    (ce("game.finished", GAME, source="/gs\x00"), "invalid_envelope",
     "source: must not contain the NUL character (U+0000)"),
    (ce("game.finished", {**GAME, "extra": {"a\x00b": 1}}), "invalid_data",
     "data.extra.'a\\x00b': must not contain the NUL character (U+0000)"),
])
def test_nul_characters_are_refused_where_the_worker_keeps_text(value, error_class, reason):
    exc = rejected(value)
    assert (exc.error_class, exc.reason) == (error_class, reason)


def test_a_raw_nul_byte_is_not_json():
    raw = ce("game.finished", GAME).replace(b'"anna"', b'"an\x00na"')
    exc = rejected(raw)
    assert exc.error_class == "invalid_json" and "control character" in exc.reason


@pytest.mark.parametrize("bad,why", [
    (b"\xff", "invalid start byte"),
    (b"\xc0\xaf", "invalid start byte"),  # an overlong '/'
    (b"\xed\xa0\x80", "invalid continuation byte"),  # an encoded surrogate
    (b"\xe2\x82", "invalid continuation byte"),  # truncated
    (b"\xf4\x90\x80\x80", "invalid continuation byte"),  # beyond U+10FFFF
])
def test_invalid_utf8_says_where(bad, why):
    raw = ce("game.finished", GAME).replace(b'"anna"', b'"an' + bad + b'na"')
    at = raw.index(bad)
    exc = rejected(raw)
    assert (exc.error_class, exc.reason) == ("invalid_utf8", f"record value: invalid UTF-8 at byte {at} ({why})")


def test_a_lone_surrogate_is_refused():
    assert rejected(ce("game.finished", GAME).replace(b'"anna"', b'"\\udc80"')).error_class == "invalid_json"
    text = ce("game.finished", GAME).decode().replace('"anna"', '"\udc80"')  # a str record (tests, tools)
    exc = rejected(text)
    assert exc.error_class == "invalid_utf8" and exc.reason.startswith("record value: not UTF-8 at character")


# --- Times far in the past or the future -----------------------------------------------------------------


@pytest.mark.parametrize("type_", list(CAUSE))
def test_a_cause_before_1970_is_refused(type_):
    data, field = CAUSE[type_]
    exc = rejected(ce(type_, {**data, field: "1969-12-31T23:59:59Z"}))
    assert (exc.error_class, exc.reason) == (
        "invalid_data", f"data.{field}: must not be before 1970-01-01T00:00:00Z (got 1969-12-31T23:59:59Z)")
    # 1970-01-01T00:00:00Z itself is the first time allowed
    first = {k: v for k, v in data.items() if k != "last_played_at"}  # (not after the import: see below)
    m = decode(ce(type_, {**first, field: "1970-01-01T00:00:00Z"}, time="1970-01-01T00:00:00Z"))
    assert m.time == "1970-01-01T00:00:00Z"


def test_the_lower_bound_is_in_utc():
    exc = rejected(ce("game.finished", {**GAME, "finished_at": "1970-01-01T00:30:00+01:00"}))
    assert exc.reason == "data.finished_at: must not be before 1970-01-01T00:00:00Z (got 1969-12-31T23:30:00Z)"
    assert decode(ce("game.finished", {**GAME, "finished_at": "1969-12-31T23:30:00-01:00"})).time == (
        "1970-01-01T00:30:00Z")


@pytest.mark.parametrize("time_", ["1969-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "1970-01-01T00:59:59+01:00"])
def test_an_envelope_time_before_1970_is_refused(time_):
    exc = rejected(ce("game.finished", GAME, time=time_))
    assert exc.error_class == "invalid_envelope"
    assert exc.reason.startswith("time: must not be before 1970-01-01T00:00:00Z (got ")


@pytest.mark.parametrize("type_", list(CAUSE))
def test_a_cause_more_than_a_day_after_its_envelope_is_refused(type_):
    data, field = CAUSE[type_]
    sent = "2026-11-30T12:00:00Z"
    assert decode(ce(type_, {**data, field: "2026-12-01T12:00:00Z"}, time=sent)).time == "2026-12-01T12:00:00Z"
    for late in ("2026-12-01T12:00:00.000001Z", "2026-12-01T13:00:00.5+01:00", "2027-01-01T00:00:00Z",
                 "9999-12-31T23:59:59Z"):
        exc = rejected(ce(type_, {**data, field: late}, time=sent))
        assert exc.error_class == "invalid_rule", exc.reason
        assert exc.reason.startswith(f"data.{field}: ") and exc.reason.endswith(
            f"is more than a day after the envelope's time ({sent})")


def test_the_day_ahead_is_measured_from_the_envelope_time_in_utc():
    # 2026-11-30T23:00:00-05:00 is 2026-12-01T04:00:00Z: a cause up to 2026-12-02T04:00:00Z is fine.
    sent = "2026-11-30T23:00:00-05:00"
    assert decode(ce("game.finished", {**GAME, "finished_at": "2026-12-02T04:00:00Z"}, time=sent)).time == (
        "2026-12-02T04:00:00Z")
    exc = rejected(ce("game.finished", {**GAME, "finished_at": "2026-12-02T04:00:01Z"}, time=sent))
    assert exc.reason == ("data.finished_at: 2026-12-02T04:00:01Z is more than a day after the envelope's time "
                          "(2026-12-01T04:00:00Z)")


def test_a_cause_long_before_its_envelope_is_fine():
    """Late deliveries and backfills: the envelope may be sent years after the game."""
    assert decode(ce("game.finished", {**GAME, "finished_at": "1999-01-01T00:00:00Z"},
                     time="2026-11-30T12:00:00Z")).time == "1999-01-01T00:00:00Z"


def test_last_played_at_obeys_the_same_bounds():
    exc = rejected(ce("rating.imported", {**IMPORTED, "last_played_at": "1960-01-01T00:00:00Z"}))
    assert exc.reason == "data.last_played_at: must not be before 1970-01-01T00:00:00Z (got 1960-01-01T00:00:00Z)"
    exc = rejected(ce("rating.imported", {**IMPORTED, "last_played_at": "2030-01-01T00:00:00Z"}))
    assert (exc.error_class, exc.reason) == (
        "invalid_rule",
        "data.last_played_at: 2030-01-01T00:00:00Z is more than a day after the envelope's time (2026-11-30T12:00:00Z)")


def test_the_latest_time_a_date_can_hold_is_the_upper_bound():
    last = "9999-12-31T23:59:59.999999Z"
    assert decode(ce("account.closed", {**CLOSED, "closed_at": last}, time=last)).time == last
    exc = rejected(ce("account.closed", {**CLOSED, "closed_at": "9999-12-31T23:59:59-00:01"},
                      time="9999-12-31T23:59:59Z"))
    assert exc.reason == "data.closed_at: outside the years 0001..9999 once converted to UTC"


# --- Player ids of extreme length ---------------------------------------------------------------------------

ID_FIELDS = [
    ("game.finished", GAME, lambda d, pid: d["white"].update(player_id=pid), "data.white.player_id"),
    ("game.finished", GAME, lambda d, pid: d["black"].update(player_id=pid), "data.black.player_id"),
    ("event.finished", TURBO, lambda d, pid: d["players"][0].update(player_id=pid), "data.players[0].player_id"),
    ("event.finished", USCF, lambda d, pid: d["players"][1].update(player_id=pid), "data.players[1].player_id"),
    ("event.finished", FIDE, lambda d, pid: d["games"][0].update(black=pid), "data.games[0].black"),
    ("puzzle.attempted", KITE, lambda d, pid: d.update(player_id=pid), "data.player_id"),
    ("puzzle.attempted", TEMPO, lambda d, pid: d.update(player_id=pid), "data.player_id"),
    ("account.closed", CLOSED, lambda d, pid: d.update(player_id=pid), "data.player_id"),
    ("rating.imported", IMPORTED, lambda d, pid: d.update(player_id=pid), "data.player_id"),
]


@pytest.mark.parametrize("type_,data,put,field", ID_FIELDS)
def test_player_ids_are_at_most_128_characters(type_, data, put, field):
    for length, char in ((129, "x"), (129, "é"), (129, "\U0001f600"), (100_000, "x")):
        d = orjson.loads(orjson.dumps(data))
        put(d, char * length)
        exc = rejected(ce(type_, d))
        assert (exc.error_class, exc.reason) == (
            "invalid_data", f"{field}: must be at most 128 characters long (got {length})")
    d = orjson.loads(orjson.dumps(data))
    longest = "\U0001f600" * 128  # characters, not bytes: 512 bytes of UTF-8
    put(d, longest)
    if field == "data.games[0].black":  # a game's player must be listed too
        d["players"][1]["player_id"] = longest
    if field == "data.players[1].player_id":  # and a listed player's game follows him
        d["games"][0]["black"] = longest
    assert longest in repr(decode(ce(type_, d)).payload)


def test_other_ids_and_the_variant_are_bounded_too():
    for data, name, limit in ((GAME, "game_id", 128), (TURBO, "competition_id", 128), (KITE, "puzzle_id", 128),
                              (GAME, "variant", 64)):
        type_ = "game.finished" if data is GAME else "event.finished" if data is TURBO else "puzzle.attempted"
        assert decode(ce(type_, {**data, name: "v" * limit})).type == type_
        exc = rejected(ce(type_, {**data, name: "v" * (limit + 1)}))
        assert exc.reason == f"data.{name}: must be at most {limit} characters long (got {limit + 1})"


# --- A player against himself, a player listed twice ----------------------------------------------------------


def test_a_game_against_himself_is_refused():
    exc = rejected(ce("game.finished", {**GAME, "black": {"player_id": "anna", "guest": True}}))
    assert (exc.error_class, exc.reason) == (
        "invalid_rule", "data.black.player_id: a player may not meet himself ('anna' is also white)")


@pytest.mark.parametrize("event", [USCF, FIDE])
def test_an_event_game_against_himself_is_refused(event):
    exc = rejected(ce("event.finished", {**event, "games": [{"round": 1, "white": "p2", "black": "p2", "result": "1-0"}]}))
    assert (exc.error_class, exc.reason) == (
        "invalid_rule", "data.games[0].black: a player may not meet himself ('p2' is also white)")


@pytest.mark.parametrize("event,twice", [
    (TURBO, {**TURBO["players"][0], "votes": 1}), (USCF, {"player_id": "p1", "age": 30}), (FIDE, {"player_id": "p1"})])
def test_an_event_listing_a_player_twice_is_refused(event, twice):
    exc = rejected(ce("event.finished", {**event, "players": [*event["players"], twice]}))
    pid = twice["player_id"]
    assert (exc.error_class, exc.reason) == (
        "invalid_rule", f"data.players[2].player_id: '{pid}' is listed more than once")


def test_ids_are_compared_exactly():
    """Ids are opaque: case, spaces and Unicode forms make different players (nothing is normalized)."""
    for other in ("Anna", "anna ", "a\u0301nna", "\u00e1nna"):
        g = decode(ce("game.finished", {**GAME, "black": {"player_id": other}})).payload
        assert (g.white_id, g.black_id) == ("anna", other)


# --- SQL: message values only ever as bound parameters ----------------------------------------------------------

_DRIVER_CALLS = {"execute", "executemany", "fetch", "fetchrow", "fetchval", "copy_records_to_table",
                 "copy_to_table", "copy_from_query", "copy_from_table", "cursor", "prepare"}
# Development tooling that never sees a message (its SQL names databases it creates itself).
_DEV_TOOLS = {"worker/dev/postgres.py", "worker/dev/databases.py", "worker/dev/broker.py", "worker/commands/demo.py"}
_SQL_WORDS = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|DROP|CREATE|ALTER|TRUNCATE)\b.*\b(FROM|INTO|SET|TABLE|DATABASE|WHERE)\b",
                        re.IGNORECASE | re.DOTALL)


def _modules():
    for path in sorted((ROOT / "worker").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        yield rel, ast.parse(path.read_text(encoding="utf-8"), rel)


# The statements the server builds for the client to run, each a named query that quotes a name given as $1
# (format's %I) after rating_changes_month_table (migration 0012) checked it is a month of the history:
# DETACH ... CONCURRENTLY runs neither in a function nor in a transaction block, and DDL takes no parameters.
# Nothing else may run a statement it did not take from QUERIES.
_SERVER_BUILT = {"months_detach", "months_detach_finalize"}
# The migrations that run dynamic SQL, and why: DDL on the history's months, whose names are values.
_DYNAMIC_MIGRATIONS = {"0012_history_partitions.sql": "a month's table, indexes, ATTACH, and `history`'s statements",
                       "0014_cause_day.sql": "a month's indexes, and the existing months' index of causes",
                       "0015_unreferenced_causes.sql": "a month's index of causes without a ref, new and existing"}
_FORMAT_SPEC = re.compile(r"%(?:[0-9]+\$)?-?[0-9*]*(.)")


def _server_built(node: ast.expr) -> str | None:
    """`await conn.fetchval(QUERIES["name"], ...)` as the statement of a driver call -> "name"."""
    if (isinstance(node, ast.Await) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr == "fetchval" and node.value.args):
        return _query_name(node.value.args[0])
    return None


def _format_strings(sql: str) -> list[str]:
    """The literal first arguments of format(...) in a SQL text."""
    return re.findall(r"\bformat\s*\(\s*'((?:[^']|'')*)'", sql, re.IGNORECASE)


def _query_name(node: ast.expr) -> str | None:
    """QUERIES["name"] -> "name"."""
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "QUERIES"
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
        return node.slice.value
    return None


def test_every_statement_outside_the_dev_tools_is_a_named_query():
    """Every driver call's SQL is QUERIES["name"] from sql/queries.sql (or, when migrating, a shipped
    migration file's text): values can then only travel as $n parameters."""
    checked, problems = 0, []
    for rel, tree in _modules():
        if rel in _DEV_TOOLS:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _DRIVER_CALLS and node.args):
                continue
            sql = node.args[0]
            name = _query_name(sql)
            if name is not None:
                checked += 1
                if name not in QUERIES:
                    problems.append(f"{rel}:{node.lineno}: QUERIES[{name!r}] is not in queries.sql")
            elif rel == "worker/store/migrate.py" and isinstance(sql, ast.Attribute) and sql.attr == "sql":
                checked += 1  # a migration file shipped with the worker, checksummed
            elif _server_built(sql) in _SERVER_BUILT:
                checked += 1  # see _SERVER_BUILT
            elif node.func.attr in ("execute", "fetch", "fetchrow", "fetchval", "executemany"):
                problems.append(f"{rel}:{node.lineno}: {ast.unparse(sql)} is not a QUERIES[...] statement")
    assert not problems, "\n".join(problems)
    assert checked >= 10  # the store's statements were found


def test_no_sql_is_built_from_strings_anywhere_but_the_dev_tools():
    problems = []
    for rel, tree in _modules():
        if rel in _DEV_TOOLS:
            continue
        for node in ast.walk(tree):
            parts = None
            if isinstance(node, ast.JoinedStr):  # f"..."
                parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):  # "..." % x, "..." + x
                parts = [n.value for n in (node.left, node.right) if isinstance(n, ast.Constant)]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
                  and isinstance(node.func.value, ast.Constant)):
                parts = [node.func.value.value]
            if parts and _SQL_WORDS.search(" ".join(p for p in parts if isinstance(p, str))):
                problems.append(f"{rel}:{node.lineno}: SQL built from strings: {ast.unparse(node)[:80]}")
    assert not problems, "\n".join(problems)


def test_the_sql_files_have_no_dynamic_sql_and_use_parameters():
    dynamic = (r"\bEXECUTE\b", r"\bformat\s*\(", r"\bquote_(ident|literal|nullable)\b")
    queries = {name: re.sub(r"--[^\n]*", "", sql) for name, sql in QUERIES.items()}
    for name, sql in queries.items():
        if name not in _SERVER_BUILT:
            for pattern in dynamic:
                assert not re.search(pattern, sql, re.IGNORECASE), f"queries.sql {name}: dynamic SQL ({pattern})"
    for name in _SERVER_BUILT:  # a name only, quoted, and checked to be a month first
        assert [set(_FORMAT_SPEC.findall(f)) for f in _format_strings(queries[name])] == [{"I"}], name
        assert "rating_changes_month_table($1::text)" in queries[name], name
    for path in sorted((ROOT / "worker/store/migrations").glob("*.sql")):
        text = re.sub(r"--[^\n]*", "", path.read_text(encoding="utf-8"))
        if path.name not in _DYNAMIC_MIGRATIONS:
            for pattern in dynamic:
                assert not re.search(pattern, text, re.IGNORECASE), f"{path.name}: dynamic SQL ({pattern})"
            continue
        # Names and values go in quoted (%I, %L); the one %s is a privilege keyword the migration checks
        # against PostgreSQL's own list first.
        assert not re.search(r"\bquote_(ident|literal|nullable)\b", text, re.IGNORECASE), path.name
        executes = re.findall(r"\bEXECUTE\b", text, re.IGNORECASE)
        assert len(executes) == len(re.findall(r"\bEXECUTE\s+format\s*\(", text, re.IGNORECASE)), path.name
        formats = _format_strings(text)
        assert len(formats) == len(re.findall(r"\bformat\s*\(", text, re.IGNORECASE)), path.name  # all literal
        for f in formats:
            specs = set(_FORMAT_SPEC.findall(f))
            assert specs <= {"I", "L"} or (f.startswith("GRANT %s ON") and specs <= {"s", "I"}), f"{path.name}: {f}"
        if any(f.startswith("GRANT %s ON") for f in formats):
            assert "NOT IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE'" in text, path.name
    # The statements that take message values take them as $n parameters.
    for name in ("lock_players_insert", "lock_players_select", "processed", "closed_accounts", "load_states", "save"):
        assert re.search(r"\$1\b", QUERIES[name]), name


HOSTILE_IDS = [
    "'; DROP TABLE ratings; --",
    "Robert'); DROP TABLE students;--",
    '" OR ""="',
    "' OR '1'='1",
    "$1",
    "%s%s%s",
    "{0}{player_id}",
    "\\",
    "\\x00",
    "/* */",
    "a\u202eb",  # right-to-left override
    "\U0001f600" * 10,
    "x" * 128,
    " ",
]


def _messages_with(ids: list[str]) -> list[bytes]:
    out = []
    for i, (white, black) in enumerate(zip(ids, ids[1:] + ids[:1], strict=True)):
        out.append(ce("game.finished", {**GAME, "game_id": f"g-{i}", "white": {"player_id": white},
                                        "black": {"player_id": black}}, id=f"g-{i}"))
    out.append(ce("event.finished", {**TURBO, "players": [
        {**TURBO["players"][i % 2], "player_id": pid} for i, pid in enumerate(ids)]}, id="tl"))
    out.append(ce("event.finished", {**USCF, "players": [{"player_id": p} for p in ids[:4]], "games": [
        {"round": 1, "white": ids[0], "black": ids[1], "result": "1-0"},
        {"round": 1, "white": ids[2], "black": ids[3], "result": "1/2-1/2"}]}, id="uscf"))
    out.append(ce("puzzle.attempted", {**KITE, "player_id": ids[4]}, id="kite"))
    out.append(ce("rating.imported", {**IMPORTED, "player_id": ids[5]}, id="imp"))
    out.append(ce("account.closed", {**CLOSED, "player_id": ids[6], "reason": "abuse"}, id="closed"))
    return out


async def test_hostile_player_ids_round_trip_through_the_engine_unchanged():
    store = MemoryStore()
    batch = [decode(raw) for raw in _messages_with(HOSTILE_IDS)]
    result = await apply_batch(store, batch)
    assert not result.failed and "unrated" not in result.outcomes[:len(HOSTILE_IDS)]
    rated = {key.player_id for key in store.states}
    assert rated == set(HOSTILE_IDS)  # every one of them, byte for byte
    published = set()
    for record in result.records:
        event = orjson.loads(record.payload)
        validate_output(event)
        assert event["subject"] == event["data"]["player_id"] == record.key.player_id
        published.add(record.key.player_id)
    assert published == rated
    # and again: the dedupe keys (source, id) hold too, nothing is applied twice
    again = await apply_batch(store, batch)
    assert set(again.outcomes) == {"duplicate"} and not again.records


# --- Secrets stay out of what the worker prints ----------------------------------------------------------------

DB_PASSWORD = "Db-S3cr3t-pw"
SASL_PASSWORD = "Sasl-S3cr3t-pw"
SECRETS = (DB_PASSWORD, SASL_PASSWORD)


def secret_env(**changes) -> dict[str, str]:
    env = {
        "DATABASE_URL": f"postgresql://rating:{DB_PASSWORD}@127.0.0.1:1/ratings?sslmode=disable",
        "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",
        "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KAFKA_SASL_USERNAME": "rating-worker",
        "KAFKA_SASL_PASSWORD": SASL_PASSWORD,
        "METRICS_PORT": "0",
    }
    env.update(changes)
    return env


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"a password shows: {text[:300]}"


def test_the_configuration_does_not_show_its_passwords():
    cfg = config_mod.load(env=secret_env())
    assert cfg.kafka_sasl_password == SASL_PASSWORD and DB_PASSWORD in cfg.database_url
    assert_no_secret(repr(cfg))
    assert_no_secret(str(cfg))
    assert_no_secret(f"{cfg}")


@pytest.mark.parametrize("url", [
    f"mysql://rating:{DB_PASSWORD}@db/ratings",
    f"rating:{DB_PASSWORD}@db/ratings",
    f"postgresql//rating:{DB_PASSWORD}@db/ratings",
    f"http://rating:{DB_PASSWORD}@db/ratings",
])
def test_a_bad_database_url_is_reported_without_its_password(url):
    with pytest.raises(config_mod.ConfigError) as info:
        config_mod.load(env=secret_env(DATABASE_URL=url))
    assert "DATABASE_URL" in str(info.value)
    assert_no_secret(str(info.value))


def test_other_configuration_errors_do_not_show_the_passwords():
    for change in ({"KAFKA_SASL_MECHANISM": ""}, {"KAFKA_SECURITY_PROTOCOL": "SASL_BOGUS"}, {"BATCH_SIZE": "x"},
                   {"KAFKA_BOOTSTRAP_SERVERS": "broker"}, {"DB_POOL_SIZE": "1"}):
        with pytest.raises(config_mod.ConfigError) as info:
            config_mod.load(env=secret_env(**change))
        assert_no_secret(str(info.value))


def _run_cli(env: dict[str, str]) -> subprocess.CompletedProcess:
    import os

    full = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "KAFKA_"))}
    return subprocess.run([sys.executable, "-m", "worker", "run"], env={**full, **env}, capture_output=True,
                          text=True, timeout=60, cwd=ROOT)


def test_the_cli_reports_a_bad_setting_without_the_passwords():
    done = _run_cli(secret_env(DATABASE_URL=f"mysql://rating:{DB_PASSWORD}@db/ratings"))
    assert done.returncode == 2 and "configuration error" in done.stderr
    assert_no_secret(done.stdout + done.stderr)


def test_a_password_that_breaks_the_url_is_not_printed():
    done = _run_cli(secret_env(DATABASE_URL=f"postgresql://rating:{DB_PASSWORD}#x@127.0.0.1:1/ratings"))
    assert done.returncode != 0
    assert_no_secret(done.stdout + done.stderr)


async def test_start_up_and_retry_log_lines_do_not_show_the_passwords():
    """The worker's own lines while it waits for an unreachable database (JSON, as in production)."""
    from worker.commands.run import run_service

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = config_mod.load(env=secret_env(METRICS_PORT=str(port), METRICS_HOST="127.0.0.1"))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    stop = asyncio.Event()
    task = asyncio.create_task(run_service(cfg, stop_event=stop, install_signals=False))
    try:
        for _ in range(200):
            if "cannot connect to PostgreSQL" in stream.getvalue():
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        # A stop while the database is unreachable ends cleanly (issue 18): exit 0, no traceback.
        assert await asyncio.wait_for(task, 30) == 0
        root.removeHandler(handler)
        root.setLevel(old_level)
    lines = [orjson.loads(line) for line in stream.getvalue().splitlines()]
    said = {line["msg"] for line in lines}
    assert {"metrics listening", "cannot connect to PostgreSQL: the server is unreachable, retrying"} <= said, said
    assert any(m.startswith("worker stopped before it started") for m in said), said
    assert_no_secret(stream.getvalue())


# --- Metrics: label values of bounded cardinality ------------------------------------------------------------------

# Every label the worker's metrics may have, and where its values come from (each a small, fixed set).
BOUNDED_LABELS = {
    "type": "the five input types, or 'unknown' for a dead letter",
    "outcome": "applied, unrated, duplicate, dead_lettered",
    "reason": "a rating system's unrated reason (a fixed word) or an error class",
    "error_class": "ERROR_CLASSES and the pipeline's rating_error / unsupported",
    "topic": "the configured input topics",
    "partition": "the partitions of those topics",
    "result": "held or recomputed",
    "system": "the rating systems",
    "category": "their categories",
    "task": "the pipeline's side tasks: relay, lag, broker probe, retention",
    "table": "the big tables an operator watches (worker.store.retention.BIG_TABLES)",
    "part": "rows or indexes, of those tables",
}


def test_no_metric_has_a_per_player_or_per_message_label():
    metrics = Metrics()
    seen = set()
    for collector in metrics.registry._collector_to_names:  # noqa: SLF001 - the registry's own collectors
        names = set(getattr(collector, "_labelnames", ()))
        seen |= names
        assert names <= set(BOUNDED_LABELS), f"{collector._name}: unexpected labels {names - set(BOUNDED_LABELS)}"
    assert {"type", "outcome", "reason", "error_class"} <= seen


async def test_the_unrated_reason_label_is_a_fixed_word_whatever_the_message():
    """The `reason` label of rating_worker_messages takes the engine's unrated reasons: they must not
    carry the message's own values (a variant, a player id), or every hostile message makes a series."""
    store = MemoryStore()
    odd = ["'; DROP TABLE x; --", "p" * 128, "\U0001f600"]
    batch = [
        ce("game.finished", {**GAME, "variant": "crazy'house" + "!" * 40}, id="v"),
        ce("game.finished", {**GAME, "rated": False, "white": {"player_id": odd[0]}}, id="c"),
        ce("game.finished", {**GAME, "white": {"player_id": odd[1], "guest": True}}, id="g"),
        ce("event.finished", {**TURBO, "format": "free"}, id="free"),
        ce("event.finished", {**USCF, "rated": False}, id="casual-uscf"),
        ce("event.finished", {**FIDE, "games": []}, id="fide-empty"),
        ce("puzzle.attempted", {**KITE, "challenge": False, "player_id": odd[2]}, id="kite"),
        ce("account.closed", {**CLOSED, "reason": "other"}, id="other"),
    ]
    result = await apply_batch(store, [decode(raw) for raw in batch])
    reasons = [m.reason for m in result.messages if m.reason is not None]
    assert len(reasons) >= 6, result.messages
    for reason in reasons:
        assert re.fullmatch(r"[a-z_]{1,32}", reason), reason
    # and a dead letter is counted by its class only
    for raw in (b"{", ce("game.finished", {**GAME, "black": {"player_id": "anna"}})):
        assert rejected(raw).error_class in ERROR_CLASSES
