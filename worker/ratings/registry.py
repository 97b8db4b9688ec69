"""Which rating system rates a message: built from the systems' own declarations.

Every module of worker.ratings that ends with `SYSTEM = RatingSystem(...)` is found here by itself
(nothing to add to a list); a system with import rules also takes the `rating.imported` of its name
(worker.ratings.imports). A message's kind is its type, with the discriminator that picks the system
for the types several systems share: `event.finished/<kind>`, `puzzle.attempted/<system>`,
`rating.imported/<system>`.
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


def _registry() -> dict[str, RatingSystem]:
    registry: dict[str, RatingSystem] = {}
    for system in SYSTEMS:
        rates = list(system.rates)
        takers = [(kind, system) for kind in rates]
        if system.imports is not None:
            takers.append((f"{imports.KIND}/{system.name}", imports.importer(system)))
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
    if message.type in ("puzzle.attempted", "rating.imported"):
        return f"{message.type}/{payload.system}"
    return message.type


def system_for(message: Message) -> RatingSystem | None:
    """The system that rates this message, or None when this version of the worker has none."""
    return REGISTRY.get(kind_of(message))
