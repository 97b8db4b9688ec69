"""Dead letters: the byte format of a bad record's copy on the dead-letter topic, written and read back.

A dead letter is the bad record itself, with headers that say why (docs/contract.md#bad-messages-and-dead-letters, in the
spirit of Kafka Connect's dead-letter queue, which keeps the record's own headers too):

    value    the record's value, bytes unchanged (None for a tombstone)
    key      the record's key, bytes unchanged
    headers  the record's own headers, unchanged and in their order, then ours:
             error.class, error.message, source.topic, source.partition, source.offset, and
             source.headers: how many of the headers before ours are the record's own (reading back
             never mistakes one of them for ours, whatever they are named)

so that `rating-worker dlq replay` re-submits the record exactly as it came: value, key and headers.

A dead letter must fit in one produce request (`limit`). One that does not is sent without the parts
that do not fit, the largest first (of the value, the record's own headers and the key; the value first
of equals), until it fits: a 10-byte bad value with a 200 KB key keeps its value. Each part left out is
named by a header giving its size in bytes (error.value.omitted, error.headers.omitted,
error.key.omitted). The original stays findable by source.topic, source.partition and source.offset
for as long as the input topic keeps it (docs/operations.md, "Dead letters").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["DeadLetter", "Letter", "build", "minimal", "read", "record_size"]

Headers = list[tuple[str, bytes]]

CLASS, MESSAGE = "error.class", "error.message"
TOPIC, PARTITION, OFFSET, OWN = "source.topic", "source.partition", "source.offset", "source.headers"
VALUE_OMITTED, HEADERS_OMITTED, KEY_OMITTED = "error.value.omitted", "error.headers.omitted", "error.key.omitted"
OURS = frozenset((CLASS, MESSAGE, TOPIC, PARTITION, OFFSET, OWN, VALUE_OMITTED, HEADERS_OMITTED, KEY_OMITTED))

# A record's bytes beyond its key, value and headers (a generous bound of the varints and the batch
# header of a one-record batch, Kafka's record format v2), and per header.
_RECORD_OVERHEAD = 128
_HEADER_OVERHEAD = 10


@dataclass(frozen=True)
class DeadLetter:
    """One record for the dead-letter topic."""

    key: bytes | None
    value: bytes | None
    headers: Headers


def headers_size(headers: Sequence[tuple[str, bytes | None]]) -> int:
    return sum(len(k.encode()) + len(v or b"") + _HEADER_OVERHEAD for k, v in headers)


def record_size(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> int:
    """An upper bound of a record's size in a produce request, as the broker counts it (uncompressed)."""
    return _RECORD_OVERHEAD + len(key or b"") + len(value or b"") + headers_size(headers)


def _ours(record, error_class: str, reason: str, own: int, omitted: Sequence[tuple[str, int]]) -> Headers:
    out = [
        (CLASS, error_class.encode()),
        (MESSAGE, reason.encode()),
        (TOPIC, record.topic.encode()),
        (PARTITION, str(record.partition).encode()),
        (OFFSET, str(record.offset).encode()),
        (OWN, str(own).encode()),
    ]
    return out + [(name, str(size).encode()) for name, size in omitted]


def build(record, error_class: str, reason: str, limit: int) -> DeadLetter:
    """The dead letter of `record` (a ConsumerRecord), as whole as fits in `limit` bytes."""
    key, value, own = record.key, record.value, list(record.headers or ())
    omitted: list[tuple[str, int]] = []

    def size() -> int:
        return record_size(key, value, own + _ours(record, error_class, reason, len(own), omitted))

    while size() > limit:
        parts = [(len(value), 2, "value") if value is not None else None,
                 (headers_size(own), 1, "headers") if own else None,
                 (len(key), 0, "key") if key is not None else None]
        present = [p for p in parts if p is not None]
        if not present:
            break  # only our own headers are left: the smallest letter there is
        size_of, _, part = max(present)
        if part == "value":
            omitted.append((VALUE_OMITTED, size_of))
            value = None
        elif part == "headers":
            omitted.append((HEADERS_OMITTED, sum(len(k.encode()) + len(v or b"") for k, v in own)))
            own = []
        else:
            omitted.append((KEY_OMITTED, size_of))
            key = None
    return DeadLetter(key, value, own + _ours(record, error_class, reason, len(own), omitted))


def minimal(record, error_class: str, reason: str) -> DeadLetter:
    """The dead letter with every part of the record left out: for a broker whose limit is below ours."""
    return build(record, error_class, reason, limit=0)


@dataclass(frozen=True)
class Letter:
    """A dead letter read back from the dead-letter topic (`partition` and `offset` are its own there)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers  # the original record's own headers
    error_class: str | None
    error_message: str | None
    source_topic: str | None
    source_partition: int | None
    source_offset: int | None
    omitted: dict[str, int] = field(default_factory=dict)  # "value", "headers", "key" -> size in bytes


def read(record) -> Letter:
    """A ConsumerRecord of the dead-letter topic -> its `Letter`. Dead letters written before the
    source.headers header existed carried no headers of the record's own: all of theirs are ours."""
    headers = list(record.headers or ())
    own_count = next((_int(v) for k, v in reversed(headers) if k == OWN), None)
    if own_count is None or not 0 <= own_count <= len(headers):
        own, ours = [], headers
    else:
        own, ours = headers[:own_count], headers[own_count:]
    mine = {k: v for k, v in ours if k in OURS}
    omitted = {name.split(".")[1]: n for name in (VALUE_OMITTED, HEADERS_OMITTED, KEY_OMITTED)
               if (n := _int(mine.get(name))) is not None}
    return Letter(
        partition=record.partition, offset=record.offset, key=record.key, value=record.value, headers=own,
        error_class=_text(mine.get(CLASS)), error_message=_text(mine.get(MESSAGE)),
        source_topic=_text(mine.get(TOPIC)), source_partition=_int(mine.get(PARTITION)),
        source_offset=_int(mine.get(OFFSET)), omitted=omitted,
    )


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "replace")


def _int(raw: bytes | None) -> int | None:
    text = _text(raw)
    return int(text) if text is not None and text.isdigit() else None
