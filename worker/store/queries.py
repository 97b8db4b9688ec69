"""Every SQL statement of the store, loaded by name from `sql/queries.sql` (procrastinate's habit).

    from worker.store.queries import QUERIES
    await conn.fetch(QUERIES["load_states"], ...)

A block of the file starts with `-- name: <name>`; the comment lines that follow document it and are
dropped. Each statement is sent as `/* <name> */ <sql>`, so that pg_stat_activity and the server log
say which one is running or waiting.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType

_BLOCK = re.compile(r"^-- name: *([A-Za-z_][A-Za-z0-9_]*) *$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """`-- name:` blocks -> {name: statement}; the header before the first block is ignored."""
    parts = _BLOCK.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = body.strip().splitlines()
        while lines and lines[0].lstrip().startswith("--"):
            lines.pop(0)
        # Drop trailing section banners and blank lines that belong to the next block.
        while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith("--")):
            lines.pop()
        sql = "\n".join(lines).strip().rstrip(";").strip()
        if not sql:
            raise ValueError(f"query {name!r} in queries.sql is empty")
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice in queries.sql")
        queries[name] = f"/* {name} */ {sql}"
    return queries


def _load() -> Mapping[str, str]:
    text = (resources.files("worker.store") / "sql" / "queries.sql").read_text(encoding="utf-8")
    return MappingProxyType(parse(text))


QUERIES: Mapping[str, str] = _load()
