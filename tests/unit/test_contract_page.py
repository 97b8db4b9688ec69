"""docs/contract.md and schemas/ say the same: every field a table of the page names is in the schema of
its section, and every field of each schema is in a table of its section (nothing undocumented).

A table names fields in its first column, in code type, several separated by commas (`a.b`, `c`); a
dotted name is a path, each of its steps a property of the schema. The envelope's attributes are checked
against schemas/envelope.json, the dead letters' headers against schemas/asyncapi.yaml."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "contract.md"
SCHEMAS = ROOT / "schemas"
TYPES = ("game.finished", "event.finished", "puzzle.attempted", "account.closed", "rating.imported",
         "rating.period_closed", "rating.changed")


def sections(text: str) -> dict[str, str]:
    """`## heading` -> the section's text."""
    parts = re.split(r"^## (.*)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def named_in_tables(section: str) -> set[str]:
    """The code spans of the first column of every table row (header and rule rows left out)."""
    names = set()
    rows = [line for line in section.splitlines() if line.startswith("|")]
    for row in rows:
        first = row.split("|")[1]
        if set(first.strip()) <= {"-"} or "`" not in first:
            continue
        names |= set(re.findall(r"`([^`]+)`", first))
    return names


def properties(schema) -> set[str]:
    """Every property name anywhere in a schema (its $defs, conditionals and items included)."""
    found = set()
    if isinstance(schema, dict):
        found |= set(schema.get("properties", {}))
        for value in schema.values():
            found |= properties(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= properties(value)
    return found


def schema_of(name: str) -> set[str]:
    return properties(json.loads((SCHEMAS / f"{name}.json").read_text()))


def section_for(heading_word: str) -> str:
    found = [body for heading, body in sections(PAGE.read_text(encoding="utf-8")).items() if heading_word in heading]
    assert len(found) == 1, f"docs/contract.md: one section for {heading_word}"
    return found[0]


@pytest.mark.parametrize("message_type", TYPES)
def test_every_field_named_is_in_the_schema_and_every_schema_field_is_named(message_type):
    named = named_in_tables(section_for(f"`{message_type}`"))
    steps = {step for name in named for step in name.split(".")}
    schema = schema_of(message_type)
    assert steps - schema == set(), f"named in docs/contract.md but not in schemas/{message_type}.json"
    assert schema - steps == set(), f"in schemas/{message_type}.json but in no table of its section"


def test_the_envelope_table_is_the_envelope_schema():
    assert named_in_tables(section_for("The envelope")) == schema_of("envelope")


def test_the_dead_letter_headers_are_those_of_the_asyncapi_document():
    document = yaml.safe_load((SCHEMAS / "asyncapi.yaml").read_text())
    headers = set(document["components"]["schemas"]["deadLetterHeaders"]["properties"])
    assert named_in_tables(section_for("dead letters")) == headers


def test_the_check_can_fail():
    """A field the schemas do not have is noticed."""
    assert "no_such_field" not in schema_of("game.finished")
    assert named_in_tables("| field | rule |\n|---|---|\n| `no_such_field` | x |\n") == {"no_such_field"}


def examples(section: str) -> list[dict]:
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, flags=re.S)]


@pytest.mark.parametrize("message_type", TYPES[:-1])
def test_every_example_of_an_input_type_is_a_message_the_worker_accepts(message_type):
    from worker.contract.decode import decode

    found = examples(section_for(f"`{message_type}`"))
    assert found, f"no example for {message_type}"
    for data in found:
        envelope = {"specversion": "1.0", "id": "example", "source": "/docs", "type": message_type,
                    "time": "2026-12-01T00:00:00Z", "data": data}
        assert decode(json.dumps(envelope).encode()).type == message_type


@pytest.mark.parametrize("message_type", TYPES[:-1])
def test_a_type_declared_without_a_ref_decodes_to_none(message_type):
    """worker.contract.types.WITHOUT_REF (how the history is searched for a message's changes) says what the
    decoders do: no ref exactly for those types."""
    from worker.contract.decode import decode
    from worker.contract.types import WITHOUT_REF

    for data in examples(section_for(f"`{message_type}`")):
        envelope = {"specversion": "1.0", "id": "example", "source": "/docs", "type": message_type,
                    "time": "2026-12-01T00:00:00Z", "data": data}
        assert (decode(json.dumps(envelope).encode()).ref is None) == (message_type in WITHOUT_REF)


def test_the_output_example_is_valid_against_its_schema():
    import jsonschema

    (example,) = examples(section_for("`rating.changed`"))
    schema = json.loads((SCHEMAS / "rating.changed.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(example)
