"""decode(): every valid game decodes; every contract rule rejects with its class and the field's name."""

from __future__ import annotations

import time

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worker.contract.decode import decode
from worker.contract.reasons import ERROR_CLASSES, BadMessage
from worker.contract.times import format_time, parse_time

GAME = {
    "specversion": "1.0", "id": "m-1", "source": "/game-server/eu-1", "type": "game.finished",
    "time": "2026-11-30T12:00:01Z", "datacontenttype": "application/json",
    "data": {"game_id": "g-81723", "rated": True, "variant": "standard",
             "time_control": {"base_seconds": 300, "increment_seconds": 0},
             "white": {"player_id": "anna", "guest": False}, "black": {"player_id": "ben"},
             "result": "1-0", "finished_at": "2026-11-30T13:00:00+01:00"},
}


def with_data(**changes) -> bytes:
    return orjson.dumps({**GAME, "data": {**GAME["data"], **changes}})


def test_the_contract_example_decodes():
    m = decode(orjson.dumps(GAME))
    assert (m.source, m.id, m.type, m.ref) == ("/game-server/eu-1", "m-1", "game.finished", "g-81723")
    assert m.time == "2026-11-30T12:00:00Z"  # the cause's time (finished_at), in UTC
    g = m.payload
    assert (g.white_id, g.black_id, g.result, g.white_guest, g.black_guest) == ("anna", "ben", "1-0", False, False)
    assert g.time_control.base_seconds == 300 and g.finished_at == parse_time("2026-11-30T12:00:00Z")


def test_unknown_attributes_are_ignored_and_correspondence_decodes():
    m = decode(orjson.dumps({**GAME, "traceparent": "x", "data": {**GAME["data"], "time_control": {"days_per_move": 3},
                                                                   "extra": 1}}))
    assert m.payload.time_control.days_per_move == 3


@pytest.mark.parametrize(
    "value,error_class,field",
    [
        (b"\xff\xfe", "invalid_utf8", "UTF-8"),
        (b"{nope", "invalid_json", "JSON"),
        (b"[1, 2]", "invalid_envelope", "object"),
        (orjson.dumps({**GAME, "specversion": "0.3"}), "invalid_envelope", "specversion"),
        (orjson.dumps({**GAME, "id": ""}), "invalid_envelope", "id"),
        (orjson.dumps({**GAME, "id": "x" * 129}), "invalid_envelope", "id"),
        (orjson.dumps({**GAME, "source": "s" * 257}), "invalid_envelope", "source"),
        (orjson.dumps({**GAME, "type": "game.started"}), "unknown_type", "type"),
        (orjson.dumps({**GAME, "time": "yesterday"}), "invalid_envelope", "time"),
        (orjson.dumps({**GAME, "time": "2026-11-30T12:00:00"}), "invalid_envelope", "time"),
        (orjson.dumps({k: v for k, v in GAME.items() if k != "data"}), "invalid_envelope", "data"),
        (with_data(result="2-0"), "invalid_data", "data.result"),
        (with_data(rated="yes"), "invalid_data", "data.rated"),
        (with_data(black={"player_id": "anna"}), "invalid_rule", "meet himself"),
        (with_data(white={"player_id": ""}), "invalid_data", "data.white.player_id"),
        (with_data(white={"player_id": "a", "guest": 1}), "invalid_data", "data.white.guest"),
        (with_data(time_control={"base_seconds": -1, "increment_seconds": 0}), "invalid_data", "base_seconds"),
        (with_data(time_control={"base_seconds": 1.5, "increment_seconds": 0}), "invalid_data", "base_seconds"),
        (with_data(time_control={"days_per_move": 0}), "invalid_data", "days_per_move"),
        (with_data(time_control={"days_per_move": 2, "base_seconds": 60}), "invalid_data", "time_control"),
        (with_data(finished_at="2026-13-01T00:00:00Z"), "invalid_data", "finished_at"),
        (with_data(game_id=7), "invalid_data", "game_id"),
    ],
)
def test_bad_messages_are_rejected_with_their_reason(value, error_class, field):
    with pytest.raises(BadMessage) as info:
        decode(value)
    assert info.value.error_class == error_class
    assert field in info.value.reason


def test_size_limit():
    with pytest.raises(BadMessage) as info:
        decode(orjson.dumps(GAME), max_bytes=100)
    assert info.value.error_class == "too_large"


def test_times_round_trip():
    assert format_time(parse_time("2026-11-30T12:00:00.250+00:00")) == "2026-11-30T12:00:00.250000Z"
    assert format_time(parse_time("2026-11-30T12:00:00Z")) == "2026-11-30T12:00:00Z"


def decoded_or_rejected(value: bytes) -> None:
    """decode() returns a message or raises BadMessage with a known class and a one-line reason, within a
    bounded CPU time; anything else (another exception, a hang) fails the test."""
    start = time.process_time()
    try:
        decode(value)
    except BadMessage as exc:
        assert exc.error_class in ERROR_CLASSES
        assert exc.reason and "\n" not in exc.reason and len(exc.reason) < 400
    assert time.process_time() - start < 1.0


# No wall-clock deadline: the bound above is CPU time, so a loaded machine (two shared cores, other test
# runs, PostgreSQL) cannot fail these tests by descheduling them for 200 ms, which is what Hypothesis's
# default deadline did once (DeadlineExceeded / "Unreliable test timings" are not BadMessage either).
# Hypothesis also mixes literals of every loaded project module into its data, so a seed only replays
# with the same modules loaded: see tests/property/test_fuzz_decoder.py for the thorough fuzzing.
RANDOM = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@RANDOM
@given(st.binary(max_size=300))
def test_random_bytes_are_decoded_or_rejected(value):
    decoded_or_rejected(value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


@RANDOM
@given(st.dictionaries(st.sampled_from(list(GAME["data"]) + ["x"]), json_values))
def test_random_data_objects_are_decoded_or_rejected(data):
    decoded_or_rejected(orjson.dumps({**GAME, "data": {**GAME["data"], **data}}))


@pytest.mark.parametrize("value", [
    # Inputs that once cost seconds and gigabytes (a NUL under a wide, deep tree), or that orjson refuses
    # in its own words (depth, infinite numbers): each a dead letter with a reason, in milliseconds.
    with_data(x={"k" * 40: {"k" * 40: {str(i): 0 for i in range(20_000)} | {"z": "\x00"}}}),
    b'{"a":' * 2000 + b"1" + b"}" * 2000,
    with_data(x="__NUMBER__").replace(b'"__NUMBER__"', b"1e400"),
    with_data(x="__NUMBER__").replace(b'"__NUMBER__"', b"123456789012345678901234567890"),
    with_data(finished_at="9999-12-31T23:59:60Z"),
    with_data(finished_at="0001-01-01T00:00:00+00:01"),
    orjson.dumps({**GAME, "time": "9999-12-31T23:59:59-23:59"}),
])
def test_known_troublemakers_are_decoded_or_rejected(value):
    decoded_or_rejected(value)
