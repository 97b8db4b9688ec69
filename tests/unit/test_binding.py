"""The CloudEvents Kafka protocol binding on input (issue 18): binary content mode is accepted and is the
same event as structured mode; the schemas and rules apply to both alike."""

from __future__ import annotations

import orjson
import pytest

from worker.contract.binding import OUTPUT_HEADERS, binary_attributes
from worker.contract.decode import decode
from worker.contract.reasons import BadMessage

T = "2026-11-30T12:00:00Z"
DATA = {"game_id": "g1", "rated": True, "variant": "standard",
        "time_control": {"base_seconds": 300, "increment_seconds": 0},
        "white": {"player_id": "anna"}, "black": {"player_id": "ben"}, "result": "1-0", "finished_at": T}
ATTRIBUTES = {"specversion": "1.0", "id": "e1", "source": "/game-server/eu-1", "type": "game.finished", "time": T}


def binary(data=DATA, **changes) -> tuple[bytes, list[tuple[str, bytes]]]:
    attributes = {**ATTRIBUTES, **changes}
    headers = [(f"ce_{k}", v.encode()) for k, v in attributes.items() if v is not None]
    return orjson.dumps(data), headers + [("content-type", b"application/json")]


def structured(**changes) -> bytes:
    return orjson.dumps({**ATTRIBUTES, **changes, "data": DATA})


def reason(value, headers=()) -> str:
    with pytest.raises(BadMessage) as caught:
        decode(value, headers=headers)
    return str(caught.value)


def test_a_binary_mode_record_is_the_same_message_as_its_structured_form():
    value, headers = binary()
    assert decode(value, headers=headers) == decode(structured())


def test_a_structured_record_with_the_structured_content_type_or_other_headers_is_read_as_before():
    assert decode(structured(), headers=[("content-type", b"application/cloudevents+json; charset=UTF-8")]) \
        == decode(structured())
    assert decode(structured(), headers=[("traceparent", b"00-abc-def-01")]) == decode(structured())
    # The SDK's to_structured moves datacontenttype into the content-type header: still structured.
    assert decode(structured(), headers=[("content-type", b"application/json")]) == decode(structured())


def test_extension_attributes_and_a_charset_are_accepted_in_binary_mode():
    value, headers = binary()
    headers = [h for h in headers if h[0] != "content-type"]
    headers += [("ce_traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
                ("content-type", b"application/json; charset=utf-8")]
    assert decode(value, headers=headers) == decode(structured())


def test_binary_mode_breaking_the_envelope_or_the_schema_is_a_bad_message_of_the_same_class():
    value, headers = binary(id=None)
    assert reason(value, headers) == "invalid_envelope: id: is required"
    value, headers = binary(time="yesterday")
    assert reason(value, headers).startswith("invalid_envelope: time: must be an RFC 3339 timestamp")
    value, headers = binary(data={**DATA, "result": "2-0"})
    assert reason(value, headers).startswith("invalid_data: data.result: must be one of")
    value, headers = binary(data={**DATA, "black": {"player_id": "anna"}})
    assert reason(value, headers).startswith("invalid_rule: data.black.player_id: a player may not meet himself")
    value, headers = binary(type="rating.changed")
    assert reason(value, headers).startswith("unknown_type:")


def test_binary_mode_values_and_headers_that_cannot_make_an_event():
    value, headers = binary()
    assert reason(b"[1, 2]", headers) == "invalid_envelope: data: must be an object, not an array"
    assert reason(None, headers) == "invalid_json: record value: missing (a null value, e.g. a tombstone)"
    assert reason(b"{", headers).startswith("invalid_json: record value: invalid JSON")
    assert reason(b"\xff", headers).startswith("invalid_utf8: record value: invalid UTF-8 at byte 0")
    assert reason(value, headers + [("ce_id", b"again")]) == "invalid_envelope: header ce_id: sent more than once"
    bad_utf8 = [(k, b"\xfe" if k == "ce_source" else v) for k, v in headers]
    assert reason(value, bad_utf8) == "invalid_envelope: header ce_source: invalid UTF-8 at byte 0"
    assert reason(value, [(k, None if k == "ce_id" else v) for k, v in headers]) == \
        "invalid_envelope: header ce_id: has no value"
    text = [(k, b"text/plain" if k == "content-type" else v) for k, v in headers]
    assert reason(value, text) == "invalid_envelope: datacontenttype: must be 'application/json' (got 'text/plain')"
    nul = [(k, b"e\x001" if k == "ce_id" else v) for k, v in headers]
    assert reason(value, nul) == "invalid_envelope: id: must not contain the NUL character (U+0000)"


def test_a_binary_value_over_the_size_limit_is_too_large():
    value, headers = binary(data={**DATA, "pgn": "e4 " * 400})
    with pytest.raises(BadMessage) as caught:
        decode(value, 1000, headers)
    assert caught.value.error_class == "too_large"


def test_batched_mode_is_refused_with_a_reason():
    assert reason(b"[]", [("content-type", b"application/cloudevents-batch+json")]).startswith(
        "invalid_envelope: header content-type: batched mode")


def test_which_mode_a_record_is_in():
    assert binary_attributes([]) is None
    assert binary_attributes([("content-type", b"application/cloudevents+json")]) is None
    assert binary_attributes([("ce_specversion", b"1.0"), ("content-type", b"application/cloudevents+json")]) is None
    assert binary_attributes([("ce_specversion", b"1.0")]) == {"specversion": "1.0"}
    assert binary_attributes([("ce_specversion", b"1.0"), ("Content-Type", b"application/json")]) == \
        {"specversion": "1.0", "datacontenttype": "application/json"}
    assert binary_attributes([("ce_id", b"x")]) is None  # no ce_specversion: structured


def test_the_output_says_it_is_structured():
    assert OUTPUT_HEADERS == [("content-type", b"application/cloudevents+json")]


# The input shapes issue 20 added, as the CNCF CloudEvents SDK's Kafka binding encodes them (a client this
# project did not write): each decodes to the same message in both content modes as our own encoding.
NEW_SHAPES = [
    ("rating.period_closed", {"system": "fide", "list": "2026-12", "closed_at": "2026-12-01T00:00:00Z"}),
    ("event.finished", {"competition_id": "open", "kind": "fide", "rated": True, "finished_at": T,
                        "started_at": "2026-11-25T10:00:00+01:00", "rating_period": "2026-12",
                        "rating_type": "rapid", "players": [{"player_id": "a"}, {"player_id": "b"}],
                        "games": [{"round": 1, "white": "a", "black": "b", "result": "1-0"}]}),
    ("rating.imported", {"player_id": "a", "system": "fide", "category": "standard", "rating": 2012, "k": 10,
                         "ever_2300": True, "ever_2400": False, "imported_at": "2026-11-01T00:00:00Z"}),
]


@pytest.mark.parametrize(("type_", "data"), NEW_SHAPES, ids=[t for t, _ in NEW_SHAPES])
def test_the_sdk_encodes_the_new_shapes_as_we_read_them(type_, data):
    from cloudevents.v1.http import CloudEvent
    from cloudevents.v1.kafka import to_binary, to_structured

    event = CloudEvent({**ATTRIBUTES, "type": type_, "datacontenttype": "application/json"}, data)
    ours = decode(orjson.dumps({**ATTRIBUTES, "type": type_, "data": data}))
    for encode in (to_binary, to_structured):
        message = encode(event)
        assert decode(message.value, headers=list(message.headers.items())) == ours, encode.__name__
