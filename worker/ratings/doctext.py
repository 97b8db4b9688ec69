"""The text docs/ratings.md is written in, shared by the systems' sections (each system's `docs`): a Markdown
table, and the page's ways of writing a rating and a change. Pure: values in, strings out."""

from __future__ import annotations

__all__ = ["plus_minus", "signed", "table"]


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def plus_minus(rating: float, rd: float) -> str:
    """A rating and its RD as a person reads them: "1843 ±60"."""
    return f"{round(rating)} ±{round(rd)}"


def signed(x: float) -> str:
    """A change, rounded, with its sign (a minus sign, not a hyphen): "+3", "−5", "0"."""
    n = round(x)
    return f"+{n}" if n > 0 else f"−{-n}" if n < 0 else "0"
