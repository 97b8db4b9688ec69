"""Each rating system declares itself (worker.ratings.system): the registry is built from the
declarations alone, and every place outside the engine that must know a system does (issue 19)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from worker.ratings.registry import REGISTRY, SYSTEMS
from worker.ratings.system import RatingSystem

ROOT = Path(__file__).resolve().parents[2]


def rated() -> list[RatingSystem]:
    return [s for s in SYSTEMS if s.categories]


def test_every_module_that_declares_a_system_is_in_the_registry():
    names = {s.name for s in SYSTEMS}
    assert names == {"csr", "tsr", "uscf", "fide", "chesskite", "chesstempo", "fairplay"}
    for system in SYSTEMS:
        for kind in system.rates:
            assert REGISTRY[kind] is system, kind
        if system.imports is not None:
            assert REGISTRY[f"rating.imported/{system.name}"].name == system.name


def test_every_system_with_imports_is_in_the_import_schema_and_no_other():
    schema = orjson.loads((ROOT / "schemas" / "rating.imported.json").read_bytes())
    enum = set(schema["properties"]["system"]["enum"])
    assert enum == {s.name for s in SYSTEMS if s.imports is not None}
    categories = set(schema["properties"]["category"]["enum"])
    for system in rated():
        assert set(system.categories) <= categories, system.name


def test_every_rated_system_has_its_section_in_docs_ratings_md():
    text = (ROOT / "docs" / "ratings.md").read_text()
    headings = {line[3:] for line in text.splitlines() if line.startswith("## ")}
    for system in rated():
        assert system.title and any(h == system.title or h.startswith(system.title + " ") for h in headings), (
            system.name, headings)


def test_every_rated_system_declares_its_docs_and_the_page_has_its_own_section():
    from worker.commands.ratings_page import render

    page = render()
    for system in rated():
        assert system.docs is not None, system.name
        section = system.docs()
        headings = [line for line in section.splitlines() if line.startswith("## ")]
        assert headings == [section.splitlines()[0]] and headings[0].startswith(f"## {system.title}"), (
            system.name, headings)  # one section, its own, under its title
        assert f"\n\n{section}\n\n" in page, system.name


def test_every_rated_system_has_a_leaderboard_rule_and_is_named_by_the_command():
    from worker.commands.leaderboard import leaderboard_systems

    # the live view: the newest migration that creates or replaces it (tests/integration/
    # test_leaderboard_rule.py checks its rule against every system's, in PostgreSQL)
    definition = re.compile(r"CREATE (OR REPLACE )?VIEW leaderboard ")
    view = [text for m in sorted((ROOT / "worker" / "store" / "migrations").glob("*.sql"))
            if definition.search(text := m.read_text())][-1]
    case = view[definition.search(view).start():view.index("AND NOT EXISTS")]
    in_view = set(re.findall(r"'([a-z]+)'", case))
    assert {s.name for s in rated()} <= in_view
    assert leaderboard_systems() == [s.name for s in rated()]
