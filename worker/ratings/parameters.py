"""Dated parameter sets (issue 22, item 4): a system's parameters are data with the time they apply from.

The seed says of TSR that its weights may still be tuned, "any change will be listed on this page with its
date, and TSRs earned before a change are kept, not recalculated". So a change of parameters is a new
`ParameterSet` at the end of the system's `PARAMETER_SETS`, with the time it takes effect from: each
message is rated with the set in effect at its own time (its cause time, never the wall clock), so that a
replay of the same history gives the same answer on any day, ratings earned before the change stay as
they were, and every `rating.changed` names the set that rated it (`parameters`). The first set of every
system is the seed's table, in effect from the beginning; `docs/ratings.md` lists every set with its date
(`rating-worker docs`).

A module with dated sets declares them, and how to build its `RatingSystem` from one of them:

    PARAMETER_SETS = (ParameterSet("tsr-1", None, TsrParams(), "the seed's table (TSR in beta)"),
                      ParameterSet("tsr-2", "2027-03-01T00:00:00Z", TsrParams(votes_needed=8), "8 votes"))
    def declare(chosen: ParameterSet) -> RatingSystem: ...
    SYSTEM = declare(PARAMETER_SETS[-1])

and the registry (worker.ratings.registry) picks, for each message, the system declared from the set in
effect at its time.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

__all__ = ["ParameterSet", "Timeline", "changed_values"]

T = TypeVar("T")


@dataclass(frozen=True)
class ParameterSet:
    """One set of a system's parameters and the time it rates messages from."""

    name: str  # "tsr-1": what a rating.changed's `parameters` says; never reused
    effective_from: str | None  # ISO 8601 UTC ("2027-03-01T00:00:00Z"); None: from the beginning (the first set)
    params: Any  # the system's parameters (a frozen dataclass: CsrParams, TsrParams, ...)
    note: str  # what changed and why, for docs/ratings.md

    @property
    def starts_at(self) -> float:
        """Epoch seconds of `effective_from` (-inf for the first set)."""
        if self.effective_from is None:
            return -math.inf
        return datetime.fromisoformat(self.effective_from.replace("Z", "+00:00")).timestamp()


class Timeline(Generic[T]):
    """Things in effect from given times on (a system declared from each parameter set): `at(t)` is the
    one in effect at t, the last whose start is at or before it."""

    __slots__ = ("_items", "_starts", "only")

    def __init__(self, dated: Sequence[tuple[float, T]]) -> None:
        starts = [start for start, _ in dated]
        if not dated or starts[0] != -math.inf:
            raise ValueError("the first of a timeline is in effect from the beginning")
        if any(b <= a for a, b in zip(starts, starts[1:], strict=False)):
            raise ValueError(f"a timeline's starts must increase: {starts}")
        self._starts = starts
        self._items = [item for _, item in dated]
        self.only = self._items[0] if len(self._items) == 1 else None  # the one thing, when it never changed

    def at(self, t: float) -> T:
        return self._items[bisect.bisect_right(self._starts, t) - 1]

    def items(self) -> list[T]:
        return list(self._items)

    @property
    def first(self) -> T:
        return self._items[0]

    def map(self, fn: Callable[[T], T]) -> Timeline[T]:
        return Timeline([(s, fn(item)) for s, item in zip(self._starts, self._items, strict=True)])


def check_sets(system: str, sets: Sequence[ParameterSet]) -> None:
    """A system's sets as the registry takes them: named `<system>-<n>`, dated in UTC and in order, the first
    from the beginning."""
    if not sets or sets[0].effective_from is not None:
        raise ValueError(f"{system}: the first parameter set is in effect from the beginning (effective_from None)")
    names = [s.name for s in sets]
    if len(set(names)) != len(names):
        raise ValueError(f"{system}: parameter set names must differ: {names}")
    for s in sets:
        if not re.fullmatch(rf"{re.escape(system)}-[0-9]+", s.name):
            raise ValueError(f"{system}: a parameter set is named {system}-<n> (rating.changed's pattern), "
                             f"not {s.name!r}")
        if s.effective_from is not None and not s.effective_from.endswith("Z"):
            raise ValueError(f"{system}: {s.name} takes effect from a UTC time ('...Z'), not {s.effective_from!r}: "
                             f"a time without a zone would move with the host's")
    if any(type(s.params) is not type(sets[0].params) for s in sets):
        raise ValueError(f"{system}: every parameter set holds the same kind of parameters")
    Timeline([(s.starts_at, s) for s in sets])  # their dates increase


def changed_values(before: Any, after: Any) -> list[tuple[str, Any, Any]]:
    """(field, old value, new value) of every parameter that differs between two sets' parameters."""
    return [(f.name, getattr(before, f.name), getattr(after, f.name)) for f in dataclasses.fields(after)
            if getattr(before, f.name) != getattr(after, f.name)]
