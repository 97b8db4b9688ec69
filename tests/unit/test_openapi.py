"""The read API's OpenAPI document (issue 40, item 2): the committed schemas/openapi.json is the one the
API serves (`rating-worker docs` writes it), a valid OpenAPI 3.1 document, whose history items are
rating.changed's own schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openapi_spec_validator import validate

from worker.api import openapi
from worker.ratings.registry import RATINGS

COMMITTED = Path(__file__).resolve().parents[2] / "schemas" / "openapi.json"


def test_the_committed_document_is_the_served_one():
    assert COMMITTED.read_bytes() == openapi.document_bytes(), "schemas/openapi.json is stale: run `rating-worker docs`"


def test_it_is_a_valid_openapi_3_1_document():
    document = json.loads(COMMITTED.read_text())
    assert document["openapi"].startswith("3.1")
    validate(document)


def test_a_broken_document_is_refused():
    """The validator can fail: a path parameter the path does not declare."""
    document = openapi.document()
    document["paths"]["/v1/players/{player_id}"]["get"]["parameters"] = []
    with pytest.raises(Exception, match="player_id"):
        validate(document)


def test_the_public_fields_are_there():
    """The contract's names (issue 40): fields may be added, none renamed."""
    schemas = openapi.document()["components"]["schemas"]
    assert {"system", "category", "rating", "rd", "volatility", "provisional", "floor", "peak", "games", "version",
            "last_played_at", "rank", "percentile", "inactive"} <= set(schemas["Rating"]["properties"])
    assert {"rank", "player_id", "rating", "rd", "games", "last_played_at"} <= set(
        schemas["Leaderboard"]["properties"]["items"]["items"]["properties"])
    assert {"status", "reason", "explanation", "changes", "left_out"} <= set(schemas["Message"]["properties"])
    assert schemas["History"]["properties"]["items"]["items"] == {"$ref": "#/components/schemas/RatingChanged"}
    assert schemas["Rating"]["properties"]["system"]["enum"] == list(RATINGS)
