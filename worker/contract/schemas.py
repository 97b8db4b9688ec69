"""The JSON Schemas of schemas/ (the public contract), loaded and compiled once.

Compiled with fastjsonschema, formats off: times are checked by the schemas' regex and then parsed
(worker.contract.times). No schema may refer to anything outside schemas/.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastjsonschema
import orjson

__all__ = ["IMPORTED_DATA_FIELDS", "SCHEMAS_DIR", "SchemaError", "compile_schema", "load_schema"]

SCHEMAS_DIR = Path(__file__).parent.parent / "schemas"
SchemaError = fastjsonschema.JsonSchemaValueException
# The `data` fields of rating.imported (schemas/rating.imported.json), in the contract's order: the columns
# of an import file (the importer reads them, worker.dev.streams writes them).
IMPORTED_DATA_FIELDS = (
    "player_id", "system", "category", "rating", "rd", "volatility", "games", "wins", "draws", "losses",
    "events", "peak", "birth_year", "last_played_at", "imported_at", "k", "ever_2300", "ever_2400",
)


def load_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one message type (`envelope`, `game.finished`, ..., `rating.changed`)."""
    return orjson.loads((SCHEMAS_DIR / f"{name}.json").read_bytes())


def _no_remote_refs(uri: str):
    raise ValueError(f"schemas/ must be self-contained: no remote $ref ({uri})")


def compile_schema(name: str) -> Callable[[Any], Any]:
    """The validator of one schema, compiled at its first call: compiling every schema took 45 ms of each
    command's start, and a stream that passes the fast checks (worker.contract.fastcheck) may never need
    some of them. The tests compile each one (tests/unit/test_schemas.py)."""
    compiled: Callable[[Any], Any] | None = None

    def validate(data: Any) -> Any:
        nonlocal compiled
        if compiled is None:
            compiled = _compile(name)
        return compiled(data)

    return validate


def _compile(name: str) -> Callable[[Any], Any]:
    # Formats off: times are checked by the schemas' regex, then parsed here. No remote $ref, ever.
    handlers = {"http": _no_remote_refs, "https": _no_remote_refs, "file": _no_remote_refs}
    return fastjsonschema.compile(load_schema(name), handlers=handlers, use_default=False, use_formats=False)

