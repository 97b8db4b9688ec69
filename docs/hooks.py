"""MkDocs hooks: the site's home page is README.md, and links written for the repository work in the site.

README.md and docs/ are written to be read on a code host, file beside file: README links `docs/x.md`,
a page links `../schemas/x.json` or `../worker/config.py`. The site holds docs/ only, so here:
- README.md becomes the site's index.md, its `docs/` prefix dropped from links;
- schemas/ is copied into the site (the contract's pages link its files, and a reader should reach them);
- a link to any other file of the repository (code, tests, deploy files) becomes its path in code type,
  after checking that the file exists: a warning otherwise, and `mkdocs build --strict` fails on it.
Links between pages, and their anchors, are left to MkDocs' own validation (mkdocs.yml, `validation`).
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]  # the repository
LOG = logging.getLogger("mkdocs.plugins.rating_worker")
# An inline link or image: [text](target) or [text](target "title"); the target has no spaces.
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def on_files(files, config):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "index.md", content=readme))
    for schema in sorted((ROOT / "schemas").iterdir()):
        files.append(File.generated(config, f"schemas/{schema.name}", abs_src_path=str(schema)))
    return files


def _repo_path(page_src: str) -> str:
    """Where the page's file is in the repository: index.md is README.md, the rest are under docs/."""
    return "README.md" if page_src == "index.md" else f"docs/{page_src}"


def _rewrite(match: re.Match, page_repo_path: str, page_src: str) -> str:
    bang, text, target = match.groups()
    path, _, anchor = target.partition("#")
    if not path or "://" in path or path.startswith("mailto:"):
        return match.group(0)
    in_repo = posixpath.normpath(posixpath.join(posixpath.dirname(page_repo_path), path))
    if in_repo.startswith("docs/"):
        site_path = in_repo[len("docs/"):]
    elif in_repo.startswith("schemas/"):
        site_path = in_repo
    else:
        if not (ROOT / in_repo).exists():
            LOG.warning("%s links %s, which is not in the repository", page_repo_path, target)
        shown = f"`{in_repo}`"
        return shown if text.strip("`") in (path, in_repo) else f"{text} ({shown})"
    relative = posixpath.relpath(site_path, posixpath.dirname(page_src) or ".")
    return f"{bang}[{text}]({relative}{'#' + anchor if anchor else ''})"


def on_page_markdown(markdown, page, config, files):
    src = page.file.src_uri
    repo_path = _repo_path(src)
    return LINK.sub(lambda m: _rewrite(m, repo_path, src), markdown)
