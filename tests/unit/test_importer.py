"""`rating-worker import`: CSV and JSON lines in, checked rating.imported CloudEvents out (no services)."""

from __future__ import annotations

import io
import json
import uuid

import orjson
import pytest

from worker.cli import build_parser
from worker.commands import importer
from worker.commands.importer import (
    DEFAULT_SOURCE,
    Duplicate,
    Good,
    ImportError_,
    Rejected,
    build_event,
    check_records,
    message_id,
    read_csv,
    read_jsonl,
)
from worker.config import Config
from worker.contract.decode import decode

T0 = "2026-11-01T00:00:00Z"
HEADER = "player_id,system,category,rating,rd,volatility,games,peak,birth_year,imported_at\n"


def csv_records(text: str | bytes):
    raw = text.encode() if isinstance(text, str) else text
    return list(read_csv(io.BytesIO(raw)))


def jsonl_records(text: str | bytes, ignored: set | None = None):
    raw = text.encode() if isinstance(text, str) else text
    return list(read_jsonl(io.BytesIO(raw), ignored))


def checked(records, **kw):
    return list(check_records(records, **kw))


# ---------------------------------------------------------------------------------------------
# CSV


def test_csv_cells_become_typed_data_and_empty_cells_are_absent():
    records = csv_records(HEADER + "p1,fide,standard,2012,,,57,2080,2009,2026-11-01T00:00:00Z\n"
                          " anna , csr ,blitz, 1712.4 ,85,0.059,140,,,2026-11-01T00:00:00Z\n")
    assert [r.line for r in records] == [2, 3]
    assert records[0].data == {"player_id": "p1", "system": "fide", "category": "standard", "rating": 2012,
                               "games": 57, "peak": 2080, "birth_year": 2009, "imported_at": T0}
    assert records[1].data == {"player_id": "anna", "system": "csr", "category": "blitz", "rating": 1712.4,
                               "rd": 85, "volatility": 0.059, "games": 140, "imported_at": T0}
    assert type(records[0].data["rating"]) is int and type(records[1].data["rating"]) is float


def test_csv_fide_list_k_and_ever_columns_are_typed():
    """Issue 20, item 4: a FIDE list's K and what it says of the past, from CSV columns."""
    text = ("player_id,system,category,rating,k,ever_2300,ever_2400,imported_at\n"
            "gm,fide,standard,2350,10,yes,TRUE,2026-11-01T00:00:00Z\n"
            "jr,fide,standard,1900,40,0,,2026-11-01T00:00:00Z\n"
            "bad,fide,standard,1900,20,maybe,,2026-11-01T00:00:00Z\n")
    records = list(read_csv(io.BytesIO(text.encode())))
    assert records[0].data == {"player_id": "gm", "system": "fide", "category": "standard", "rating": 2350, "k": 10,
                               "ever_2300": True, "ever_2400": True, "imported_at": T0}
    assert records[1].data["k"] == 40 and records[1].data["ever_2300"] is False and "ever_2400" not in records[1].data
    assert records[2].error == ("invalid_data", "data.ever_2300: 'maybe' is not true or false (or 1/0, yes/no)")


def test_csv_header_is_case_insensitive_in_any_order_with_a_bom_and_other_columns_ignored():
    seen = []
    text = "\ufeffImported_At, Rating ,Name,PLAYER_ID,system,category\n2026-11-01T00:00:00Z,1500,Ann Smith,a1,chesskite,puzzle\n"
    records = list(read_csv(io.BytesIO(text.encode()), seen.append))
    assert records[0].data == {"imported_at": T0, "rating": 1500, "player_id": "a1", "system": "chesskite",
                               "category": "puzzle"}
    assert seen[0].ignored == ["name"]


def test_csv_line_numbers_count_blank_lines_and_quoted_newlines():
    text = HEADER + "\n" + '"p,1",csr,blitz,1500,,,,,,2026-11-01T00:00:00Z\n' + \
        '"multi\nline",csr,blitz,1500,,,,,,2026-11-01T00:00:00Z\n' + "p3,csr,blitz,x,,,,,,2026-11-01T00:00:00Z\n"
    records = csv_records(text)
    assert [(r.line, r.data and r.data["player_id"]) for r in records] == [(3, "p,1"), (4, "multi\nline"), (6, None)]


@pytest.mark.parametrize(("cell", "reason"), [
    ("abc", "data.rating: 'abc' is not a number"),
    ("nan", "data.rating: 'nan' is not a number"),
    ("inf", "data.rating: 'inf' is not a number"),
    ("1_500", "data.rating: '1_500' is not a number"),
    ("1,500", None),  # a comma makes one more cell
    ("0x5dc", "data.rating: '0x5dc' is not a number"),
])
def test_csv_a_cell_that_is_not_a_number_rejects_its_line_only(cell, reason):
    # unquoted on purpose: "1,500" makes one cell more
    records = csv_records(HEADER + "ok,csr,blitz,1500,,,,,,2026-11-01T00:00:00Z\n"
                          f"bad,csr,blitz,{cell},,,,,,2026-11-01T00:00:00Z\n")
    assert records[0].error is None
    bad = records[1]
    assert bad.line == 3 and bad.data is None
    if reason is None:
        assert bad.error == ("invalid_csv", "line: 11 cells, the header has 10 columns")
    else:
        assert bad.error == ("invalid_data", reason)


def test_csv_invalid_utf8_rejects_that_line_and_the_rest_is_read():
    raw = HEADER.encode() + b"b\xffd,csr,blitz,1500,,,,,,2026-11-01T00:00:00Z\n" + \
        b"good,csr,blitz,1500,,,,,,2026-11-01T00:00:00Z\n"
    records = csv_records(raw)
    assert records[0].error == ("invalid_utf8", "line: not valid UTF-8") and records[0].line == 2
    assert records[1].data["player_id"] == "good"


@pytest.mark.parametrize(("header", "message"), [
    ("player_id,system,category\n", "no 'rating' column"),
    ("player,system,category,score\n", "no 'player_id', 'rating' columns"),
    ("player_id,system,category,rating,rating\n", "names the column 'rating' twice"),
])
def test_csv_a_header_that_cannot_work_is_a_usage_error(header, message):
    with pytest.raises(ImportError_, match=message):
        csv_records(header + "p1,csr,blitz,1500,1500\n")


def test_csv_an_empty_file_is_a_usage_error():
    with pytest.raises(ImportError_, match="the file is empty"):
        csv_records("\n\n")


# ---------------------------------------------------------------------------------------------
# JSON lines


def test_jsonl_nulls_are_absent_and_other_fields_are_dropped_and_named():
    ignored: set = set()
    records = jsonl_records('{"player_id": "p1", "system": "csr", "category": "blitz", "rating": 1500, '
                            '"rd": null, "nick": "x", "imported_at": "2026-11-01T00:00:00Z"}\n', ignored)
    assert records[0].data == {"player_id": "p1", "system": "csr", "category": "blitz", "rating": 1500,
                               "imported_at": T0}
    assert ignored == {"nick"}


@pytest.mark.parametrize(("line", "error"), [
    (b'{"player_id": "p1",', ("invalid_json", "line: invalid JSON")),
    (b'[1, 2]', ("invalid_json", "line: must be a JSON object (the data of one rating.imported), not an array")),
    (b'"p1"', ("invalid_json", "line: must be a JSON object (the data of one rating.imported), not a string")),
    (b'{"player_id": "b\xffd"}', ("invalid_utf8", "line: invalid UTF-8 at byte 16")),
    (b'{"specversion": "1.0", "id": "x", "data": {"player_id": "p1"}}',
     ("invalid_json", "line: this is a whole CloudEvent; give only the data objects")),
])
def test_jsonl_bad_lines_are_rejected_with_their_line_number_and_reason(line, error):
    good = b'{"player_id": "p1", "system": "csr", "category": "blitz", "rating": 1500, "imported_at": "2026-11-01T00:00:00Z"}'
    records = jsonl_records(good + b"\n\n" + line + b"\n" + good + b"\n")
    assert [r.line for r in records] == [1, 3, 4]
    assert records[1].data is None
    assert records[1].error[0] == error[0] and records[1].error[1].startswith(error[1])
    assert records[2].error is None


# ---------------------------------------------------------------------------------------------
# Checking with the worker's decoder


def _data(**fields):
    return {"player_id": "p1", "system": "csr", "category": "blitz", "rating": 1500, "imported_at": T0, **fields}


@pytest.mark.parametrize(("fields", "error_class", "reason"), [
    ({"system": "fide", "category": "standard", "rating": 1300}, "invalid_rule",
     "data.rating: 1300 is not a listed FIDE rating on the 2026-11 list (the lowest is 1400)"),
    ({"system": "fide", "category": "standard", "rating": 999}, "invalid_data", "data.rating: must be >= 1000 (got 999)"),
    ({"system": "fide", "category": "standard", "rating": 2000, "rd": 50}, "invalid_data", "data.rd: fide is an Elo system: no RD"),
    ({"category": "turbo"}, "invalid_data", "data.category: must be one of"),
    ({"games": -1}, "invalid_data", "data.games: must be >= 0 (got -1)"),
    ({"games": 2.5}, "invalid_data", "data.games: must be an integer"),
    ({"imported_at": "2026-02-30T00:00:00Z"}, "invalid_data", "data.imported_at: not a real date and time"),
    ({"imported_at": "yesterday"}, "invalid_data", "data.imported_at: must be an RFC 3339 timestamp"),
    ({"player_id": ""}, "invalid_data", "data.player_id: must be at least 1 character long"),
])
def test_each_line_is_checked_by_the_worker_decoder_with_its_reason(fields, error_class, reason):
    records = [importer.Record(7, _data(), None), importer.Record(9, _data(**{"player_id": "p2", **fields}), "raw")]
    first, second = checked(records)
    assert isinstance(first, Good) and first.line == 7
    assert isinstance(second, Rejected)
    assert (second.line, second.error_class, second.raw) == (9, error_class, "raw")
    assert second.reason.startswith(reason), second.reason


def test_a_system_this_worker_cannot_rate_yet_is_rejected_as_unsupported(monkeypatch):
    """As the worker would dead-letter it (pipeline: error.class unsupported), so it is not sent."""
    from worker.contract import decode as decoding

    monkeypatch.setattr(decoding, "system_for", lambda message: None if message.payload.player_id == "p2" else 1)
    records = [importer.Record(2, _data(), None), importer.Record(3, _data(player_id="p2"), None)]
    good, rejected = checked(records)
    assert isinstance(good, Good)
    assert (rejected.line, rejected.error_class, rejected.reason) == (
        3, "unsupported", "data.system: no rating system for 'csr' in this version of the worker")


def test_a_missing_imported_at_is_rejected_unless_given_for_all():
    data = _data()
    del data["imported_at"]
    (rejected,) = checked([importer.Record(2, dict(data), None)])
    assert (rejected.error_class, rejected.reason) == ("invalid_data", "data.imported_at: is required")
    (good,) = checked([importer.Record(2, dict(data), None)], imported_at="2026-10-01T00:00:00Z")
    assert good.message.time == "2026-10-01T00:00:00Z"


def test_a_good_line_is_the_cloud_event_the_worker_would_accept():
    (good,) = checked([importer.Record(2, _data(rd=80, games=30), None)], source="/legacy/csr")
    event = orjson.loads(good.value)
    assert {k: event[k] for k in ("specversion", "source", "type", "time", "subject")} == {
        "specversion": "1.0", "source": "/legacy/csr", "type": "rating.imported", "time": T0, "subject": "p1"}
    assert event["data"] == _data(rd=80, games=30)
    assert good.key == b"p1"
    message = decode(good.value)
    assert message == good.message
    assert (message.payload.rating, message.payload.rd, message.payload.games) == (1500.0, 80.0, 30)


def test_lines_with_the_same_data_are_one_message():
    records = [importer.Record(2, _data(), None), importer.Record(3, _data(rating=1501), None),
               importer.Record(5, _data(rating=1500.0), None)]
    items = checked(records)
    assert [type(i) for i in items] == [Good, Good, Duplicate]
    assert (items[2].line, items[2].first) == (5, 2)


# ---------------------------------------------------------------------------------------------
# Ids


def test_the_id_is_the_uuid5_of_the_canonical_data():
    data = _data(rd=80.0, last_played_at="2026-10-28T19:30:00+01:00")
    canonical = json.dumps({**data, "rd": 80, "last_played_at": "2026-10-28T18:30:00Z"}, sort_keys=True,
                           separators=(",", ":"))
    expected = uuid.uuid5(importer.ID_NAMESPACE, canonical)
    assert message_id(data) == str(expected) and expected.version == 5


def test_the_same_rating_gets_the_same_id_whatever_its_spelling_and_file_format():
    csv_line = csv_records(HEADER + "p1,csr,blitz,1500.0,80,0.06,12,,,2026-11-01T00:00:00+00:00\n")[0]
    json_line = jsonl_records('{"imported_at": "2026-11-01T00:00:00Z", "volatility": 0.06, "games": 12, '
                              '"rd": 80.0, "rating": 1500, "category": "blitz", "system": "csr", '
                              '"player_id": "p1", "peak": null}\n')[0]
    (a,), (b,) = checked([csv_line]), checked([json_line])
    assert a.message.id == b.message.id
    # and running the same file twice gives the same ids
    again = checked([csv_records(HEADER + "p1,csr,blitz,1500.0,80,0.06,12,,,2026-11-01T00:00:00+00:00\n")[0]])
    assert again[0].value == a.value


@pytest.mark.parametrize("change", [{"rating": 1500.5}, {"player_id": "p2"}, {"category": "rapid"},
                                    {"imported_at": "2026-11-02T00:00:00Z"}, {"games": 0}])
def test_any_change_of_meaning_changes_the_id(change):
    assert message_id(_data(**change)) != message_id(_data())


def test_the_envelope_time_is_the_imported_at_and_a_bad_one_is_named_in_the_data():
    assert orjson.loads(build_event(_data(imported_at="2026-11-01T01:00:00+01:00")))["time"] == "2026-11-01T01:00:00+01:00"
    (rejected,) = checked([importer.Record(2, _data(imported_at="2026-13-01T00:00:00Z"), None)])
    assert rejected.reason.startswith("data.imported_at:")


# ---------------------------------------------------------------------------------------------
# The command (dry run: no services)


def run_cli(argv, capsys, stdin: bytes | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    args = build_parser().parse_args(["import", *argv])
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


GOOD_CSV = HEADER + "p1,fide,standard,2012,,,57,2080,2009,2026-11-01T00:00:00Z\n" \
    "anna,csr,blitz,1712.4,85,0.059,140,1750,,2026-11-01T00:00:00Z\n"


def test_dry_run_of_a_good_file_exits_0(tmp_path, capsys):
    path = tmp_path / "ratings.csv"
    path.write_text(GOOD_CSV)
    code, out, err = run_cli([str(path), "--dry-run"], capsys)
    assert code == 0, out + err
    assert "2 lines read" in out and "valid                2" in out and "rejected             0" in out


def test_dry_run_lists_rejected_lines_writes_them_out_and_exits_1(tmp_path, capsys):
    path = tmp_path / "ratings.csv"
    path.write_text(GOOD_CSV + "low,fide,standard,1300,,,,,,2026-11-01T00:00:00Z\n"
                    "p1,fide,standard,2012.0,,,57,2080,2009,2026-11-01T00:00:00Z\n" + "short,csr\n")
    rejects = tmp_path / "rejects.csv"
    code, out, err = run_cli([str(path), "--dry-run", "--rejects", str(rejects)], capsys)
    assert code == 1
    assert "line 4: invalid_rule: data.rating: 1300 is not a listed FIDE rating on the 2026-11 list" in out
    assert "line 6: invalid_csv: line: 2 cells, the header has 10 columns" in out
    assert "line 5: the same as line 2" in out
    rows = rejects.read_text().splitlines()
    assert rows[0] == "line,error," + HEADER.strip()
    assert rows[1].startswith("4,") and rows[1].endswith(",low,fide,standard,1300,,,,,,2026-11-01T00:00:00Z")
    assert rows[2].startswith("6,") and rows[2].endswith(",short,csr")
    # the rejects file is itself importable: its line and error columns are ignored
    code, out, err = run_cli([str(rejects), "--dry-run"], capsys)
    assert code == 1 and "ignoring columns that are not rating.imported fields: line, error" in err
    assert "line 2: invalid_rule: data.rating: 1300 is not a listed FIDE rating" in out


def test_jsonl_from_stdin_with_format_and_rejects_as_json_lines(tmp_path, capsys, monkeypatch):
    lines = (b'{"player_id": "k1", "system": "chesskite", "category": "puzzle", "rating": 1234, "games": 7}\n'
             b'{"player_id": "k2", "system": "chesskite", "category": "puzzle", "rating": 1234, "rd": 50}\n')
    rejects = tmp_path / "bad.jsonl"
    code, out, err = run_cli(["-", "--format", "jsonl", "--dry-run", "--imported-at", T0, "--rejects", str(rejects)],
                             capsys, stdin=lines, monkeypatch=monkeypatch)
    assert code == 1
    assert "line 2: invalid_data: data.rd: chesskite is an Elo system: no RD" in out
    (row,) = [orjson.loads(x) for x in rejects.read_bytes().splitlines()]
    assert row == {"line": 2, "error": "invalid_data: data.rd: chesskite is an Elo system: no RD",
                   "input": lines.splitlines()[1].decode()}


@pytest.mark.parametrize(("argv", "message"), [
    (["ratings.txt", "--dry-run"], "cannot tell the format of"),
    (["-", "--dry-run"], "--format csv or --format jsonl"),
    (["missing.csv", "--dry-run"], "no such file"),
    (["{csv}", "--dry-run", "--imported-at", "soon"], "--imported-at 'soon'"),
    (["{csv}", "--database-url", "mysql://db/x"], "--database-url must start with postgresql://"),
    (["{csv}"], "no broker: give --bootstrap-servers or set KAFKA_BOOTSTRAP_SERVERS"),
    (["{csv}", "--bootstrap-servers", "kafka"], "'kafka' is not host:port"),
    (["{csv}", "--dry-run", "--batch-size", "0"], "--batch-size 0: must be at least 1"),
    (["{nocol}", "--dry-run"], "no 'imported_at' column: add one, or give --imported-at"),
])
def test_usage_errors_exit_2_before_anything_is_imported(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    (tmp_path / "ratings.txt").write_text(GOOD_CSV)
    (tmp_path / "good.csv").write_text(GOOD_CSV)
    (tmp_path / "nocol.csv").write_text("player_id,system,category,rating\np1,csr,blitz,1500\n")
    argv = [a.replace("{csv}", "good.csv").replace("{nocol}", "nocol.csv") for a in argv]
    code, out, err = run_cli(argv, capsys, stdin=b"" if argv[0] == "-" else None, monkeypatch=monkeypatch)
    assert code == 2
    assert message in err


def test_the_default_topic_is_one_the_worker_reads_and_the_default_source():
    assert importer.DEFAULT_TOPIC in Config().kafka_input_topics
    assert DEFAULT_SOURCE == "/rating-worker/import"
