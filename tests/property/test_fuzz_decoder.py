"""Fuzzing worker.contract.decode with random and mutated bytes and JSON (issue 9).

Whatever comes in, `decode` either returns a valid Message or raises BadMessage with a known error class
and a clear, short, one-line reason; nothing else escapes, no input takes long (CPU time, so that a
loaded machine does not make the test flaky), and a decoded message carries no NaN, infinity, negative
zero or out-of-range value into its payload.

Two fuzzers: Hypothesis (always), mutating valid messages of every type at the JSON and at the byte
level; and atheris (coverage-guided libFuzzer, when installed), from the same valid messages as its seed
corpus, run in a child process (libFuzzer ends its process). `FUZZ_EXAMPLES` / `FUZZ_RUNS` make longer
runs locally, e.g. `FUZZ_EXAMPLES=20000 FUZZ_RUNS=1000000 pytest tests/property/test_fuzz_decoder.py`;
the file also runs as an atheris fuzzer itself: `python tests/property/test_fuzz_decoder.py CORPUS_DIR`.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worker.contract.decode import INPUT_TYPES, MAX_AHEAD, decode
from worker.contract.reasons import ERROR_CLASSES, BadMessage
from worker.contract.times import MIN_TIME, format_time, parse_time
from worker.ratings.inputs import (
    AccountClosed,
    EventFinished,
    EventPlayer,
    GameFinished,
    Message,
    PuzzleAttempted,
    RatingImported,
    TurboPlayer,
)

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "200"))
CPU_SECONDS_PER_INPUT = 1.0
MAX_EPOCH = 253402300800.0  # 10000-01-01T00:00:00Z

T = "2026-11-30T12:00:00Z"
VALID: list[tuple[str, dict]] = [
    ("game.finished", {"game_id": "g-81723", "rated": True, "variant": "standard",
                       "time_control": {"base_seconds": 300, "increment_seconds": 0},
                       "white": {"player_id": "anna", "guest": False}, "black": {"player_id": "ben"},
                       "result": "1-0", "finished_at": T}),
    ("game.finished", {"game_id": "g-2", "rated": True, "variant": "standard", "time_control": {"days_per_move": 3},
                       "white": {"player_id": "anna"}, "black": {"player_id": "ben", "guest": True},
                       "result": "1/2-1/2", "finished_at": "2026-11-30T13:00:00.5+01:00"}),
    ("event.finished", {"competition_id": "tl-991", "kind": "turbo_live", "rated": True, "finished_at": T,
                        "format": "10min",
                        "players": [{"player_id": "anna", "agreement": 0.72, "votes": 31,
                                     "team_games": {"won": 2, "drawn": 0, "lost": 1}, "top_ups": 0},
                                    {"player_id": "ben", "agreement": 0.5, "votes": 3,
                                     "team_games": {"won": 0, "drawn": 1, "lost": 2}}]}),
    ("event.finished", {"competition_id": "open-2026", "kind": "uscf", "rated": True, "finished_at": T,
                        "time_control": {"base_minutes": 90, "increment_seconds": 30},
                        "players": [{"player_id": "p1", "age": 15}, {"player_id": "p2", "birth_year": 1990}],
                        "games": [{"round": 1, "white": "p1", "black": "p2", "result": "1-0"},
                                  {"round": 2, "white": "p2", "black": "p1", "result": "1/2-1/2"}]}),
    ("event.finished", {"competition_id": "fide-open", "kind": "fide", "rated": True, "finished_at": T,
                        "rating_type": "standard", "time_control": {"base_minutes": 90, "increment_seconds": 30},
                        "players": [{"player_id": "p1", "birth_year": 2009}, {"player_id": "p2"}],
                        "games": [{"round": 1, "white": "p1", "black": "p2", "result": "0-1"}]}),
    ("puzzle.attempted", {"system": "chesskite", "player_id": "anna", "puzzle_id": "k-12", "correct": False,
                          "challenge": True, "puzzle_rating": 1240, "attempted_at": T}),
    ("puzzle.attempted", {"system": "chesstempo", "mode": "blitz", "player_id": "anna", "puzzle_id": "p-7731",
                          "correct": True, "seconds": 12.5, "seconds_after_first_move": 4.0, "challenge": False,
                          "attempted_at": T}),
    ("puzzle.attempted", {"system": "chesstempo", "mode": "standard", "player_id": "ben", "puzzle_id": "p-1",
                          "correct": False, "attempted_at": T}),
    ("account.closed", {"player_id": "cheat99", "reason": "fair_play", "closed_at": T}),
    ("rating.imported", {"player_id": "p1", "system": "fide", "category": "standard", "rating": 2012, "games": 57,
                         "peak": 2080, "birth_year": 2009, "imported_at": T}),
    ("rating.imported", {"player_id": "a", "system": "csr", "category": "blitz", "rating": 1712.4, "rd": 85.0,
                         "volatility": 0.059, "games": 140, "peak": 1750.0,
                         "last_played_at": "2026-10-28T18:30:00+02:00", "imported_at": T}),
    ("rating.imported", {"player_id": "a", "system": "tsr", "category": "turbo", "rating": 1400, "rd": 300,
                         "volatility": 0.06, "imported_at": T}),
    ("rating.imported", {"player_id": "a", "system": "uscf", "category": "quick", "rating": 1234.5, "games": 30,
                         "wins": 10, "draws": 5, "losses": 15, "events": 4, "peak": 1300, "birth_year": 2010,
                         "imported_at": T}),
    ("rating.imported", {"player_id": "a", "system": "chesstempo", "category": "blitz", "rating": 1800, "rd": 50,
                         "games": 3, "imported_at": T}),
    ("rating.imported", {"player_id": "a", "system": "chesskite", "category": "puzzle", "rating": 0, "games": 0,
                         "imported_at": T}),
]


def envelope(type_: str, data: dict, **attributes) -> dict:
    return {"specversion": "1.0", "id": "m-1", "source": "/game-server/eu-1", "type": type_, "time": T,
            "datacontenttype": "application/json", "data": data, **attributes}


SEEDS = [orjson.dumps(envelope(t, d)) for t, d in VALID]

NESTED: list = []
for _ in range(40):
    NESTED = [NESTED]
# Values that break things: limits of the number types and the schemas, NUL, surrogates' neighbours,
# long and odd text, edge times, the ids of the examples (self-play, duplicates), odd shapes.
HOSTILE = [
    None, True, False, 0, -0.0, -1, 1, 3.0, 0.5, 1.0000000000000002, 2**31, 2**53 + 1, 2**63 - 1, 2**64 - 1,
    -(2**63), 1e9, 1e9 + 1, 1e308, -1e308, 5e-324, 1.7976931348623157e308, "", " ", "\x00", "a\x00b",
    "\u202e", "\ufeff", "\U0001f600" * 129, "x" * 128, "x" * 129, "é" * 129, "x" * 5000, "1-0", "0-1", "1/2-1/2",
    "standard", "blitz", "turbo_live", "uscf", "fide", "csr", "tsr", "chesskite", "chesstempo", "fair_play",
    "anna", "ben", "p1", "p2", "game.finished", "rating.changed", "1.0",
    "1970-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "1970-01-01T00:30:00+01:00", "0001-01-01T00:00:00Z",
    "0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "9999-12-31T23:59:60Z", "9999-12-31T23:59:59-00:01",
    "2016-12-31T23:59:60Z", "2026-02-29T00:00:00Z", "2028-02-29T00:00:00Z", "2026-11-30T12:00:00.999999999Z",
    "2026-12-01T12:00:00Z", "2026-12-01T12:00:00.000001Z", "2026-11-30t12:00:00z", "2026-11-30T12:00:00+23:59",
    "2026-11-30T12:00:00-23:59", "2026-11-30T12:00:00Z\n", "٢٠٢٦-11-30T12:00:00Z", [], {}, [{}], [None],
    {"player_id": "anna"}, {"player_id": "p1"}, {"days_per_move": 1}, {"base_seconds": 0, "increment_seconds": 0},
    {"won": 0, "drawn": 0, "lost": 0}, NESTED, list(range(300)),
]
# Raw JSON text that orjson.dumps cannot write but a producer can: spliced in at the byte level.
LITERALS = [
    b"1e400", b"-1e400", b"1" + b"0" * 40, b"18446744073709551616", b"-9223372036854775809", b"NaN",
    b"Infinity", b"-0", b"1E-400", b"0.1e1", b"01", b'"\\u0000"', b'"\\ud800"', b'"\\udc80x"', b'"\x00"',
    b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xef\xbb\xbf", b'"\\', b"[" * 1100,
    b"{" * 1100, b'{"a":' * 1025 + b"1" + b"}" * 1025, b'"' + b"\\u0000" * 50 + b'"', b"null", b"true", b"{}",
    b"[]", b'""', b",", b":", b'"time":"1969-12-31T23:59:59Z"', b'"time":"9999-12-31T23:59:59Z"',
]

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=24) | st.sampled_from(HOSTILE),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=24,
)


# --- The invariants ------------------------------------------------------------------------------------------

# (class, field) -> (lowest, highest) allowed in a payload; every other number is a time or a count.
RANGES = {
    (TurboPlayer, "agreement"): (0.0, 1.0), (TurboPlayer, "top_ups"): (0, 3), (EventPlayer, "age"): (0, 150),
    (EventPlayer, "birth_year"): (1900, 2100), (RatingImported, "birth_year"): (1900, 2100),
    (EventFinished, "time_control_minutes"): (0.0, 1e6), (PuzzleAttempted, "puzzle_rating"): (0.0, 1e4),
    (RatingImported, "rating"): (0.0, 1e4), (RatingImported, "peak"): (0.0, 1e4),
    (RatingImported, "rd"): (1e-300, 500.0), (RatingImported, "volatility"): (1e-300, 1.0),
}
TIMES = {"finished_at", "attempted_at", "closed_at", "imported_at", "last_played_at"}


def _walk(obj, where: str):
    """Every (where, class, field, value) of a payload, through nested dataclasses and tuples."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        at = f"{where}.{f.name}"
        if dataclasses.is_dataclass(value):
            yield from _walk(value, at)
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                if dataclasses.is_dataclass(item):
                    yield from _walk(item, f"{at}[{i}]")
                else:
                    yield f"{at}[{i}]", type(obj), f.name, item
        else:
            yield at, type(obj), f.name, value


def check_message(m: Message, value) -> None:
    assert isinstance(m, Message) and m.type in INPUT_TYPES
    assert format_time(parse_time(m.time)) == m.time
    for text in (m.source, m.id):
        assert 1 <= len(text) <= 256 and "\x00" not in text
    sent = parse_time(orjson.loads(value)["time"])
    assert sent >= MIN_TIME
    cause = parse_time(m.time)
    assert MIN_TIME <= cause <= sent + MAX_AHEAD
    payload = m.payload
    assert type(payload) in (GameFinished, EventFinished, PuzzleAttempted, AccountClosed, RatingImported)
    for at, cls, name, v in _walk(payload, "payload"):
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, str):
            assert "\x00" not in v and len(v) <= 128, at
            continue
        assert type(v) in (int, float), f"{at}: {type(v).__name__}"
        if type(v) is float:
            assert math.isfinite(v) and math.copysign(1.0, v) > 0, f"{at} = {v!r}"
        if name in TIMES:
            assert type(v) is float and MIN_TIME <= v <= sent + MAX_AHEAD and v < MAX_EPOCH, f"{at} = {v!r}"
            continue
        low, high = RANGES.get((cls, name), (0, 1_000_000_000))
        assert low <= v <= high, f"{at} = {v!r} not in [{low}, {high}]"
    if isinstance(payload, GameFinished):
        assert payload.white_id != payload.black_id
        tc = payload.time_control
        clock = tc.base_seconds is not None and tc.increment_seconds is not None
        assert clock != (tc.days_per_move is not None)
    elif isinstance(payload, EventFinished):
        ids = [p.player_id for p in payload.players]
        assert len(ids) == len(set(ids))
        for g in payload.games:
            assert g.white != g.black and {g.white, g.black} <= set(ids) and g.round >= 1


PREFIXES = {
    "too_large": ("record value: ",), "invalid_utf8": ("record value: ",), "invalid_json": ("record value: ",),
    "invalid_envelope": ("envelope: ", "specversion", "id", "source", "type", "time", "datacontenttype", "data"),
    "unknown_type": ("type: ",), "invalid_data": ("data",), "invalid_rule": ("data.",),
}


def check(value) -> Message | None:
    """decode(value) under the invariants; returns the message, or None for a bad message."""
    start = time.process_time()
    try:
        m = decode(value)
    except BadMessage as exc:
        spent = time.process_time() - start
        assert spent < CPU_SECONDS_PER_INPUT, f"{spent:.2f} s of CPU for a {len(value)}-byte input"
        assert exc.error_class in ERROR_CLASSES, exc.error_class
        reason = exc.reason
        assert isinstance(reason, str) and 0 < len(reason) < 400 and "\n" not in reason and "\r" not in reason
        reason.encode("utf-8")  # a Kafka header: no lone surrogates
        assert reason.startswith(PREFIXES[exc.error_class]), (exc.error_class, reason)
        assert ": " in reason
        return None
    spent = time.process_time() - start
    assert spent < CPU_SECONDS_PER_INPUT, f"{spent:.2f} s of CPU for a {len(value)}-byte input"
    check_message(m, value)
    return m


def test_every_seed_is_valid():
    for seed in SEEDS:
        assert check(seed) is not None


# --- Hypothesis ------------------------------------------------------------------------------------------------

FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*prefix, i))


@st.composite
def mutated_events(draw) -> dict:
    """A valid message of any type with 1..4 mutations of its JSON: replace, delete, add, duplicate.

    Everything drawn is deep-copied before it goes in: a later mutation edits the event in place, and
    must never edit the strategies' own values (HOSTILE holds lists and dicts), or generation drifts
    from one run to the next (hypothesis reports FlakyStrategyDefinition)."""
    type_, data = draw(st.sampled_from(VALID))
    event = envelope(type_, copy.deepcopy(data))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(list(_paths(event))))
        if not path:
            event[draw(st.text(max_size=8))] = copy.deepcopy(draw(JSON))
            continue
        parent = event
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "hostile", "hostile", "delete", "add", "duplicate"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=8) | st.sampled_from(sorted(parent)))] = copy.deepcopy(draw(JSON))
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
        else:
            parent[path[-1]] = copy.deepcopy(draw(JSON if action == "replace" else st.sampled_from(HOSTILE)))
        if not isinstance(event, dict) or "data" not in event:
            break
    return event


def _mutate_bytes(draw, raw: bytes) -> bytes:
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(raw)))
        op = draw(st.sampled_from(["literal", "literal", "flip", "delete", "truncate", "repeat"]))
        if op == "literal":
            # Over a value where there is one: a number, a string or a keyword after a colon.
            if draw(st.booleans()) and b":" in raw[i:]:
                start = raw.index(b":", i) + 1
                end = start
                while end < len(raw) and raw[end:end + 1] not in b",}]":
                    end += 1
                raw = raw[:start] + draw(st.sampled_from(LITERALS)) + raw[end:]
            else:
                raw = raw[:i] + draw(st.sampled_from(LITERALS)) + raw[i:]
        elif op == "flip" and raw:
            i = min(i, len(raw) - 1)
            raw = raw[:i] + bytes([raw[i] ^ (1 << draw(st.integers(0, 7)))]) + raw[i + 1:]
        elif op == "delete":
            raw = raw[:i] + raw[i + draw(st.integers(1, 16)):]
        elif op == "truncate":
            raw = raw[:i]
        else:
            raw = raw[:i] + raw[i:i + draw(st.integers(1, 64))] * draw(st.integers(2, 50)) + raw[i:]
    return raw


@pytest.mark.parametrize("example", range(len(VALID)))
def test_every_field_of_every_example_takes_every_hostile_value(example):
    """Exhaustively, one mutation at a time: each field (and the envelope's) replaced by each hostile
    value, or deleted."""
    type_, data = VALID[example]
    base = envelope(type_, data)
    decoded = 0
    for path in list(_paths(base))[1:]:
        for value in [*HOSTILE, KeyError]:  # KeyError: delete the field
            event = copy.deepcopy(base)
            parent = event
            for step in path[:-1]:
                parent = parent[step]
            if value is KeyError:
                del parent[path[-1]]
            else:
                parent[path[-1]] = copy.deepcopy(value)
            decoded += check(orjson.dumps(event)) is not None
    assert decoded  # some replacements are valid (an id for an id): the check saw messages too


@FUZZ
@given(st.binary(max_size=2000))
def test_random_bytes(value):
    check(value)


@FUZZ
@given(JSON)
def test_random_json(value):
    check(orjson.dumps(value))


@FUZZ
@given(st.sampled_from(INPUT_TYPES), st.dictionaries(st.text(max_size=24), JSON, max_size=6))
def test_random_data_of_every_type(type_, data):
    check(orjson.dumps(envelope(type_, data)))


@FUZZ
@given(mutated_events())
def test_mutated_valid_messages(event):
    check(orjson.dumps(event))


@FUZZ
@given(st.sampled_from(SEEDS), st.data())
def test_byte_mutated_valid_messages(seed, data):
    check(_mutate_bytes(data.draw, seed))


@FUZZ
@given(mutated_events(), st.data())
def test_byte_mutated_mutated_messages(event, data):
    check(_mutate_bytes(data.draw, orjson.dumps(event)))


@FUZZ
@given(st.sampled_from(VALID), st.sampled_from(["finished_at", "attempted_at", "closed_at", "imported_at",
                                                "last_played_at"]),
       st.datetimes(min_value=datetime.datetime(1, 1, 2), max_value=datetime.datetime(9999, 12, 30)),
       st.integers(-23 * 60 - 59, 23 * 60 + 59), st.sampled_from(["", ".5", ".000001", ".999999999"]),
       st.booleans())
def test_times_anywhere_in_the_calendar(example, field, moment, offset, fraction, in_envelope):
    """Times from year 1 to 9999 with any offset, in the cause or the envelope: valid or a clear reason,
    and never a time before 1970 or more than a day after the envelope in a decoded message."""
    type_, data = example
    sign = "+" if offset >= 0 else "-"
    text = moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + f"{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"
    data = dict(data)
    if in_envelope:
        check(orjson.dumps(envelope(type_, data, time=text)))
    else:
        data[field] = text
        check(orjson.dumps(envelope(type_, data)))


# --- atheris -----------------------------------------------------------------------------------------------------

RUNS = int(os.environ.get("FUZZ_RUNS", "10000"))
ROOT = Path(__file__).resolve().parents[2]
# The child process: worker's modules and the compiled schemas instrumented for coverage (not the test
# tooling: instrumenting everything loaded takes minutes), then libFuzzer with the arguments given.
ATHERIS_MAIN = """
import sys
import atheris
with atheris.instrument_imports(include=["worker"]):
    import worker.contract.decode as m
m._ENVELOPE = atheris.instrument_func(m._ENVELOPE)
m._TYPES = {t: (atheris.instrument_func(v), *rest) for t, (v, *rest) in m._TYPES.items()}
from tests.property.test_fuzz_decoder import check
atheris.Setup(sys.argv, check)
atheris.Fuzz()
"""


def test_atheris_finds_nothing(tmp_path):
    """libFuzzer (via atheris), coverage-guided from the valid messages, for FUZZ_RUNS inputs: any
    exception but BadMessage, a broken invariant, an input over 10 s or over 2 GB of memory fails."""
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, seed in enumerate(SEEDS):
        (corpus / f"seed-{i}").write_bytes(seed)
    dictionary = tmp_path / "tokens.dict"
    words = [b"1e400", b"-0", b"18446744073709551616", b"\\u0000", b"\\ud800", b"1969-12-31T23:59:59Z",
             b"9999-12-31T23:59:59Z", b"2026-12-01T12:00:01Z", b"player_id", b"anna", b"p1", b"null", b"[]", b"{}"]
    dictionary.write_bytes(b"".join(b'"' + w.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"\n' for w in words))
    done = subprocess.run(
        [sys.executable, "-c", ATHERIS_MAIN, f"-atheris_runs={RUNS}", "-max_len=8192", "-timeout=10",
         "-rss_limit_mb=2048", f"-dict={dictionary}", str(corpus)],
        capture_output=True, text=True, timeout=1800, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert f"Done {RUNS} " in done.stderr or "Done " in done.stderr, done.stderr[-3000:]


if __name__ == "__main__":  # a longer fuzzing session: python tests/property/test_fuzz_decoder.py CORPUS_DIR [flags]
    os.execv(sys.executable, [sys.executable, "-c", ATHERIS_MAIN, *sys.argv[1:]])
