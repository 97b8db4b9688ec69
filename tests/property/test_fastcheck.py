"""The hand-written fast checks (worker/fastcheck.py) against the JSON Schemas they stand in for.

The contract: a fast check says True only for a value the schema accepts (then the schema's validator
is skipped); anything else goes to the validator. Checked against both fastjsonschema (what the worker
runs otherwise) and, where installed, jsonschema's Draft 2020-12 validator (a reference), on valid
messages mutated at random, values of every JSON type put in every field, and random objects.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import fastjsonschema
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worker.contract import decode as decoding
from worker.contract.decode import decode
from worker.contract.fastcheck import envelope_surely_valid, game_surely_valid
from worker.contract.reasons import BadMessage
from worker.contract.schemas import load_schema
from worker.dev.streams import game_event

try:
    import jsonschema
except ImportError:  # pragma: no cover - a dev dependency
    jsonschema = None

GAME_DATA = {
    "game_id": "g-1", "rated": True, "variant": "standard",
    "time_control": {"base_seconds": 300, "increment_seconds": 2},
    "white": {"player_id": "anna", "guest": False}, "black": {"player_id": "ben"},
    "result": "1-0", "finished_at": "2026-11-30T12:00:00Z",
}
ENVELOPE = {"specversion": "1.0", "id": "e-1", "source": "/games", "type": "game.finished",
            "time": "2026-11-30T12:00:00Z", "datacontenttype": "application/json", "data": GAME_DATA}

# Values chosen to sit on the schemas' edges: types Python confuses (bool/int, int/float), lengths at
# and past the limits, times that are almost canonical, the three results and near misses.
EDGES = [
    None, True, False, 0, 1, -1, 2, 1.0, 0.5, 300.0, 10**9, 10**9 + 1, -(10**9), 2**63, "", "x", "x" * 64,
    "x" * 65, "x" * 128, "x" * 129, "x" * 256, "x" * 257, "\x00", "é" * 128, "1-0", "0-1", "1/2-1/2", "1-1",
    "½-½", "1.0", 1.0, "standard", "application/json", "application/json; charset=utf-8", "text/plain",
    "2026-11-30T12:00:00Z", "2026-11-30T12:00:00z", "2026-11-30t12:00:00Z", "2026-11-30T12:00:00Z\n",
    "2026-11-30T12:00:00.5Z", "2026-11-30T12:00:00+01:00", "2026-11-30T24:00:00Z", "2026-11-30T12:00:60Z",
    "2026-13-30T12:00:00Z", "2026-11-32T12:00:00Z", "2026-11-30 12:00:00Z", "2026-02-30T12:00:00Z",
    "0000-01-01T00:00:00Z", [], {}, [1], {"player_id": "anna"}, {"player_id": ""}, {"player_id": 1},
    {"player_id": "a", "guest": 1}, {"player_id": "a", "guest": None}, {"days_per_move": 1},
    {"days_per_move": 0}, {"days_per_move": True}, {"days_per_move": 1, "base_seconds": 1},
    {"base_seconds": 60}, {"base_seconds": 60, "increment_seconds": 0}, {"base_seconds": 60.0, "increment_seconds": 0},
    {"base_seconds": 60, "increment_seconds": -1}, {"base_seconds": 60, "increment_seconds": False},
    {"base_seconds": 60, "increment_seconds": 0, "extra": 1}, {"increment_seconds": 0, "days_per_move": 2},
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=10), children, max_size=3),
    max_leaves=10,
)
VALUES = st.sampled_from(EDGES) | JSON

_GAME = decoding._TYPES["game.finished"][0]
_ENVELOPE = decoding._ENVELOPE
_REFERENCE = (
    {name: jsonschema.Draft202012Validator(load_schema(name)) for name in ("envelope", "game.finished")}
    if jsonschema is not None else {}
)


def _accepted(validator, value) -> bool:
    try:
        validator(value)
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))


def _mutate(value: dict, draw) -> dict:
    value = copy.deepcopy(value)
    for _ in range(draw.draw(st.integers(1, 3))):
        paths = list(_paths(value))[1:]
        if not paths:
            break
        path = draw.draw(st.sampled_from(paths))
        parent = value
        for step in path[:-1]:
            parent = parent[step]
        if not isinstance(parent, dict):
            continue
        action = draw.draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "add":
            parent[draw.draw(st.sampled_from(["extra", "guest", "days_per_move", "base_seconds", "player_id"]))] = (
                copy.deepcopy(draw.draw(VALUES)))  # EDGES are shared: never mutate them
        else:
            parent[path[-1]] = copy.deepcopy(draw.draw(VALUES))
    return value


def _check_game(data) -> None:
    if game_surely_valid(data):
        assert _accepted(_GAME, data), data
        if _REFERENCE:
            assert _REFERENCE["game.finished"].is_valid(data), data


def _check_envelope(event) -> None:
    if envelope_surely_valid(event):
        assert _accepted(_ENVELOPE, event), event
        if _REFERENCE:
            assert _REFERENCE["envelope"].is_valid(event), event


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=1500)
@given(st.data())
def test_a_game_the_fast_check_passes_is_one_the_schema_accepts(draw):
    _check_game(_mutate(GAME_DATA, draw))


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=1000)
@given(st.data())
def test_an_envelope_the_fast_check_passes_is_one_the_schema_accepts(draw):
    _check_envelope(_mutate({**ENVELOPE, "data": {}}, draw))


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(st.dictionaries(st.sampled_from(list(GAME_DATA) + ["x"]), VALUES, max_size=10))
def test_random_objects_the_fast_check_passes_are_ones_the_schema_accepts(data):
    _check_game(data)
    _check_envelope(data)


@pytest.mark.parametrize("field", list(GAME_DATA))
@pytest.mark.parametrize("value", EDGES, ids=repr)
def test_every_edge_value_in_every_field(field, value):
    _check_game({**GAME_DATA, field: value})
    _check_envelope({**ENVELOPE, field: value} if field in ENVELOPE else {**ENVELOPE, "time": value})


def test_the_usual_messages_take_the_fast_path():
    """Otherwise the fast path buys nothing: what the platform sends every second must pass it."""
    for i, control in enumerate(({"base_seconds": 60, "increment_seconds": 0}, {"days_per_move": 3})):
        event = orjson.loads(orjson.dumps(game_event(i, "anna", "ben", "1/2-1/2", datetime(2026, 11, 30, 12, tzinfo=UTC))))
        event["data"]["time_control"] = control
        event["data"]["white"]["guest"] = bool(i)
        assert envelope_surely_valid(event), event
        assert game_surely_valid(event["data"]), event["data"]
    assert envelope_surely_valid({k: v for k, v in ENVELOPE.items() if k != "datacontenttype"})


@pytest.mark.parametrize("field, value", [
    ("rated", 1), ("result", "1-1"), ("finished_at", "2026-11-30T12:00:00+01:00"), ("variant", "x" * 65),
    ("time_control", {"base_seconds": 60}), ("white", {"player_id": "a", "guest": 0}),
])
def test_what_the_fast_check_declines_still_gets_the_schemas_verdict(field, value):
    """Declined values are not rejected by the fast check: the validator decides (and words the reason)."""
    event = {**ENVELOPE, "data": {**GAME_DATA, field: value}}
    assert not game_surely_valid(event["data"])
    schema_says = _accepted(_GAME, event["data"])
    try:
        decode(orjson.dumps(event))
        decoded = True
    except BadMessage as exc:
        decoded = False
        assert exc.error_class == "invalid_data" and exc.reason.startswith(f"data.{field}"), exc.reason
    assert decoded == schema_says
