"""An import line's `data` -> its id (the same data, the same id), its CloudEvent and the worker's
verdict on it (the worker's own decoder): a good line, a rejected one, or a duplicate of an earlier one;
and the --rejects file, written in the input's format."""

from __future__ import annotations

import csv
import hashlib
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from worker.commands.importer.read import DEFAULT_SOURCE, TIME_FIELDS, CsvHeader, Record
from worker.contract.decode import decode_rateable
from worker.contract.reasons import BadMessage
from worker.contract.times import format_time, parse_time
from worker.ratings.inputs import Message

TYPE = "rating.imported"
# Fixed forever: changing it would give every line a new id, and a file imported again would apply again.
ID_NAMESPACE = uuid.UUID("3b0c2f4e-2d1a-5c8e-9f57-7a1e0d4c6b21")
_NAMESPACE_BYTES = ID_NAMESPACE.bytes
# Placeholder envelope time for a line whose imported_at is missing or wrong: such a line is rejected
# (for its imported_at, which the reason names); the placeholder is never sent.
_NO_TIME = "1970-01-01T00:00:00Z"


def _canonical(key: str, value: Any) -> Any:
    if value.__class__ is float and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if key in TIME_FIELDS and isinstance(value, str):
        if len(value) == 20 and value[19] == "Z" and value[10] == "T":
            return value  # already the normal form (or wrong, and then the line is rejected anyway)
        try:
            return format_time(parse_time(value))
        except ValueError:
            return value
    return value


def message_id(data: dict[str, Any]) -> str:
    """uuid5(ID_NAMESPACE, the data in canonical form): the same rating gives the same id, whatever
    the file's format or the key order, 1500 or 1500.0, Z or +00:00."""
    canonical = orjson.dumps({k: _canonical(k, v) for k, v in data.items()}, option=orjson.OPT_SORT_KEYS)
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + canonical).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def build_event(data: dict[str, Any], source: str = DEFAULT_SOURCE, ident: str | None = None) -> bytes:
    """The rating.imported CloudEvent (JSON bytes) of one line's data; `time` is its imported_at."""
    at = data.get("imported_at")
    if not isinstance(at, str):
        at = _NO_TIME
    else:
        try:
            parse_time(at)
        except ValueError:
            at = _NO_TIME
    event = {"specversion": "1.0", "id": ident or message_id(data), "source": source, "type": TYPE, "time": at,
             "datacontenttype": "application/json", "data": data}
    player = data.get("player_id")
    if isinstance(player, str):
        event["subject"] = player
    return orjson.dumps(event)


@dataclass(slots=True)
class Good:
    line: int
    key: bytes  # the record key: player_id
    value: bytes  # the CloudEvent
    message: Message


@dataclass(slots=True)
class Rejected:
    line: int
    error_class: str
    reason: str
    raw: Any


@dataclass(slots=True)
class Duplicate:
    line: int
    first: int  # the earlier line with the same data


def check_records(
    records: Iterable[Record], source: str = DEFAULT_SOURCE, imported_at: str | None = None,
) -> Iterator[Good | Rejected | Duplicate]:
    """Each record -> a message checked by the worker's own decoder (and the engine's registry), a
    rejection with its reason, or a duplicate of an earlier line (the same data, so the same id)."""
    seen: dict[str, int] = {}
    for record in records:
        if record.error is not None:
            yield Rejected(record.line, record.error[0], record.error[1], record.raw)
            continue
        data = record.data
        if imported_at is not None and "imported_at" not in data:
            data["imported_at"] = imported_at
        ident = message_id(data)
        value = build_event(data, source, ident)
        try:
            message, _ = decode_rateable(value)
        except BadMessage as exc:
            reason = exc.reason
            if exc.error_class == "unsupported":  # worded for the file's column
                reason = f"data.system: no rating system for {data.get('system')!r} in this version of the worker"
            yield Rejected(record.line, exc.error_class, reason, record.raw)
            continue
        first = seen.setdefault(ident, record.line)
        if first != record.line:
            yield Duplicate(record.line, first)
            continue
        yield Good(record.line, message.payload.player_id.encode(), value, message)


class RejectsWriter:
    """--rejects FILE: the rejected lines, in the input's format, with their line number and reason.

    CSV: the input's header with `line` and `error` columns in front, then each rejected row's cells
    (a fixed file can be imported again: those two columns are not data fields and are ignored).
    JSON lines: {"line": n, "error": "class: reason", "input": "<the line as it was>"}.
    """

    def __init__(self, path: str, fmt: str) -> None:
        self.fmt = fmt
        self._file = open(path, "w", encoding="utf-8", newline="", errors="surrogateescape")  # noqa: SIM115
        self._csv = csv.writer(self._file) if fmt == "csv" else None
        self.count = 0

    def header(self, header: CsvHeader) -> None:
        if self._csv is not None:
            self._csv.writerow(["line", "error", *header.columns])

    def write(self, rejected: Rejected) -> None:
        self.count += 1
        error = f"{rejected.error_class}: {rejected.reason}"
        if self._csv is not None:
            self._csv.writerow([rejected.line, error, *rejected.raw])
        else:
            raw = rejected.raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
            self._file.write(orjson.dumps({"line": rejected.line, "error": error, "input": raw}).decode() + "\n")

    def close(self) -> None:
        self._file.close()
