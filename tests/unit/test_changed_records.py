"""What `rating.changed` says (issue 20, docs/rules.md#common-to-all-systems): `before` is what the player had,
`delta` is null when either side is, and every record the worker can publish validates against
schemas/rating.changed.json, by the worker's compiled schemas and by the reference validator."""

from __future__ import annotations

import calendar
import io

import orjson
import pytest
from jsonschema import Draft202012Validator

from worker.commands.replay import replay
from worker.contract.changed import change_record, validate_output
from worker.contract.schemas import load_schema
from worker.dev.streams import every_type
from worker.ratings import csr, fide
from worker.ratings.inputs import Message
from worker.ratings.state import RatingChange, RatingState, StateKey

T = "2026-03-01T00:00:00Z"


@pytest.fixture(scope="module")
def published() -> list[dict]:
    out = io.BytesIO()

    async def run():
        await replay(every_type(), out, errors=io.StringIO())

    import asyncio
    asyncio.run(run())
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


def test_every_record_of_every_type_validates_against_the_schema(published):
    envelope = Draft202012Validator(load_schema("envelope"))
    data = Draft202012Validator(load_schema("rating.changed"))
    kinds = set()
    for event in published:
        validate_output(event)
        envelope.validate(event)
        data.validate(event["data"])
        kinds.add((event["data"]["system"], event["data"]["cause"]["type"]))
    assert {"csr", "tsr", "uscf", "fide", "chesskite", "chesstempo"} == {s for s, _ in kinds}
    assert ("csr", "account.closed") in kinds and ("fide", "event.finished") in kinds
    assert ("fide", "rating.period_closed") in kinds
    records = [event["data"] for event in published]
    fide_records = [d for d in records if d["system"] == "fide"]
    assert all(isinstance(d["inactive"], bool) for d in fide_records)
    assert any(d["inactive"] for d in fide_records)  # the list marked someone
    assert all("inactive" not in d for d in records if d["system"] != "fide")


def test_delta_is_null_exactly_when_either_rating_is(published):
    for event in published:
        d = event["data"]
        either_null = d["before"]["rating"] is None or d["after"]["rating"] is None
        assert (d["delta"] is None) == either_null, d
        if not either_null:
            assert d["delta"] == pytest.approx(d["after"]["rating"] - d["before"]["rating"], abs=1e-9)


def test_a_first_fide_or_us_chess_rating_had_none_before(published):
    """docs/rules.md#common-to-all-systems: FIDE and US Chess have no rating before the first one (before.rating null, no delta)."""
    firsts = [e["data"] for e in published if e["data"]["system"] in ("fide", "uscf") and e["data"]["version"] == 1]
    assert {d["system"] for d in firsts} == {"fide", "uscf"}
    assert {d["cause"]["type"] for d in firsts} >= {"event.finished", "rating.imported"}
    for d in firsts:
        assert d["before"]["rating"] is None and d["delta"] is None, d


def test_the_other_systems_start_from_their_start_values(published):
    firsts = {(d["system"], d["before"]["rating"], d["before"]["rd"]) for e in published
              if (d := e["data"])["version"] == 1 and d["system"] not in ("fide", "uscf")
              and d["cause"]["type"] != "rating.imported"}
    assert ("csr", 1500.0, 350.0) in firsts and ("tsr", 1500.0, 350.0) in firsts
    assert ("chesstempo", 1500.0, 350.0) in firsts and ("chesskite", 1000.0, None) in firsts


def test_a_csr_import_into_a_new_category_starts_from_the_players_other_speeds(published):
    """q001 has played 6 rapid games and no blitz; his blitz rating is imported: `before` is the start a
    first blitz game would have had (docs/rules.md#csr: the start from other categories), not 1500/350."""
    (d,) = [e["data"] for e in published if e["data"]["player_id"] == "q001"
            and e["data"]["category"] == "blitz" and e["data"]["cause"]["type"] == "rating.imported"]
    rapid = [e["data"] for e in published if e["data"]["player_id"] == "q001" and e["data"]["category"] == "rapid"]
    last = rapid[-1]
    stored = {StateKey("q001", "csr", "rapid"): RatingState(last["after"]["rating"], last["after"]["rd"],
                                                            last["after"]["volatility"], last["games"])}
    start = csr.start_state("q001", "blitz", stored)
    assert last["games"] == 6 and start.rd == csr.PARAMS.other_start_rd
    assert (d["before"]["rating"], d["before"]["rd"]) == pytest.approx((start.rating, start.rd))
    assert d["delta"] == pytest.approx(1600 - start.rating)


def test_an_unlisting_has_no_delta():
    """A FIDE rating that falls under 1400 at a close becomes unlisted: after.rating null, delta null."""
    key = StateKey("d", "fide", "standard")
    before = RatingState(1395.0, games=100, version=6, extra={"published": 1410, "period": "2026-11", "k": 20,
                                                              "period_games": 2, "sum": -0.75, "pool": []})
    after = fide.close_period(before, calendar.timegm((2026, 12, 10, 12, 0, 0)))
    assert fide.listed_rating(after) is None
    message = Message("/s", "e1", "event.finished", T, None, "c1")
    record = change_record(message, RatingChange(key, before, after._replace(version=7), True, None), 0.0,
                           fide.listed_rating, starts_unrated=True)
    d = orjson.loads(record.payload)["data"]
    assert d["before"]["rating"] == pytest.approx(1395.0) and d["after"]["rating"] is None and d["delta"] is None
    assert record.delta == pytest.approx(0.0)  # the stored ratings' difference, for the history


def test_a_records_bytes_hold_no_more_memory_than_their_length():
    """A record keeps its rating.changed bytes from the plan to the publication (10,000 of them in a
    5,000-game batch): they must not keep the encoder's spare buffer with them (orjson's 4 or 8 KiB
    each filled the worker's memory, issue 21)."""
    import tracemalloc

    key = StateKey("p12345", "csr", "blitz")
    before = RatingState(1500.0, 80.0, 0.06, games=30, version=30)
    change = RatingChange(key, before, before._replace(rating=1512.25, rd=78.5, games=31, version=31), False, None)
    message = Message("/test/games", "game-123", "game.finished", T, None, "g-123")
    records = [change_record(message, change, 0.0)]  # the first call's one-off allocations, outside the count
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        records += [change_record(message, change, 0.0) for _ in range(1000)]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    payload = len(records[-1].payload)
    # Per record: its bytes (their length and the object's header) and the rest of the record, ~450 bytes
    # (its tuple, the event id, the before and after triples); with the encoder's buffer, 4,500 here.
    per_record = (held - start) / 1000
    assert per_record < payload + 1000, f"{per_record:.0f} bytes held a record for a {payload}-byte event"
