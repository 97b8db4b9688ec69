"""Each input type is declared once (worker.contract.types) and everything else agrees with the declaration:
its schema exists and requires its cause's field, the decoder knows it, and the default topics are its."""

from __future__ import annotations

from pathlib import Path

import orjson

from worker.config import Config
from worker.contract import decode
from worker.contract.types import INPUT_TYPES, INPUTS, OUTPUT_TYPE, default_topics

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def test_every_input_type_has_its_schema_requiring_its_cause_field():
    for t in INPUTS:
        schema = orjson.loads((SCHEMAS / f"{t.name}.json").read_bytes())
        assert t.cause_field in schema["required"] and t.cause_field in schema["properties"], t.name
    assert (SCHEMAS / f"{OUTPUT_TYPE}.json").exists()


def test_the_decoder_and_the_configuration_are_built_from_the_declarations():
    assert decode.INPUT_TYPES == INPUT_TYPES and set(decode._TYPES) == set(INPUT_TYPES)
    assert Config().kafka_input_topics == default_topics() == tuple(t.default_topic for t in INPUTS if t.default_topic)
