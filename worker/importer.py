"""`rating-worker import FILE`: bring existing ratings in as `rating.imported` (issue 12; being built)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser("import", help="import existing ratings from a CSV or JSON lines file")
    p.add_argument("file")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    raise SystemExit("rating-worker import: not built yet")
