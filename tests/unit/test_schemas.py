"""Every schema of schemas/ compiles (the validators compile at their first use, worker.contract.schemas:
this is where a schema that cannot compile is caught, not at the first message that needs it)."""

from __future__ import annotations

import pytest

from worker.contract.schemas import SCHEMAS_DIR, SchemaError, _compile, compile_schema

# The message schemas (openapi.json beside them is the read API's document, tests/unit/test_openapi.py)
NAMES = sorted(p.stem for p in SCHEMAS_DIR.glob("*.json") if p.stem != "openapi")


def test_the_contract_has_its_schemas():
    assert {"envelope", "game.finished", "rating.changed"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_schema_compiles(name):
    validate = _compile(name)
    with pytest.raises(SchemaError):
        validate([])  # no schema of the contract takes a list


def test_a_validator_validates_from_its_first_call_on():
    validate = compile_schema("envelope")
    with pytest.raises(SchemaError):
        validate({"specversion": "1.0"})
    with pytest.raises(SchemaError):
        validate({"specversion": "1.0"})
