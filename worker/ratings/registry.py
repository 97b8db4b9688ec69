"""Which rating system rates a message: built from the systems' own declarations.

Every module of worker.ratings that ends with `SYSTEM = RatingSystem(...)` is found here by itself
(nothing to add to a list); a system with import rules also takes the `rating.imported` of its name
(worker.ratings.imports), and a system with a sweep the sweep's message (`rating.period_closed/<system>`,
applied by worker.engine.sweep). A message's kind is its type, with the discriminator that picks the
system for the types several systems share: `event.finished/<kind>`, `puzzle.attempted/<system>`,
`rating.imported/<system>`, `rating.period_closed/<system>`.
"""

from __future__ import annotations

import importlib
import pkgutil

import worker.ratings
from worker.ratings import imports
from worker.ratings.inputs import Message
from worker.ratings.system import RatingSystem

__all__ = ["REGISTRY", "SYSTEMS", "kind_of", "system_for"]


def _declared() -> tuple[RatingSystem, ...]:
    found = []
    for info in pkgutil.iter_modules(worker.ratings.__path__):
        module = importlib.import_module(f"worker.ratings.{info.name}")
        system = getattr(module, "SYSTEM", None)
        if isinstance(system, RatingSystem):
            found.append(system)
    return tuple(sorted(found, key=lambda s: s.name))


#: Every declared system, by name.
SYSTEMS: tuple[RatingSystem, ...] = _declared()


def _sweeper(system: RatingSystem) -> RatingSystem:
    """The `RatingSystem` that takes the system's sweep message: no players or keys of its own (the sweep
    finds them, worker.engine.sweep); its records are the system's."""
    sweep = system.sweep
    assert sweep is not None

    def not_in_a_batch(payload, states, closed):
        raise TypeError(f"{sweep.kind} is applied by worker.engine.sweep, not in a batch")

    return RatingSystem(system.name, (f"{sweep.kind}/{system.name}",), lambda p: [], lambda p: [], not_in_a_batch,
                        categories=system.categories, cause_time=sweep.cause_time, shown_rating=system.shown_rating,
                        starts_unrated=system.starts_unrated, sweep=sweep, inactive=system.inactive)


def _registry() -> dict[str, RatingSystem]:
    registry: dict[str, RatingSystem] = {}
    for system in SYSTEMS:
        rates = list(system.rates)
        takers = [(kind, system) for kind in rates]
        if system.imports is not None:
            takers.append((f"{imports.KIND}/{system.name}", imports.importer(system)))
        if system.sweep is not None:
            takers.append((f"{system.sweep.kind}/{system.name}", _sweeper(system)))
        for kind, taker in takers:
            if kind in registry:
                raise ValueError(f"{kind}: rated by both {registry[kind].name} and {system.name}")
            registry[kind] = taker
    return registry


#: message kind -> the system that rates it.
REGISTRY: dict[str, RatingSystem] = _registry()


def kind_of(message: Message) -> str:
    payload = message.payload
    if message.type == "event.finished":
        return f"event.finished/{payload.kind}"
    if message.type in ("puzzle.attempted", "rating.imported", "rating.period_closed"):
        return f"{message.type}/{payload.system}"
    return message.type


def system_for(message: Message) -> RatingSystem | None:
    """The system that rates this message, or None when this version of the worker has none."""
    return REGISTRY.get(kind_of(message))
