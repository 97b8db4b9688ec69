"""Dead letters written and read back (worker.contract.deadletter): the record's own value, key and headers kept
byte for byte, ours after them; what does not fit the request limit left out and said so."""

from __future__ import annotations

from types import SimpleNamespace

from worker.contract import deadletter


def record(value=b'{"x":1}', key=b"k", headers=(), topic="games", partition=2, offset=17):
    return SimpleNamespace(value=value, key=key, headers=tuple(headers), topic=topic, partition=partition,
                           offset=offset)


def read_back(letter: deadletter.DeadLetter, partition=0, offset=5):
    return deadletter.read(SimpleNamespace(value=letter.value, key=letter.key, headers=tuple(letter.headers),
                                           partition=partition, offset=offset))


def test_a_dead_letter_keeps_the_record_and_its_headers_first_then_says_why():
    own = [("traceparent", b"00-abc-01"), ("ce_id", b"e1"), ("bin", b"\x00\xff")]
    letter = deadletter.build(record(headers=own), "invalid_json", "record value: invalid JSON", limit=1 << 20)
    assert (letter.value, letter.key) == (b'{"x":1}', b"k")
    assert letter.headers[:3] == own
    assert dict(letter.headers[3:]) == {
        "error.class": b"invalid_json", "error.message": b"record value: invalid JSON", "source.topic": b"games",
        "source.partition": b"2", "source.offset": b"17", "source.headers": b"3"}
    back = read_back(letter)
    assert (back.value, back.key, back.headers) == (b'{"x":1}', b"k", own)
    assert (back.error_class, back.source_topic, back.source_partition, back.source_offset) == \
        ("invalid_json", "games", 2, 17)
    assert back.omitted == {}


def test_headers_of_the_record_named_like_ours_are_still_its_own():
    own = [("error.class", b"theirs"), ("source.topic", b"theirs"), ("source.headers", b"99")]
    back = read_back(deadletter.build(record(headers=own), "invalid_data", "why", limit=1 << 20))
    assert back.headers == own and back.error_class == "invalid_data" and back.source_topic == "games"


def test_tombstones_and_records_without_a_key_are_kept_as_they_are():
    letter = deadletter.build(record(value=None, key=None), "invalid_json", "record value: missing", 1 << 20)
    assert (letter.value, letter.key) == (None, None)
    back = read_back(letter)
    assert (back.value, back.key, back.headers, back.omitted) == (None, None, [], {})


def test_what_does_not_fit_is_left_out_largest_part_first():
    value, key, own = b"v" * 5000, b"k" * 3000, [("h", b"x" * 2000)]

    def fitted(limit, **parts):
        rec = record(**{"value": value, "key": key, "headers": own, **parts})
        return deadletter.build(rec, "too_large", "r", limit=limit)

    whole = fitted(20_000)
    assert (whole.value, whole.key, whole.headers[:1]) == (value, key, own) and read_back(whole).omitted == {}
    no_value = fitted(6_000)
    assert no_value.value is None and no_value.key == key and no_value.headers[:1] == own
    assert read_back(no_value).omitted == {"value": 5000}
    no_key_either = fitted(4_000)
    assert (no_key_either.value, no_key_either.key, no_key_either.headers[:1]) == (None, None, own)
    assert read_back(no_key_either).omitted == {"value": 5000, "key": 3000}
    nothing = fitted(1_000)
    assert (nothing.value, nothing.key) == (None, None)
    assert read_back(nothing).omitted == {"value": 5000, "key": 3000, "headers": 2001}
    # A small bad value beside a huge key keeps the value, the part an operator needs to see.
    small = fitted(4_000, value=b"not json", key=b"k" * 200_000)
    assert small.value == b"not json" and small.key is None and read_back(small).omitted == {"key": 200_000}
    for letter, limit in ((whole, 20_000), (no_value, 6_000), (no_key_either, 4_000), (nothing, 1_000),
                          (small, 4_000)):
        assert deadletter.record_size(letter.key, letter.value, letter.headers) <= limit


def test_the_minimal_letter_has_only_our_headers():
    letter = deadletter.minimal(record(value=b"v" * 10, key=b"k", headers=[("h", b"x")]), "too_large", "r")
    assert (letter.value, letter.key) == (None, None)
    assert {name for name, _ in letter.headers} == deadletter.OURS


def test_dead_letters_of_older_versions_read_as_before():
    old = SimpleNamespace(value=b"v", key=None, partition=0, offset=1, headers=(
        ("error.class", b"invalid_json"), ("error.message", b"m"), ("source.topic", b"games"),
        ("source.partition", b"0"), ("source.offset", b"9")))
    back = deadletter.read(old)
    assert back.headers == [] and back.error_class == "invalid_json" and back.source_offset == 9


def test_rating_worker_message_finds_a_dead_letter_s_identity_in_either_content_mode():
    """`rating-worker message` matches dead letters by source and id as the worker reads them: a binary
    record's ce_* headers (any case), a structured record's value; nothing for what carries neither."""
    from worker.commands.message import identity_of
    from worker.contract.deadletter import Letter

    def letter(value, headers=()):
        return Letter(0, 0, None, value, list(headers), "invalid_data", "x", "in", 0, 0)

    binary = letter(b'{"bad": 1}', [("CE_SPECVERSION", b"1.0"), ("ce_source", b"/s"), ("ce_id", b"7"),
                                    ("content-type", b"application/json")])
    assert identity_of(binary) == ("/s", "7")
    assert identity_of(letter(b'{"source": "/s", "id": "8", "type": "x"}')) == ("/s", "8")
    assert identity_of(letter(b"not json")) == (None, None) and identity_of(letter(None)) == (None, None)
    assert identity_of(letter(b"[1]")) == (None, None)
