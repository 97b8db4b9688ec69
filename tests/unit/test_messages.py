"""worker.contract.decode: the CONTRACT examples decode, every rule rejects with its class and names the field,
times are normalized, and no input whatsoever raises anything but BadMessage."""

from __future__ import annotations

import copy
import math
from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest

try:
    import jsonschema
except ImportError:  # optional: only for the cross-check with a reference validator
    jsonschema = None
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worker.contract import decode as decoding
from worker.contract import schemas, times
from worker.contract.changed import validate_output
from worker.contract.decode import INPUT_TYPES, decode
from worker.contract.reasons import ERROR_CLASSES, BadMessage
from worker.contract.schemas import load_schema
from worker.contract.times import format_time, parse_time
from worker.ratings.inputs import (
    AccountClosed,
    EventFinished,
    EventGame,
    EventPlayer,
    GameFinished,
    Message,
    PuzzleAttempted,
    RatingImported,
    TeamGames,
    TimeControl,
    TurboPlayer,
)

# --- The examples of docs/contract.md -----------------------------------------------------------

GAME = {"game_id": "g-81723", "rated": True, "variant": "standard",
        "time_control": {"base_seconds": 300, "increment_seconds": 0},
        "white": {"player_id": "anna", "guest": False}, "black": {"player_id": "ben"},
        "result": "1-0", "finished_at": "2026-11-30T12:00:00Z"}
TURBO = {"competition_id": "tl-991", "kind": "turbo_live", "rated": True, "finished_at": "2026-11-30T12:10:00Z",
         "format": "10min",
         "players": [{"player_id": "anna", "agreement": 0.72, "votes": 31,
                      "team_games": {"won": 2, "drawn": 0, "lost": 1}, "top_ups": 0}]}
# The contract's uscf example once listed only p1 in players although p2 plays: the rule ("every player
# in a game is listed in players, once") wins, so docs/contract.md lists p2 (and the old form is rejected).
USCF_AS_WRITTEN = {"competition_id": "open-2026", "kind": "uscf", "rated": True, "finished_at": "2026-11-29T20:00:00Z",
                   "time_control": {"base_minutes": 90, "increment_seconds": 30},
                   "players": [{"player_id": "p1", "age": 15}],
                   "games": [{"round": 1, "white": "p1", "black": "p2", "result": "1-0"}]}
USCF = {**USCF_AS_WRITTEN, "players": [{"player_id": "p1", "age": 15}, {"player_id": "p2"}]}
FIDE = {**USCF, "competition_id": "fide-open-2026", "kind": "fide", "rating_type": "standard"}
LIST = {"system": "fide", "list": "2026-12", "closed_at": "2026-12-01T00:00:00Z"}
TEMPO = {"system": "chesstempo", "mode": "blitz", "player_id": "anna", "puzzle_id": "p-7731",
         "correct": True, "seconds": 12.5, "seconds_after_first_move": 4.0, "challenge": False,
         "attempted_at": "2026-11-30T12:00:00Z"}
KITE = {"system": "chesskite", "player_id": "anna", "puzzle_id": "k-12", "correct": True, "challenge": True,
        "puzzle_rating": 1240, "attempted_at": "2026-11-30T12:00:00Z"}
CLOSED = {"player_id": "cheat99", "reason": "fair_play", "closed_at": "2026-11-30T12:00:00Z"}
IMPORTED = {"player_id": "p1", "system": "fide", "category": "standard", "rating": 2012, "games": 57,
            "peak": 2080, "birth_year": 2009, "imported_at": "2026-11-01T00:00:00Z"}
CSR_IMPORT = {"player_id": "p1", "system": "csr", "category": "blitz", "rating": 1500, "imported_at": "2026-11-01T00:00:00Z"}
CHANGED = {"player_id": "anna", "system": "csr", "category": "blitz",
           "before": {"rating": 1500.0, "rd": 350.0, "volatility": 0.06},
           "after": {"rating": 1651.6, "rd": 290.5, "volatility": 0.059999},
           "delta": 151.6, "provisional": True, "floor": None, "games": 1, "version": 1,
           "cause": {"type": "game.finished", "source": "/game-server/eu-1", "id": "…", "ref": "g-81723"},
           "changed_at": "2026-11-30T12:00:00Z"}

VALID = {"game.finished": GAME, "event.finished": TURBO, "puzzle.attempted": TEMPO,
         "account.closed": CLOSED, "rating.imported": IMPORTED}


def envelope(type_: str, data, **attributes) -> dict:
    return {"specversion": "1.0", "id": "m-1", "source": "/game-server/eu-1", "type": type_,
            "time": "2026-11-30T12:00:05Z", "datacontenttype": "application/json", "data": data, **attributes}


def ce(type_: str, data, **attributes) -> bytes:
    return orjson.dumps(envelope(type_, data, **attributes))


def rejected(value: bytes | None, **kwargs) -> BadMessage:
    with pytest.raises(BadMessage) as info:
        decode(value, **kwargs)
    exc = info.value
    assert exc.error_class in ERROR_CLASSES
    assert exc.reason and "\n" not in exc.reason and len(exc.reason) < 400
    return exc


# --- Valid messages ---------------------------------------------------------------------------------


def test_the_game_example_decodes():
    m = decode(ce("game.finished", GAME))
    assert m == Message(
        source="/game-server/eu-1", id="m-1", type="game.finished", time="2026-11-30T12:00:00Z",
        payload=GameFinished(game_id="g-81723", rated=True, variant="standard",
                             time_control=TimeControl(base_seconds=300, increment_seconds=0),
                             white_id="anna", black_id="ben", result="1-0",
                             finished_at=datetime(2026, 11, 30, 12, tzinfo=UTC).timestamp()),
        ref="g-81723",
    )
    assert m.payload.white_guest is False and m.payload.black_guest is False
    assert type(m.payload.time_control.base_seconds) is int


def test_a_correspondence_game_and_guests_decode():
    g = decode(ce("game.finished", {**GAME, "time_control": {"days_per_move": 3},
                                    "black": {"player_id": "ben", "guest": True}})).payload
    assert g.time_control == TimeControl(days_per_move=3)
    assert (g.white_guest, g.black_guest) == (False, True)


def test_unrated_games_are_valid():
    for change in ({"rated": False}, {"variant": "chess960"}, {"white": {"player_id": "anna", "guest": True}}):
        assert decode(ce("game.finished", {**GAME, **change})).type == "game.finished"


def test_the_turbo_live_example_decodes():
    m = decode(ce("event.finished", TURBO))
    assert (m.type, m.ref, m.time) == ("event.finished", "tl-991", "2026-11-30T12:10:00Z")
    e = m.payload
    assert isinstance(e, EventFinished)
    assert (e.kind, e.rated, e.format, e.games) == ("turbo_live", True, "10min", ())
    assert e.players == (TurboPlayer("anna", 0.72, 31, TeamGames(2, 0, 1), 0),)
    assert e.finished_at == parse_time("2026-11-30T12:10:00Z")


def test_top_ups_default_to_zero():
    players = [{k: v for k, v in TURBO["players"][0].items() if k != "top_ups"}]
    assert decode(ce("event.finished", {**TURBO, "players": players})).payload.players[0].top_ups == 0


def test_the_uscf_example_decodes_with_every_player_listed():
    e = decode(ce("event.finished", USCF)).payload
    assert e.players == (EventPlayer("p1", age=15), EventPlayer("p2"))
    assert e.games == (EventGame(1, "p1", "p2", "1-0"),)
    assert (e.time_control_minutes, e.time_control_increment, e.rating_type) == (90.0, 30, None)


def test_the_uscf_example_as_written_in_contract_lists_too_few_players():
    exc = rejected(ce("event.finished", USCF_AS_WRITTEN))
    assert exc.error_class == "invalid_rule"
    assert exc.reason.startswith("data.games[0].black:") and "'p2'" in exc.reason


def test_a_fide_event_decodes_with_and_without_time_control():
    e = decode(ce("event.finished", FIDE)).payload
    assert (e.kind, e.rating_type, e.players[1].birth_year) == ("fide", "standard", None)
    bare = {k: v for k, v in FIDE.items() if k != "time_control"}
    e = decode(ce("event.finished", bare)).payload
    assert (e.time_control_minutes, e.time_control_increment) == (None, None)


def test_a_fide_rating_from_1000_is_a_listed_rating_on_a_list_before_march_2024():
    """The lowest FIDE rating was 1000 until the list of 2024-03 (docs/rules.md#fide): a 2023 list's 1200 is
    imported, a 2024-03 list's 1399 is not (test_bad_messages_are_rejected_with_their_class_and_field)."""
    for rating, month in [(1000, "2023-06"), (1200, "2024-02"), (1400, "2024-03")]:
        m = decode(ce("rating.imported", {**IMPORTED, "rating": rating, "imported_at": f"{month}-01T00:00:00Z"}))
        assert m.payload.rating == rating


def test_a_fide_event_carries_its_start_and_rating_period():
    """Issue 20, item 5: optional `started_at` (the list in force then rates it) and `rating_period`."""
    e = decode(ce("event.finished", {**FIDE, "started_at": "2026-11-25T10:00:00+01:00",
                                     "rating_period": "2026-12"})).payload
    assert (e.started_at, e.rating_period) == (parse_time("2026-11-25T09:00:00Z"), "2026-12")
    assert decode(ce("event.finished", FIDE)).payload.started_at is None
    same_time = decode(ce("event.finished", {**FIDE, "started_at": FIDE["finished_at"]})).payload
    assert same_time.started_at == same_time.finished_at


def test_the_puzzle_examples_decode():
    m = decode(ce("puzzle.attempted", TEMPO))
    assert m.ref == "p-7731"
    assert m.payload == PuzzleAttempted(system="chesstempo", player_id="anna", puzzle_id="p-7731", correct=True,
                                        attempted_at=parse_time("2026-11-30T12:00:00Z"), mode="blitz",
                                        seconds=12.5, seconds_after_first_move=4.0, challenge=False)
    k = decode(ce("puzzle.attempted", KITE)).payload
    assert (k.system, k.mode, k.challenge, k.puzzle_rating) == ("chesskite", None, True, 1240.0)
    assert type(k.puzzle_rating) is float
    plain = {key: v for key, v in KITE.items() if key != "challenge"}
    assert decode(ce("puzzle.attempted", plain)).payload.challenge is False
    standard = {key: v for key, v in TEMPO.items() if key not in ("seconds", "seconds_after_first_move")}
    assert decode(ce("puzzle.attempted", {**standard, "mode": "standard"})).payload.seconds is None


def test_the_account_closed_example_decodes():
    m = decode(ce("account.closed", CLOSED))
    assert (m.ref, m.time) == (None, "2026-11-30T12:00:00Z")
    assert m.payload == AccountClosed("cheat99", "fair_play", parse_time("2026-11-30T12:00:00Z"))


def test_the_rating_imported_example_decodes():
    m = decode(ce("rating.imported", IMPORTED))
    assert (m.ref, m.time) == (None, "2026-11-01T00:00:00Z")
    assert m.payload == RatingImported(player_id="p1", system="fide", category="standard", rating=2012.0,
                                       imported_at=parse_time("2026-11-01T00:00:00Z"), games=57, peak=2080.0,
                                       birth_year=2009)
    assert type(m.payload.rating) is float


@pytest.mark.parametrize("data", [
    {"player_id": "a", "system": "csr", "category": "correspondence", "rating": 1712.4, "rd": 85.0,
     "volatility": 0.059, "games": 140, "peak": 1750.0, "last_played_at": "2026-10-28T18:30:00+02:00",
     "imported_at": "2026-11-01T00:00:00Z"},
    {"player_id": "a", "system": "tsr", "category": "turbo", "rating": 1400, "rd": 300, "volatility": 0.06,
     "imported_at": "2026-11-01T00:00:00Z"},
    {"player_id": "a", "system": "uscf", "category": "quick", "rating": 1234.5, "games": 30, "wins": 10,
     "draws": 5, "losses": 15, "events": 4, "peak": 1300, "birth_year": 2010, "imported_at": "2026-11-01T00:00:00Z"},
    {"player_id": "a", "system": "chesstempo", "category": "blitz", "rating": 1800, "rd": 50, "games": 3,
     "imported_at": "2026-11-01T00:00:00Z"},
    {"player_id": "a", "system": "chesskite", "category": "puzzle", "rating": 0, "games": 0,
     "imported_at": "2026-11-01T00:00:00Z"},
])
def test_imports_of_every_system_decode(data):
    r = decode(ce("rating.imported", data)).payload
    assert (r.system, r.category, r.rating) == (data["system"], data["category"], float(data["rating"]))
    if "last_played_at" in data:
        assert r.last_played_at == parse_time("2026-10-28T16:30:00Z")


@pytest.mark.parametrize("name", INPUT_TYPES)
def test_every_example_of_every_schema_decodes(name):
    examples = load_schema(name)["examples"]
    assert examples
    for data in examples:
        assert decode(ce(name, data)).type == name


def test_the_envelope_example_decodes():
    (example,) = load_schema("envelope")["examples"]
    assert decode(orjson.dumps(example)).payload.game_id == "g-81723"


def test_the_output_example_is_a_valid_rating_changed():
    (example,) = load_schema("rating.changed")["examples"]
    assert example == CHANGED
    validate_output(envelope("rating.changed", CHANGED, subject="anna"))
    with pytest.raises(BadMessage) as info:
        validate_output(envelope("rating.changed", {**CHANGED, "system": "tsr"}, subject="anna"))
    assert info.value.reason.startswith("data.category:")
    with pytest.raises(BadMessage) as info:
        validate_output(envelope("rating.changed", CHANGED, subject="ben"))
    assert info.value.reason.startswith("subject:")


def test_unknown_attributes_and_fields_are_ignored():
    m = decode(ce("game.finished", {**GAME, "pgn": "1. e4", "white": {"player_id": "anna", "title": "GM"}},
                  traceparent="00-abc", subject="g-81723", dataschema="https://x/y"))
    assert m.payload.white_id == "anna"


def test_datacontenttype_is_optional_and_may_have_parameters():
    event = envelope("game.finished", GAME)
    del event["datacontenttype"]
    assert decode(orjson.dumps(event)).id == "m-1"
    assert decode(ce("game.finished", GAME, datacontenttype="application/json; charset=utf-8")).id == "m-1"


def test_integral_floats_are_integers_and_become_ints():
    g = decode(ce("game.finished", {**GAME, "time_control": {"base_seconds": 300.0, "increment_seconds": 2.0}}))
    assert g.payload.time_control == TimeControl(300, 2)
    assert type(g.payload.time_control.base_seconds) is int


def test_decode_accepts_bytearray_memoryview_and_str():
    raw = ce("game.finished", GAME)
    for value in (bytearray(raw), memoryview(raw), raw.decode()):
        assert decode(value).id == "m-1"


# --- Times ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text,normalized", [
    ("2026-11-30T12:00:00Z", "2026-11-30T12:00:00Z"),
    ("2026-11-30t12:00:00z", "2026-11-30T12:00:00Z"),
    ("2026-11-30T13:00:00+01:00", "2026-11-30T12:00:00Z"),
    ("2026-11-30T06:30:00-05:30", "2026-11-30T12:00:00Z"),
    ("2026-11-30T12:00:00-00:00", "2026-11-30T12:00:00Z"),
    ("2026-11-30T12:00:00.000Z", "2026-11-30T12:00:00Z"),
    ("2026-11-30T12:00:00.25Z", "2026-11-30T12:00:00.250000Z"),
    ("2026-11-30T12:00:00.1234567891Z", "2026-11-30T12:00:00.123456Z"),  # truncated to the microsecond
    ("2027-01-01T00:30:00+01:00", "2026-12-31T23:30:00Z"),
    ("2016-12-31T23:59:60Z", "2017-01-01T00:00:00Z"),  # a leap second: the next minute's first second
    ("2028-02-29T00:00:00Z", "2028-02-29T00:00:00Z"),
])
def test_cause_times_are_normalized_to_utc(text, normalized):
    # The envelope's time is the game's, as a game server sends it (a cause may not be more than a day
    # after its envelope's time: see test_hostile_input.py).
    m = decode(ce("game.finished", {**GAME, "finished_at": text}, time=text))
    assert m.time == normalized
    assert m.payload.finished_at == parse_time(text) == parse_time(normalized)
    assert format_time(m.payload.finished_at) == normalized


def test_each_type_takes_its_cause_time():
    cases = [("game.finished", GAME, "finished_at"), ("event.finished", TURBO, "finished_at"),
             ("puzzle.attempted", TEMPO, "attempted_at"), ("account.closed", CLOSED, "closed_at"),
             ("rating.imported", IMPORTED, "imported_at")]
    for type_, data, field in cases:
        m = decode(ce(type_, {**data, field: "2025-06-01T02:00:00.5+02:00"}, time="2030-01-01T00:00:00Z"))
        assert m.time == "2025-06-01T00:00:00.500000Z"
        assert getattr(m.payload, field) == parse_time("2025-06-01T00:00:00.5Z")


def test_format_time():
    assert format_time(0) == "1970-01-01T00:00:00Z"
    assert format_time(-0.5) == "1969-12-31T23:59:59.500000Z"
    assert format_time(1796040000.25) == "2026-11-30T12:00:00.250000Z"
    assert format_time(1796040000.9999996) == "2026-11-30T12:00:01Z"
    for bad in (math.nan, math.inf, -math.inf, 1e20):
        with pytest.raises(ValueError):
            format_time(bad)


@pytest.mark.parametrize("text", [
    "2026-11-30T12:00:00", "2026-11-30 12:00:00Z", "2026-11-30T12:00Z", "2026-11-30", "20261130T120000Z",
    "2026-W48-1T12:00:00Z", "2026-11-30T12:00:00+0100", "2026-11-30T12:00:00+24:00", "2026-02-30T00:00:00Z",
    "2026-13-01T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T12:60:00Z", "2026-11-30T12:00:61Z",
    "0000-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "٢٠٢٦-11-30T12:00:00Z",
    "2026-11-30T12:00:00Z\n", " 2026-11-30T12:00:00Z", "2026-11-30T12:00:00.Z", "",
])
def test_invalid_times_are_rejected(text):
    with pytest.raises(ValueError):
        parse_time(text)
    exc = rejected(ce("game.finished", {**GAME, "finished_at": text}))
    assert exc.error_class == "invalid_data" and exc.reason.startswith("data.finished_at:")
    exc = rejected(ce("game.finished", GAME, time=text))
    assert exc.error_class == "invalid_envelope" and exc.reason.startswith("time:")


@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1),
                    timezones=st.integers(-23 * 60 - 59, 23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))))
def test_times_round_trip(moment):
    text = moment.isoformat()
    utc = moment.astimezone(UTC).replace(tzinfo=None)
    expected = utc.isoformat(timespec="microseconds" if utc.microsecond else "seconds") + "Z"
    epoch = parse_time(text)
    assert epoch == moment.timestamp()
    assert format_time(epoch) == expected
    if epoch < times.MIN_TIME:  # parse_time takes any date; a message's times start in 1970
        assert rejected(ce("account.closed", {**CLOSED, "closed_at": text}, time=text)).error_class == "invalid_envelope"
        assert rejected(ce("account.closed", {**CLOSED, "closed_at": text})).error_class == "invalid_data"
        return
    m = decode(ce("account.closed", {**CLOSED, "closed_at": text}, time=text))
    assert (m.time, m.payload.closed_at) == (expected, epoch)


# --- Bad messages: the class and the field --------------------------------------------------------------


def game(**changes) -> bytes:
    return ce("game.finished", {**GAME, **changes})


def without(data: dict, *names: str) -> dict:
    return {k: v for k, v in data.items() if k not in names}


BAD = [
    # bytes, UTF-8, JSON
    (None, "invalid_json", "record value"),
    (b"", "invalid_json", "record value"),
    (b"{nope", "invalid_json", "record value"),
    (b'{"a": NaN}', "invalid_json", "record value"),
    (b'{"a": Infinity}', "invalid_json", "record value"),
    (b'{"a": 1e400}', "invalid_json", "record value"),
    (b'{"a": "\\ud800"}', "invalid_json", "record value"),
    (b'\xef\xbb\xbf{"a": 1}', "invalid_json", "record value"),
    (b"\xff\xfe not utf-8", "invalid_utf8", "record value"),
    (b'{"id": "\xed\xa0\x80"}', "invalid_utf8", "record value"),
    (b"{\xc3", "invalid_utf8", "record value"),
    # envelope
    (b"[1, 2]", "invalid_envelope", "envelope"),
    (b'"game.finished"', "invalid_envelope", "envelope"),
    (b"null", "invalid_envelope", "envelope"),
    (orjson.dumps(without(envelope("game.finished", GAME), "specversion")), "invalid_envelope", "specversion"),
    (ce("game.finished", GAME, specversion="0.3"), "invalid_envelope", "specversion"),
    (ce("game.finished", GAME, specversion=1.0), "invalid_envelope", "specversion"),
    (orjson.dumps(without(envelope("game.finished", GAME), "id")), "invalid_envelope", "id"),
    (ce("game.finished", GAME, id=""), "invalid_envelope", "id"),
    (ce("game.finished", GAME, id="x" * 129), "invalid_envelope", "id"),
    (ce("game.finished", GAME, id=7), "invalid_envelope", "id"),
    (ce("game.finished", GAME, id="a\x00b"), "invalid_envelope", "id"),
    (ce("game.finished", GAME, source=""), "invalid_envelope", "source"),
    (ce("game.finished", GAME, source="/" * 257), "invalid_envelope", "source"),
    (ce("game.finished", GAME, source="/a\x00"), "invalid_envelope", "source"),
    (orjson.dumps(without(envelope("game.finished", GAME), "type")), "invalid_envelope", "type"),
    (ce("game.finished", GAME, type=["game.finished"]), "invalid_envelope", "type"),
    (orjson.dumps(without(envelope("game.finished", GAME), "time")), "invalid_envelope", "time"),
    (ce("game.finished", GAME, time="yesterday"), "invalid_envelope", "time"),
    (ce("game.finished", GAME, time=1796040000), "invalid_envelope", "time"),
    (ce("game.finished", GAME, datacontenttype="text/plain"), "invalid_envelope", "datacontenttype"),
    (ce("game.finished", GAME, datacontenttype=None), "invalid_envelope", "datacontenttype"),
    (orjson.dumps(without(envelope("game.finished", GAME), "data")), "invalid_envelope", "data"),
    (ce("game.finished", [GAME]), "invalid_envelope", "data"),
    (ce("game.finished", None), "invalid_envelope", "data"),
    # type
    (ce("game.started", GAME), "unknown_type", "type"),
    (ce("", GAME), "invalid_envelope", "type"),
    (ce("rating.changed", CHANGED), "unknown_type", "type"),
    (ce("Game.Finished", GAME), "unknown_type", "type"),
    # game.finished
    (ce("game.finished", without(GAME, "game_id")), "invalid_data", "data.game_id"),
    (game(game_id=7), "invalid_data", "data.game_id"),
    (game(game_id=""), "invalid_data", "data.game_id"),
    (game(game_id="g" * 129), "invalid_data", "data.game_id"),
    (game(game_id="g\x00"), "invalid_data", "data.game_id"),
    (ce("game.finished", without(GAME, "rated")), "invalid_data", "data.rated"),
    (game(rated="yes"), "invalid_data", "data.rated"),
    (game(rated=1), "invalid_data", "data.rated"),
    (ce("game.finished", without(GAME, "variant")), "invalid_data", "data.variant"),
    (game(variant=""), "invalid_data", "data.variant"),
    (ce("game.finished", without(GAME, "time_control")), "invalid_data", "data.time_control"),
    (game(time_control=300), "invalid_data", "data.time_control"),
    (game(time_control={}), "invalid_data", "data.time_control"),
    (game(time_control={"base_seconds": 300}), "invalid_data", "data.time_control"),
    (game(time_control={"increment_seconds": 3}), "invalid_data", "data.time_control"),
    (game(time_control={"base_seconds": -1, "increment_seconds": 0}), "invalid_data", "data.time_control.base_seconds"),
    (game(time_control={"base_seconds": 1.5, "increment_seconds": 0}), "invalid_data", "data.time_control.base_seconds"),
    (game(time_control={"base_seconds": True, "increment_seconds": 0}), "invalid_data", "data.time_control.base_seconds"),
    (game(time_control={"base_seconds": 10**12, "increment_seconds": 0}), "invalid_data", "data.time_control.base_seconds"),
    (game(time_control={"base_seconds": 60, "increment_seconds": -2}), "invalid_data", "data.time_control.increment_seconds"),
    (game(time_control={"days_per_move": 0}), "invalid_data", "data.time_control.days_per_move"),
    (game(time_control={"days_per_move": "3"}), "invalid_data", "data.time_control.days_per_move"),
    (game(time_control={"days_per_move": 2, "base_seconds": 60}), "invalid_data", "data.time_control"),
    (game(time_control={"days_per_move": 2, "base_seconds": 60, "increment_seconds": 0}), "invalid_data", "data.time_control"),
    (game(time_control={"base_seconds": 60, "increment_seconds": 0, "delay": 2}), "invalid_data", "data.time_control"),
    (ce("game.finished", without(GAME, "white")), "invalid_data", "data.white"),
    (game(white="anna"), "invalid_data", "data.white"),
    (game(white={}), "invalid_data", "data.white.player_id"),
    (game(white={"player_id": ""}), "invalid_data", "data.white.player_id"),
    (game(white={"player_id": None}), "invalid_data", "data.white.player_id"),
    (game(white={"player_id": "a", "guest": 1}), "invalid_data", "data.white.guest"),
    (game(black={"player_id": "b", "guest": "no"}), "invalid_data", "data.black.guest"),
    (game(black={"player_id": "x" * 129}), "invalid_data", "data.black.player_id"),
    (game(black={"player_id": "b", "note": "\x00"}), "invalid_data", "data.black.note"),
    (ce("game.finished", without(GAME, "result")), "invalid_data", "data.result"),
    (game(result="2-0"), "invalid_data", "data.result"),
    (game(result="½-½"), "invalid_data", "data.result"),
    (game(result=1), "invalid_data", "data.result"),
    (ce("game.finished", without(GAME, "finished_at")), "invalid_data", "data.finished_at"),
    (game(finished_at="2026-11-30"), "invalid_data", "data.finished_at"),
    (game(finished_at=1796040000.0), "invalid_data", "data.finished_at"),
    (game(black={"player_id": "anna"}), "invalid_rule", "data.black.player_id"),
    # event.finished, common
    (ce("event.finished", without(TURBO, "competition_id")), "invalid_data", "data.competition_id"),
    (ce("event.finished", {**TURBO, "competition_id": ""}), "invalid_data", "data.competition_id"),
    (ce("event.finished", without(TURBO, "kind")), "invalid_data", "data.kind"),
    (ce("event.finished", {**TURBO, "kind": "arena"}), "invalid_data", "data.kind"),
    (ce("event.finished", {**TURBO, "rated": None}), "invalid_data", "data.rated"),
    (ce("event.finished", without(TURBO, "finished_at")), "invalid_data", "data.finished_at"),
    (ce("event.finished", {**TURBO, "finished_at": "2026-11-31T00:00:00Z"}), "invalid_data", "data.finished_at"),
    (ce("event.finished", without(TURBO, "players")), "invalid_data", "data.players"),
    (ce("event.finished", {**TURBO, "players": {"anna": {}}}), "invalid_data", "data.players"),
    # turbo_live
    (ce("event.finished", without(TURBO, "format")), "invalid_data", "data.format"),
    (ce("event.finished", {**TURBO, "format": "20min"}), "invalid_data", "data.format"),
    (ce("event.finished", {**TURBO, "games": []}), "invalid_data", "data.games"),
    (ce("event.finished", {**TURBO, "rating_type": "blitz"}), "invalid_data", "data.rating_type"),
    (ce("event.finished", {**TURBO, "time_control": USCF["time_control"]}), "invalid_data", "data.time_control"),
    (ce("event.finished", {**TURBO, "players": [{"player_id": "p1"}]}), "invalid_data", "data.players[0]"),
    (ce("event.finished", {**TURBO, "players": ["anna"]}), "invalid_data", "data.players[0]"),
    (ce("event.finished", {**TURBO, "players": [{**TURBO["players"][0], "agreement": 1.01}]}),
     "invalid_data", "data.players[0].agreement"),
    (ce("event.finished", {**TURBO, "players": [{**TURBO["players"][0], "agreement": -0.1}]}),
     "invalid_data", "data.players[0].agreement"),
    (ce("event.finished", {**TURBO, "players": [{**TURBO["players"][0], "agreement": "0.5"}]}),
     "invalid_data", "data.players[0].agreement"),
    (ce("event.finished", {**TURBO, "players": [{**TURBO["players"][0], "votes": -1}]}),
     "invalid_data", "data.players[0].votes"),
    (ce("event.finished", {**TURBO, "players": [{**TURBO["players"][0], "votes": 2.5}]}),
     "invalid_data", "data.players[0].votes"),
    (ce("event.finished", {**TURBO, "players": [{**TURBO["players"][0], "top_ups": 4}]}),
     "invalid_data", "data.players[0].top_ups"),
    (ce("event.finished", {**TURBO, "players": [{**TURBO["players"][0], "top_ups": -1}]}),
     "invalid_data", "data.players[0].top_ups"),
    (ce("event.finished", {**TURBO, "players": [without(TURBO["players"][0], "team_games")]}),
     "invalid_data", "data.players[0].team_games"),
    (ce("event.finished", {**TURBO, "players": [{**TURBO["players"][0], "team_games": {"won": 1, "drawn": 0}}]}),
     "invalid_data", "data.players[0].team_games.lost"),
    (ce("event.finished", {**TURBO, "players": [{**TURBO["players"][0], "team_games": {"won": 1, "drawn": -1, "lost": 0}}]}),
     "invalid_data", "data.players[0].team_games.drawn"),
    (ce("event.finished", {**TURBO, "players": TURBO["players"] * 2}), "invalid_rule", "data.players[1].player_id"),
    # uscf / fide
    (ce("event.finished", without(USCF, "games")), "invalid_data", "data.games"),
    (ce("event.finished", without(USCF, "time_control")), "invalid_data", "data.time_control"),
    (ce("event.finished", {**USCF, "format": "10min"}), "invalid_data", "data.format"),
    (ce("event.finished", {**USCF, "rating_type": "standard"}), "invalid_data", "data.rating_type"),
    (ce("event.finished", {**USCF, "time_control": {"base_minutes": 90}}), "invalid_data", "data.time_control.increment_seconds"),
    (ce("event.finished", {**USCF, "time_control": {"base_minutes": -5, "increment_seconds": 0}}),
     "invalid_data", "data.time_control.base_minutes"),
    (ce("event.finished", {**USCF, "time_control": {"base_seconds": 300, "increment_seconds": 0}}),
     "invalid_data", "data.time_control.base_minutes"),
    (ce("event.finished", {**USCF, "players": [{"player_id": "p1", "age": -1}, {"player_id": "p2"}]}),
     "invalid_data", "data.players[0].age"),
    (ce("event.finished", {**USCF, "players": [{"player_id": "p1", "age": 15.5}, {"player_id": "p2"}]}),
     "invalid_data", "data.players[0].age"),
    (ce("event.finished", {**USCF, "players": [{"player_id": "p1"}, {"player_id": "p2", "birth_year": "2009"}]}),
     "invalid_data", "data.players[1].birth_year"),
    (ce("event.finished", {**USCF, "players": [{"player_id": "p1"}, {"age": 30}]}), "invalid_data", "data.players[1].player_id"),
    (ce("event.finished", {**USCF, "games": [{"round": 0, "white": "p1", "black": "p2", "result": "1-0"}]}),
     "invalid_data", "data.games[0].round"),
    (ce("event.finished", {**USCF, "games": [{"round": 1, "white": "p1", "black": "p2", "result": "+/-"}]}),
     "invalid_data", "data.games[0].result"),
    (ce("event.finished", {**USCF, "games": [{"round": 1, "white": "p1", "result": "1-0"}]}),
     "invalid_data", "data.games[0].black"),
    (ce("event.finished", {**USCF, "games": [{"round": 1, "white": {"player_id": "p1"}, "black": "p2", "result": "1-0"}]}),
     "invalid_data", "data.games[0].white"),
    (ce("event.finished", {**USCF, "players": USCF["players"] + [{"player_id": "p1"}]}),
     "invalid_rule", "data.players[2].player_id"),
    (ce("event.finished", {**USCF, "games": [{"round": 1, "white": "p1", "black": "p1", "result": "1-0"}]}),
     "invalid_rule", "data.games[0].black"),
    (ce("event.finished", {**USCF, "games": [{"round": 1, "white": "p3", "black": "p2", "result": "1-0"}]}),
     "invalid_rule", "data.games[0].white"),
    (ce("event.finished", USCF_AS_WRITTEN), "invalid_rule", "data.games[0].black"),
    (ce("event.finished", without(FIDE, "rating_type")), "invalid_data", "data.rating_type"),
    (ce("event.finished", {**FIDE, "rating_type": "classical"}), "invalid_data", "data.rating_type"),
    (ce("event.finished", {**FIDE, "games": [{"round": 2, "white": "p2", "black": "p9", "result": "0-1"}]}),
     "invalid_rule", "data.games[0].black"),
    # puzzle.attempted
    (ce("puzzle.attempted", without(TEMPO, "system")), "invalid_data", "data.system"),
    (ce("puzzle.attempted", {**TEMPO, "system": "lichess"}), "invalid_data", "data.system"),
    (ce("puzzle.attempted", without(TEMPO, "player_id")), "invalid_data", "data.player_id"),
    (ce("puzzle.attempted", without(TEMPO, "puzzle_id")), "invalid_data", "data.puzzle_id"),
    (ce("puzzle.attempted", without(TEMPO, "correct")), "invalid_data", "data.correct"),
    (ce("puzzle.attempted", {**TEMPO, "correct": "true"}), "invalid_data", "data.correct"),
    (ce("puzzle.attempted", without(TEMPO, "attempted_at")), "invalid_data", "data.attempted_at"),
    (ce("puzzle.attempted", without(TEMPO, "mode")), "invalid_data", "data.mode"),
    (ce("puzzle.attempted", {**TEMPO, "mode": "rush"}), "invalid_data", "data.mode"),
    (ce("puzzle.attempted", without(TEMPO, "seconds")), "invalid_data", "data.seconds"),
    (ce("puzzle.attempted", without(TEMPO, "seconds_after_first_move")), "invalid_data", "data.seconds_after_first_move"),
    (ce("puzzle.attempted", {**TEMPO, "seconds": -0.5}), "invalid_data", "data.seconds"),
    (ce("puzzle.attempted", {**TEMPO, "seconds_after_first_move": "4"}), "invalid_data", "data.seconds_after_first_move"),
    (ce("puzzle.attempted", {**TEMPO, "challenge": "no"}), "invalid_data", "data.challenge"),
    (ce("puzzle.attempted", {**TEMPO, "puzzle_rating": 1500}), "invalid_data", "data.puzzle_rating"),
    (ce("puzzle.attempted", without(KITE, "puzzle_rating")), "invalid_data", "data.puzzle_rating"),
    (ce("puzzle.attempted", {**KITE, "puzzle_rating": "1240"}), "invalid_data", "data.puzzle_rating"),
    (ce("puzzle.attempted", {**KITE, "puzzle_rating": -1}), "invalid_data", "data.puzzle_rating"),
    (ce("puzzle.attempted", {**KITE, "mode": "blitz"}), "invalid_data", "data.mode"),
    # account.closed
    (ce("account.closed", without(CLOSED, "player_id")), "invalid_data", "data.player_id"),
    (ce("account.closed", {**CLOSED, "reason": "cheating"}), "invalid_data", "data.reason"),
    (ce("account.closed", without(CLOSED, "reason")), "invalid_data", "data.reason"),
    (ce("account.closed", {**CLOSED, "closed_at": "2026-11-30T12:00:00+25:00"}), "invalid_data", "data.closed_at"),
    # rating.imported: what every system refuses
    (ce("rating.imported", without(IMPORTED, "rating")), "invalid_data", "data.rating"),
    (ce("rating.imported", {**IMPORTED, "rating": "2012"}), "invalid_data", "data.rating"),
    (ce("rating.imported", without(IMPORTED, "system")), "invalid_data", "data.system"),
    (ce("rating.imported", {**IMPORTED, "system": "ecf"}), "invalid_data", "data.system"),
    (ce("rating.imported", without(IMPORTED, "category")), "invalid_data", "data.category"),
    (ce("rating.imported", without(IMPORTED, "imported_at")), "invalid_data", "data.imported_at"),
    (ce("rating.imported", without(IMPORTED, "player_id")), "invalid_data", "data.player_id"),
    (ce("rating.imported", {**IMPORTED, "games": -1}), "invalid_data", "data.games"),
    (ce("rating.imported", {**IMPORTED, "games": 1.5}), "invalid_data", "data.games"),
    (ce("rating.imported", {**IMPORTED, "birth_year": 1800}), "invalid_data", "data.birth_year"),
    (ce("rating.imported", {**IMPORTED, "last_played_at": "2026-11-01"}), "invalid_data", "data.last_played_at"),
    (ce("rating.imported", {**IMPORTED, "last_played_at": "2026-02-29T00:00:00Z"}), "invalid_data", "data.last_played_at"),
    (ce("rating.imported", {**CSR_IMPORT, "rating": 1e6}), "invalid_data", "data.rating"),
    (ce("rating.imported", {**CSR_IMPORT, "rating": -5}), "invalid_data", "data.rating"),
    # fide
    (ce("rating.imported", {**IMPORTED, "rating": 1399}), "invalid_rule", "data.rating"),  # 1400 from 2024-03
    (ce("rating.imported", {**IMPORTED, "rating": 1399, "imported_at": "2024-03-01T00:00:00Z"}), "invalid_rule",
     "data.rating"),
    (ce("rating.imported", {**IMPORTED, "rating": 999, "imported_at": "2023-06-01T00:00:00Z"}), "invalid_data",
     "data.rating"),
    (ce("rating.imported", {**IMPORTED, "rating": 2012.5}), "invalid_data", "data.rating"),
    (ce("rating.imported", {**IMPORTED, "rd": 50}), "invalid_data", "data.rd"),
    (ce("rating.imported", {**IMPORTED, "volatility": 0.06}), "invalid_data", "data.volatility"),
    (ce("rating.imported", {**IMPORTED, "category": "bullet"}), "invalid_data", "data.category"),
    (ce("rating.imported", {**IMPORTED, "wins": 3}), "invalid_data", "data.wins"),
    (ce("rating.imported", {**IMPORTED, "k": 30}), "invalid_data", "data.k"),
    (ce("rating.imported", {**IMPORTED, "ever_2400": "yes"}), "invalid_data", "data.ever_2400"),
    (ce("rating.imported", {**CSR_IMPORT, "k": 20}), "invalid_data", "data.k"),
    (ce("rating.imported", {**CSR_IMPORT, "ever_2300": True}), "invalid_data", "data.ever_2300"),
    (ce("event.finished", {**FIDE, "started_at": "2026-11-30T00:00:00Z"}), "invalid_rule", "data.started_at"),
    (ce("event.finished", {**FIDE, "started_at": "2026-11-31T00:00:00Z"}), "invalid_data", "data.started_at"),
    (ce("event.finished", {**FIDE, "rating_period": "2026-13"}), "invalid_data", "data.rating_period"),
    (ce("event.finished", {**FIDE, "rating_period": "2026-1"}), "invalid_data", "data.rating_period"),
    (ce("event.finished", {**USCF, "started_at": "2026-11-20T00:00:00Z"}), "invalid_data", "data.started_at"),
    (ce("event.finished", {**USCF, "rating_period": "2026-12"}), "invalid_data", "data.rating_period"),
    # rating.period_closed (a FIDE list)
    (ce("rating.period_closed", {**LIST, "system": "csr"}), "invalid_data", "data.system"),
    (ce("rating.period_closed", {**LIST, "list": "2026-12-01"}), "invalid_data", "data.list"),
    (ce("rating.period_closed", without(LIST, "closed_at")), "invalid_data", "data.closed_at"),
    # uscf
    (ce("rating.imported", {**IMPORTED, "system": "uscf", "category": "regular", "rd": 80}), "invalid_data", "data.rd"),
    (ce("rating.imported", {**IMPORTED, "system": "uscf", "category": "regular", "volatility": 0.1}), "invalid_data", "data.volatility"),
    (ce("rating.imported", {**IMPORTED, "system": "uscf", "category": "standard"}), "invalid_data", "data.category"),
    (ce("rating.imported", {**IMPORTED, "system": "uscf", "category": "quick", "losses": -3}), "invalid_data", "data.losses"),
    # csr / tsr
    (ce("rating.imported", {**CSR_IMPORT, "category": "turbo"}), "invalid_data", "data.category"),
    (ce("rating.imported", {**CSR_IMPORT, "rd": 0}), "invalid_data", "data.rd"),
    (ce("rating.imported", {**CSR_IMPORT, "rd": 30}), "invalid_data", "data.rd"),
    (ce("rating.imported", {**CSR_IMPORT, "volatility": 0}), "invalid_data", "data.volatility"),
    (ce("rating.imported", {**CSR_IMPORT, "events": 3}), "invalid_data", "data.events"),
    (ce("rating.imported", {**IMPORTED, "system": "tsr", "category": "turbo"}), "invalid_data", "data.peak"),
    (ce("rating.imported", {**without(IMPORTED, "peak", "birth_year"), "system": "tsr", "category": "blitz"}),
     "invalid_data", "data.category"),
    # chesstempo / chesskite
    (ce("rating.imported", {**without(IMPORTED, "peak", "birth_year"), "system": "chesstempo", "volatility": 0.06}),
     "invalid_data", "data.volatility"),
    (ce("rating.imported", {**without(IMPORTED, "peak", "birth_year"), "system": "chesstempo", "rd": 40}),
     "invalid_data", "data.rd"),
    (ce("rating.imported", {**without(IMPORTED, "birth_year"), "system": "chesstempo"}), "invalid_data", "data.peak"),
    (ce("rating.imported", {**without(IMPORTED, "peak", "birth_year"), "system": "chesstempo", "category": "rapid"}),
     "invalid_data", "data.category"),
    (ce("rating.imported", {**without(IMPORTED, "peak", "birth_year"), "system": "chesskite", "category": "puzzle", "rd": 60}),
     "invalid_data", "data.rd"),
    (ce("rating.imported", {**without(IMPORTED, "peak", "birth_year"), "system": "chesskite"}), "invalid_data", "data.category"),
]


@pytest.mark.parametrize("value,error_class,field", BAD)
def test_bad_messages_are_rejected_with_their_class_and_field(value, error_class, field):
    exc = rejected(value)
    assert exc.error_class == error_class, exc.reason
    # The reason starts with the field it is about ("data.white.player_id: ...").
    assert exc.reason.startswith(field) and exc.reason[len(field)] in ":.[", exc.reason


def test_reasons_read_well():
    assert rejected(game(result="2-0")).reason == "data.result: must be one of '1-0', '0-1', '1/2-1/2' (got '2-0')"
    assert rejected(game(white={"player_id": "ben"})).reason == (
        "data.black.player_id: a player may not meet himself ('ben' is also white)")
    assert rejected(game(rated="yes")).reason == "data.rated: must be a boolean, not a string"
    assert rejected(ce("game.finished", without(GAME, "variant"))).reason == "data.variant: is required"
    assert rejected(ce("rating.imported", {**IMPORTED, "rd": 50})).reason == "data.rd: fide is an Elo system: no RD"
    assert rejected(ce("game.finished", GAME, id="x" * 129)).reason == "id: must be at most 128 characters long (got 129)"
    assert "game.finished" in rejected(ce("game.started", GAME)).reason
    assert "UTF-8" in rejected(b"\xff").reason
    long = rejected(ce("x" * 10_000, GAME)).reason
    assert len(long) < 300


def test_size_limit():
    raw = ce("game.finished", GAME)
    assert decode(raw, max_bytes=len(raw)).id == "m-1"
    exc = rejected(raw, max_bytes=len(raw) - 1)
    assert exc.error_class == "too_large" and str(len(raw)) in exc.reason
    big = ce("game.finished", {**GAME, "pgn": "e4 " * 400_000})
    assert rejected(big).error_class == "too_large"


def test_nul_characters_are_rejected_only_where_they_are():
    assert decode(ce("game.finished", GAME, comment="a\x00b")).id == "m-1"  # an ignored attribute
    assert decode(ce("game.finished", {**GAME, "variant": "standard\\u0000"})).payload.variant == "standard\\u0000"
    exc = rejected(ce("game.finished", {**GAME, "extra": {"k\x00": 1}}))
    assert exc.error_class == "invalid_data" and exc.reason.startswith("data.extra.")
    exc = rejected(ce("event.finished", {**TURBO, "players": [{**TURBO["players"][0], "player_id": "a\x00"}]}))
    assert exc.reason.startswith("data.players[0].player_id: must not contain the NUL character")


def test_odd_field_names_and_deep_nesting_stay_readable():
    exc = rejected(ce("game.finished", {**GAME, "extra": {"line\nbreak" * 10: "\x00"}}))
    assert exc.reason.startswith("data.extra.'line\\nbreak") and "\n" not in exc.reason
    exc = rejected(ce("game.finished", {**GAME, "time_control": {"base_seconds": 1, "increment_seconds": 1}, "x": 1}
                      | {"time_control": {"days_per_move": 1, "\t": 2}}))
    assert exc.reason.startswith("data.time_control")
    deep = b'{"a":' * 1000 + b'"\\u0000"' + b"}" * 1000
    event = envelope("game.finished", GAME)
    raw = orjson.dumps(event)[:-2] + b',"deep":' + deep + b"}}"
    exc = rejected(raw)
    assert exc.error_class == "invalid_data" and exc.reason.startswith("data.deep.a.a.a")


def test_bad_message_is_an_exception_with_its_parts():
    exc = BadMessage("invalid_data", "data.result: wrong")
    assert (exc.error_class, exc.reason, str(exc)) == ("invalid_data", "data.result: wrong", "invalid_data: data.result: wrong")
    import pickle

    again = pickle.loads(pickle.dumps(exc))
    assert (again.error_class, again.reason) == (exc.error_class, exc.reason)


def test_the_schemas_are_self_contained():
    for name in ("envelope", *INPUT_TYPES, "rating.changed"):
        text = (schemas.SCHEMAS_DIR / f"{name}.json").read_text()
        assert '"$schema": "https://json-schema.org/draft/2020-12/schema"' in text
        assert '"$ref": "http' not in text


# --- Nothing but BadMessage, whatever comes in --------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=16,
)
EXAMPLES = [GAME, {**GAME, "time_control": {"days_per_move": 2}}, TURBO, USCF, FIDE, TEMPO, KITE, CLOSED, IMPORTED]
TYPES = ["game.finished", "game.finished", "event.finished", "event.finished", "event.finished",
         "puzzle.attempted", "puzzle.attempted", "account.closed", "rating.imported"]
INTERESTING = st.sampled_from([
    None, True, False, 0, -1, 1, 1.5, 3.0, 1e300, -1e300, 2**63, "", "\x00", "1-0", "fide", "blitz", "p1", "p2",
    "anna", "turbo_live", "uscf", "chesskite", "2026-11-30T12:00:00Z", "2026-02-30T12:00:00Z",
    "2026-11-30T12:00:60+14:00", [], {}, [{}], {"player_id": "anna"}, {"days_per_move": 1},
])


def _check(value: bytes) -> None:
    try:
        m = decode(value)
    except BadMessage as exc:
        assert exc.error_class in ERROR_CLASSES
        assert isinstance(exc.reason, str) and exc.reason
        exc.reason.encode("utf-8")  # it goes into a Kafka header
        return
    assert isinstance(m, Message) and m.type in INPUT_TYPES
    assert format_time(parse_time(m.time)) == m.time


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_random_bytes_never_raise_anything_but_bad_message(value):
    _check(value)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_random_json_never_raises_anything_but_bad_message(value):
    _check(orjson.dumps(value))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(EXAMPLES))), JSON)
def test_random_data_never_raises_anything_but_bad_message(index, data):
    _check(ce(TYPES[index], data))


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*prefix, i))


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=400)
@given(st.sampled_from(range(len(EXAMPLES))), st.data())
def test_mutated_valid_messages_never_raise_anything_but_bad_message(index, draw):
    event = envelope(TYPES[index], copy.deepcopy(EXAMPLES[index]))
    for _ in range(draw.draw(st.integers(1, 3))):
        path = draw.draw(st.sampled_from(list(_paths(event))[1:]))
        parent = event
        for step in path[:-1]:
            parent = parent[step]
        action = draw.draw(st.sampled_from(["replace", "interesting", "delete"]))
        if action == "delete":
            if isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent.pop(path[-1])
        else:
            parent[path[-1]] = copy.deepcopy(draw.draw(JSON if action == "replace" else INTERESTING))
    _check(orjson.dumps(event))


@pytest.mark.skipif(jsonschema is None, reason="jsonschema (the reference validator) is not installed")
@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(st.sampled_from(range(len(EXAMPLES))), st.data())
def test_the_schemas_agree_with_a_reference_validator(index, draw):
    """fastjsonschema (our hot path) and jsonschema (a 2020-12 reference) give the same verdict."""
    name = TYPES[index]
    data = copy.deepcopy(EXAMPLES[index])
    path = draw.draw(st.sampled_from(list(_paths(data))[1:]))
    parent = data
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = copy.deepcopy(draw.draw(INTERESTING))
    reference = jsonschema.Draft202012Validator(load_schema(name)).is_valid(data)
    try:
        decoding._TYPES[name][0](data)
        ours = True
    except schemas.SchemaError:
        ours = False
    assert ours == reference
