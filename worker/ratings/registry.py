"""Which rating system rates a message: built from the systems' own declarations.

Every module of worker.ratings that ends with `SYSTEM = RatingSystem(...)` is found here by itself
(nothing to add to a list). A module with dated parameter sets (`PARAMETER_SETS` and `declare`,
worker.ratings.parameters) is declared once per set, and a message is rated by the system of the set in
effect at its own time (its cause time); `SYSTEMS` holds each system as its latest set declares it. A
system with import rules also takes the `rating.imported` of its name (worker.ratings.imports), and a
system with a sweep the sweep's message (`rating.period_closed/<system>`,
applied by worker.engine.sweep). A message's kind is its type, with the discriminator that picks the
system for the types several systems share: `event.finished/<kind>`, `puzzle.attempted/<system>`,
`rating.imported/<system>`, `rating.period_closed/<system>`.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType

import worker.ratings
from worker.ratings import imports
from worker.ratings.inputs import Message
from worker.ratings.parameters import ParameterSet, Timeline, check_sets
from worker.ratings.system import RatingSystem

__all__ = ["DECLARED_SETS", "DECLARERS", "KINDS", "RATINGS", "REGISTRY", "SYSTEMS", "TIMELINES", "declare_systems",
           "every_declaration", "kind_of", "kinds", "rated_with", "system_for"]


@dataclass(frozen=True)
class Declarer:
    """How a module with dated parameter sets declares its system (worker.ratings.parameters)."""

    sets: tuple[ParameterSet, ...]  # its PARAMETER_SETS
    declare: Callable[..., RatingSystem]  # declare(chosen) or, with depends_on, declare(chosen, params_of)
    # other systems whose parameters its rules apply (fair play: CSR's floor); declare then gets
    # params_of(system, t): that system's parameters in effect at t
    depends_on: tuple[str, ...] = ()


def _modules() -> tuple[dict[str, Declarer], dict[str, RatingSystem]]:
    declarers: dict[str, Declarer] = {}
    fixed: dict[str, RatingSystem] = {}
    for info in pkgutil.iter_modules(worker.ratings.__path__):
        module = importlib.import_module(f"worker.ratings.{info.name}")
        system = getattr(module, "SYSTEM", None)
        if not isinstance(system, RatingSystem):
            continue
        sets = getattr(module, "PARAMETER_SETS", None)
        if sets is None:
            fixed[system.name] = system
            continue
        check_sets(system.name, sets)
        declarers[system.name] = Declarer(tuple(sets), module.declare, tuple(getattr(module, "DEPENDS_ON", ())))
    return dict(sorted(declarers.items())), fixed


#: system name -> how it is declared from its parameter sets (the systems with dated sets: all, today)
DECLARERS, _FIXED = _modules()

#: system name -> its parameter sets as declared
DECLARED_SETS: Mapping[str, tuple[ParameterSet, ...]] = MappingProxyType({n: d.sets for n, d in DECLARERS.items()})


def declare_systems(sets: Mapping[str, Sequence[ParameterSet]]) -> dict[str, Timeline[RatingSystem]]:
    """Every system declared from these parameter sets (system name -> its sets, in order), each in effect
    from its set's date: the registry's own, or a what-if's."""
    params = {name: Timeline([(s.starts_at, s.params) for s in chosen]) for name, chosen in sets.items()}

    def params_of(system: str, t: float):
        return params[system].at(t)

    found = {name: Timeline([(-math.inf, system)]) for name, system in _FIXED.items()}
    for name, chosen in sets.items():
        d = DECLARERS[name]
        found[name] = Timeline([(s.starts_at, d.declare(s, params_of) if d.depends_on else d.declare(s))
                                for s in chosen])
    return dict(sorted(found.items()))


#: system name -> the system as declared from each of its parameter sets, in effect from their dates.
TIMELINES: dict[str, Timeline[RatingSystem]] = declare_systems(DECLARED_SETS)

#: Every declared system (as its latest parameter set declares it), by name.
SYSTEMS: tuple[RatingSystem, ...] = tuple(t.items()[-1] for t in TIMELINES.values())

#: The systems that publish ratings of their own, by name, with their categories: what a person sees as a
#: player's ratings or a leaderboard (a system's internal records, such as Chess Tempo's repeat records,
#: are stored under other system names and are no rating).
RATINGS: Mapping[str, tuple[str, ...]] = MappingProxyType({s.name: s.categories for s in SYSTEMS if s.categories})


def _sweeper(system: RatingSystem) -> RatingSystem:
    """The `RatingSystem` that takes the system's sweep message: no players or keys of its own (the sweep
    finds them, worker.engine.sweep); its records are the system's."""
    sweep = system.sweep
    assert sweep is not None

    def not_in_a_batch(payload, states, closed):
        raise TypeError(f"{sweep.kind} is applied by worker.engine.sweep, not in a batch")

    return RatingSystem(system.name, (f"{sweep.kind}/{system.name}",), lambda p: [], lambda p: [], not_in_a_batch,
                        categories=system.categories, cause_time=sweep.cause_time, shown_rating=system.shown_rating,
                        starts_unrated=system.starts_unrated, sweep=sweep, inactive=system.inactive,
                        parameters=system.parameters)


def kinds(timelines: Mapping[str, Timeline[RatingSystem]]) -> dict[str, Timeline[RatingSystem]]:
    """Message kind -> the systems that rate it, from the systems' timelines (their imports and sweeps too)."""
    registry: dict[str, Timeline[RatingSystem]] = {}
    for timeline in timelines.values():
        system = timeline.first  # what it rates does not change with its parameters
        takers = [(kind, timeline) for kind in system.rates]
        if system.imports is not None:
            takers.append((f"{imports.KIND}/{system.name}", timeline.map(imports.importer)))
        if system.sweep is not None:
            takers.append((f"{system.sweep.kind}/{system.name}", timeline.map(_sweeper)))
        for kind, taker in takers:
            if kind in registry:
                raise ValueError(f"{kind}: rated by both {registry[kind].first.name} and {system.name}")
            registry[kind] = taker
    return registry


#: message kind -> the systems that rate it, each in effect from its parameter set's date.
KINDS: dict[str, Timeline[RatingSystem]] = kinds(TIMELINES)

#: message kind -> the system that rates it as its latest parameter set declares it (to look at: system_for
#: reads KINDS, by the message's time).
REGISTRY: Mapping[str, RatingSystem] = MappingProxyType({kind: t.items()[-1] for kind, t in KINDS.items()})


def kind_of(message: Message) -> str:
    payload = message.payload
    if message.type == "event.finished":
        return f"event.finished/{payload.kind}"
    if message.type in ("puzzle.attempted", "rating.imported", "rating.period_closed"):
        return f"{message.type}/{payload.system}"
    return message.type


# What-ifs (`rating-worker evaluate --params`): every system declared again with other parameters (timelines,
# kinds), in the context that asked for them only.
_WHAT_IF: ContextVar[tuple[dict[str, Timeline[RatingSystem]], dict[str, Timeline[RatingSystem]]] | None] = \
    ContextVar("what_if", default=None)


@contextmanager
def rated_with(chosen: Mapping[str, ParameterSet]) -> Iterator[None]:
    """Within this block (this context: the task and what it starts), rate every message of these systems
    with these parameter sets, whatever its time, and every system that applies their rules with them too (a
    fair-play refund, CSR's floor): a what-if of `rating-worker evaluate --params`."""
    unknown = sorted(set(chosen) - set(DECLARERS))
    if unknown:
        raise ValueError(f"no parameter sets to replace for {', '.join(unknown)} (systems: {', '.join(DECLARERS)})")
    timelines = declare_systems({**DECLARED_SETS, **{name: (s,) for name, s in chosen.items()}})
    token = _WHAT_IF.set((timelines, kinds(timelines)))
    try:
        yield
    finally:
        _WHAT_IF.reset(token)


def system_for(message: Message) -> RatingSystem | None:
    """The system that rates this message (declared from the parameter set in effect at the message's own
    time), or None when this version of the worker has none."""
    what_if = _WHAT_IF.get()
    timeline = (KINDS if what_if is None else what_if[1]).get(kind_of(message))
    if timeline is None:
        return None
    if timeline.only is not None:
        return timeline.only
    return timeline.at(timeline.first.cause_time(message.payload))


def every_declaration() -> list[RatingSystem]:
    """Every system as each of its parameter sets declares it, a what-if's in its context (what a store
    keeps for any of them: the history a fair-play window reads)."""
    what_if = _WHAT_IF.get()
    return [system for timeline in (TIMELINES if what_if is None else what_if[0]).values()
            for system in timeline.items()]
