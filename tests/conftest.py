"""Fixtures shared by every test directory: one embedded PostgreSQL and one broker per session (the
helpers live in tests/integration/harness.py). Declared here, once, so that the integration and deploy
tests share the same pair instead of each starting its own.

Every test is marked with the kind of its directory (pyproject.toml declares them), so that `-m`
selects by kind: tests/unit -> unit, tests/property -> property, tests/integration -> integration,
tests/deploy -> deploy; the tests directly in tests/ (test_architecture.py) are unit tests.
"""

from pathlib import Path

import pytest

from tests.integration.harness import broker, database_url, postgres, template_db, topics  # noqa: F401

_HERE = Path(__file__).parent
_KINDS = {"unit": "unit", "property": "property", "integration": "integration", "deploy": "deploy"}


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        rel = Path(item.fspath).resolve().relative_to(_HERE.resolve())
        kind = _KINDS.get(rel.parts[0], "unit") if len(rel.parts) > 1 else "unit"
        item.add_marker(getattr(pytest.mark, kind))
