"""`rating-worker docs`: writes the generated pages, docs/ratings.md (ratings_page.py, every number
computed by the engine) and docs/configuration.md (settings_page.py, the settings reference), and the read
API's OpenAPI document, schemas/openapi.json (worker.api.openapi)."""

from __future__ import annotations

import argparse
import sys

from worker.commands import ratings_page, settings_page


def main(args: argparse.Namespace) -> int:
    from worker.api.openapi import document_bytes

    for text, path in ((ratings_page.render(), args.output), (settings_page.render(), args.settings_output),
                       (document_bytes().decode(), args.openapi_output)):
        if path == "-":
            sys.stdout.write(text)
            continue
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:  # by default the paths are the repository's: run elsewhere, its folder is missing
            print(f"rating-worker docs: cannot write {path}: {exc.strerror} (run it from the repository's root, "
                  f"or give --output and --settings-output)", file=sys.stderr)
            return 2
        print(f"wrote {path}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("docs", help="regenerate docs/ratings.md, docs/configuration.md and schemas/openapi.json",
                       description=(
        "Compute every table of the rating documentation with the engine, the settings reference from the "
        "settings' own declarations and the read API's OpenAPI document from its routes' declarations, and write "
        "them, so the pages and the worker cannot disagree."))
    p.add_argument("--output", "-o", default="docs/ratings.md", help="where the ratings page goes ('-' for stdout)")
    p.add_argument("--settings-output", default="docs/configuration.md",
                   help="where the settings reference goes ('-' for stdout)")
    p.add_argument("--openapi-output", default="schemas/openapi.json",
                   help="where the read API's OpenAPI document goes ('-' for stdout)")
    p.set_defaults(func=main)
