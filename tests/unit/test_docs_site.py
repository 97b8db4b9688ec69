"""The documentation site builds with `mkdocs build --strict`: a link to a missing page, file or anchor in
README.md or docs/ fails the suite. And the check itself can fail: a copy of the docs with one broken link
(or anchor) does not build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Not --quiet: it silences the warnings that --strict counts, and a broken link then builds.
MKDOCS = [sys.executable, "-m", "mkdocs", "build", "--strict"]
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about its successor, not a problem of ours


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*MKDOCS, "--config-file", str(config), "--site-dir", str(site)],
                          cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)


def test_the_site_builds_strictly(tmp_path):
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "index.html").exists(), "README.md is the site's home page"
    assert (tmp_path / "site" / "schemas" / "asyncapi.yaml").exists(), "the schemas are in the site"


@pytest.mark.parametrize("broken", [
    "[a page that is not there](nowhere.md)",
    "[an anchor that is not there](operations.md#no-such-section)",
    "[a file of the repository that is not there](../worker/no_such_module.py)",
])
def test_a_broken_link_fails_the_build(tmp_path, broken):
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    page = docs / "operations.md"
    page.write_text(page.read_text(encoding="utf-8") + f"\n{broken}\n", encoding="utf-8")
    config = tmp_path / "mkdocs.yml"
    # The project's own configuration, read from the copy's docs (hooks and theme as they are).
    config.write_text(f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {docs}\nhooks:\n  - {ROOT / 'docs' / 'hooks.py'}\n")
    done = build(config, tmp_path / "site")
    assert done.returncode != 0, f"{broken} was not reported"
