"""The repository explains itself: no tracked file cites a document that sits only beside it (the rules,
the contract, the architecture notes and the research notes on the rating systems the project started
from). Their content is in docs/rules.md, docs/contract.md and docs/architecture.md, and every citation
points there; a published rating document is cited by its title and its own articles, listed in
docs/rules.md#sources, not by a section of the research notes.

What is allowed: a test may still *read* a file beside the repository as test data, with a path built
from its parts (`ROOT.parent / "shared" / name`), which is not a citation and is not matched here. Two
shipped migrations keep theirs: a migration is never edited once shipped (its checksum is recorded in
every database it ran on; worker/store/migrate.py refuses a changed file)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Spelled in parts, so that this file does not match itself.
OUTSIDE = tuple(name + ".md" for name in ("RULES", "CONTRACT", "ARCHITECTURE")) + ("../" + "shared", "specs" + "/")
# The research notes cited by a section: "specs", optionally "section", then its number.
NOTES_SECTION = re.compile(r"\bspecs(?: section)? \d", re.IGNORECASE)
SHIPPED_MIGRATIONS = {"worker/store/migrations/0002_leaderboards.sql", "worker/store/migrations/0006_fide_lists.sql"}


def tracked_text_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [name for name in listed.decode().split("\0") if name and (ROOT / name).is_file()]


def citations(text: str) -> list[str]:
    return [f"{n}: {line.strip()[:100]}" for n, line in enumerate(text.splitlines(), 1)
            if any(word in line for word in OUTSIDE) or NOTES_SECTION.search(line)]


def test_no_tracked_file_cites_a_document_outside_the_repository():
    found = {}
    for name in tracked_text_files():
        if name in SHIPPED_MIGRATIONS:
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        if lines := citations(text):
            found[name] = lines
    assert found == {}, "cite docs/rules.md#..., docs/contract.md#... or docs/architecture.md instead"


def test_the_check_finds_a_citation():
    cited = "see RULES" + ".md, CSR"
    assert citations(cited + "\nnothing here") == [f"1: {cited}"]
    assert citations('open("../' + 'shared/seeds/x")') != []
    assert citations("K (specs" + " section 2.3)") != []
    assert citations('"""Specs' + ' 1.5: PWe') != []
    assert citations("/work/shared/specs" + "/rating-systems-research.md") != []
    assert citations('ROOT.parent / "shared" / "specs" / name') == []  # test data, read by its parts
    assert citations("def test_specs_k_table():") == []
