"""Reading an import file: CSV with a header row or JSON lines -> records (line number, `data` for a
rating.imported, or the reason a line has none), and the input file itself (format, gzip, stdin)."""

from __future__ import annotations

import codecs
import contextlib
import csv
import gzip
import io
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import orjson

from worker.contract.reasons import BadMessage
from worker.contract.schemas import IMPORTED_DATA_FIELDS as DATA_FIELDS

NUMBER_FIELDS = frozenset({"rating", "rd", "volatility", "peak"})
INTEGER_FIELDS = frozenset({"games", "wins", "draws", "losses", "events", "birth_year", "k"})
BOOLEAN_FIELDS = frozenset({"ever_2300", "ever_2400"})
_BOOLEANS = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
TIME_FIELDS = frozenset({"last_played_at", "imported_at"})
REQUIRED_COLUMNS = ("player_id", "system", "category", "rating")

DEFAULT_SOURCE = "/rating-worker/import"
DEFAULT_TOPIC = "ratings.imported"  # one of the worker's default input topics (worker.config)
DEFAULT_BATCH = 5000
# A number as JSON writes it: no NaN, no infinities, no 1_000, no hex, no Unicode digits.
_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_SURROGATE = re.compile("[\udc80-\udcff]")  # a byte that was not UTF-8 (decoded with surrogateescape)
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3


class ImportError_(Exception):  # noqa: N801 - not the builtin ImportError
    """A usage or configuration error found before anything was imported (exit 2)."""






@dataclass(slots=True)
class Record:
    """One line of the input: its `data` for rating.imported, or why there is none."""

    line: int  # 1-based line number in the file (a CSV record spanning lines: its first line)
    data: dict[str, Any] | None
    raw: Any  # the line as read: the CSV cells (list of str) or the JSON line (bytes), for --rejects
    error: tuple[str, str] | None = None  # (error class, reason)


def _number(name: str, text: str) -> int | float:
    if _INT_RE.fullmatch(text):
        return int(text)
    if _NUMBER_RE.fullmatch(text):
        return float(text)  # finite: the pattern has no nan/inf, and ratings are far below 1e308
    raise BadMessage("invalid_data", f"data.{name}: {text[:40]!r} is not a number")


@dataclass
class CsvHeader:
    columns: list[str]  # as normalized (stripped, lower case)
    fields: list[tuple[int, str]]  # (column index, data field) of the columns that are data fields
    ignored: list[str]  # columns that are not data fields


def parse_header(cells: list[str]) -> CsvHeader:
    """The header row -> which columns are data fields. ImportError_ for a header that cannot work."""
    columns = [c.strip().lower() for c in cells]
    if _SURROGATE.search("".join(columns)):
        raise ImportError_("the header row is not valid UTF-8")
    seen: set[str] = set()
    for c in columns:
        if c and c in seen:
            raise ImportError_(f"the header names the column {c!r} twice")
        seen.add(c)
    missing = [c for c in REQUIRED_COLUMNS if c not in seen]
    if missing:
        raise ImportError_(
            f"the header row has no {', '.join(repr(m) for m in missing)} column"
            f"{'s' if len(missing) > 1 else ''} (got: {', '.join(columns) or 'nothing'}; "
            f"columns are the rating.imported data fields: {', '.join(DATA_FIELDS)})"
        )
    known = set(DATA_FIELDS)
    fields = [(i, c) for i, c in enumerate(columns) if c in known]
    ignored = [c or f"(column {i + 1}, no name)" for i, c in enumerate(columns) if c not in known]
    return CsvHeader(columns, fields, ignored)


def csv_data(header: CsvHeader, cells: list[str]) -> dict[str, Any]:
    """One CSV row -> `data`: cells trimmed, an empty cell is absent, numbers typed. Raises BadMessage."""
    if len(cells) != len(header.columns):
        raise BadMessage(
            "invalid_csv", f"line: {len(cells)} cells, the header has {len(header.columns)} columns"
        )
    if _SURROGATE.search("".join(cells)):
        raise BadMessage("invalid_utf8", "line: not valid UTF-8")
    data: dict[str, Any] = {}
    for index, name in header.fields:
        text = cells[index].strip()
        if not text:
            continue
        if name in BOOLEAN_FIELDS:
            data[name] = _boolean(name, text)
        else:
            data[name] = _number(name, text) if name in NUMBER_FIELDS or name in INTEGER_FIELDS else text
    return data


def _boolean(name: str, text: str) -> bool:
    value = _BOOLEANS.get(text.lower())
    if value is None:
        raise BadMessage("invalid_data", f"data.{name}: {text[:40]!r} is not true or false (or 1/0, yes/no)")
    return value


def _text_lines(stream: IO[bytes]) -> IO[str]:
    # utf-8-sig drops a byte order mark; surrogateescape keeps a bad byte as a lone surrogate, so that
    # the one line holding it is rejected (csv_data) and the rest of the file is still read.
    return io.TextIOWrapper(stream, encoding="utf-8-sig", errors="surrogateescape", newline="")


def read_csv(stream: IO[bytes], on_header: Callable[[CsvHeader], None] | None = None) -> Iterator[Record]:
    """Records of a CSV file (header row first). Blank lines are skipped. ImportError_ for a bad header."""
    text = _text_lines(stream)
    try:
        yield from _csv_records(text, on_header)
    finally:
        # The caller closes `stream` (stdin stays open): the wrapper lets go of it without closing it
        # (already closed when the caller stopped reading early: nothing to let go of then).
        with contextlib.suppress(ValueError):
            text.detach()


def _csv_records(text: IO[str], on_header: Callable[[CsvHeader], None] | None) -> Iterator[Record]:
    reader = csv.reader(text, strict=False)
    header: CsvHeader | None = None
    previous = 0
    for cells in reader:
        start, previous = previous + 1, reader.line_num
        if not cells or (len(cells) == 1 and not cells[0].strip()):
            continue
        if header is None:
            header = parse_header(cells)
            if on_header is not None:
                on_header(header)
            continue
        try:
            yield Record(start, csv_data(header, cells), cells)
        except BadMessage as exc:
            yield Record(start, None, cells, (exc.error_class, exc.reason))
    if header is None:
        raise ImportError_("the file is empty: a CSV file starts with a header row naming its columns")


def jsonl_data(line: bytes, ignored: set[str] | None = None) -> dict[str, Any]:
    """One JSON line -> `data`: null is absent, fields that are not data fields are dropped (and
    collected in `ignored`). Raises BadMessage."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise BadMessage("invalid_utf8", f"line: invalid UTF-8 at byte {err.start}") from None
        raise BadMessage("invalid_json", f"line: invalid JSON ({exc})") from None
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")
        raise BadMessage("invalid_json", f"line: must be a JSON object (the data of one rating.imported), not {kind}")
    if "specversion" in value and isinstance(value.get("data"), dict):
        raise BadMessage(
            "invalid_json",
            "line: this is a whole CloudEvent; give only the data objects, the importer writes the envelope",
        )
    known = DATA_FIELDS
    data = {}
    for key, item in value.items():
        if key not in known:
            if ignored is not None:
                ignored.add(key)
            continue
        if item is not None:
            data[key] = item
    return data


def read_jsonl(stream: IO[bytes], ignored: set[str] | None = None) -> Iterator[Record]:
    """Records of a JSON lines file: one data object per line; blank lines are skipped."""
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        if number == 1 and line.startswith(codecs.BOM_UTF8):
            line = line[3:]
        try:
            yield Record(number, jsonl_data(line, ignored), line)
        except BadMessage as exc:
            yield Record(number, None, line, (exc.error_class, exc.reason))






def detect_format(path: str, given: str | None) -> str:
    if given:
        return given
    name = path.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    for ext, fmt in FORMATS.items():
        if name.endswith(ext):
            return fmt
    if path == "-":
        raise ImportError_("reading stdin: say which format it is with --format csv or --format jsonl")
    raise ImportError_(
        f"cannot tell the format of {path!r} from its name (.csv, .jsonl, .ndjson, .json, optionally .gz): "
        "use --format csv or --format jsonl"
    )


def open_input(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdin.buffer
    try:
        stream: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed by the caller
    except OSError as exc:
        raise ImportError_(f"cannot read {path!r}: {exc.strerror or exc}") from None
    if path.lower().endswith(".gz"):
        return gzip.open(stream, "rb")  # type: ignore[return-value]
    return stream




