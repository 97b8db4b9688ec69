"""`rating.imported`: an existing rating brought in from elsewhere replaces one state (docs/rules.md#common-to-all-systems).

What the message leaves out takes the system's start values, as each system declares them (its
`SYSTEM.imports`, worker.ratings.system.Imports); the change counts like any other (next version, a
`rating.changed` with cause `rating.imported`). The message's fields have already been checked against
what each system can hold (worker.contract.decode). An import for an account closed for fair play is
ignored.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping

from worker.ratings.inputs import RatingImported
from worker.ratings.state import Outcome, RatingChange, RatingState, StateKey
from worker.ratings.system import Imports, RatingSystem

KIND = "rating.imported"


def players(imp: RatingImported) -> list[str]:
    return [imp.player_id]


def state_keys(imp: RatingImported) -> list[StateKey]:
    return [StateKey(imp.player_id, imp.system, imp.category)]


def rate_import(imp: RatingImported, states: Mapping[StateKey, RatingState], closed: Mapping[str, float],
                rules: Imports) -> Outcome:
    """Replace the state by the one the import stands for."""
    if imp.player_id in closed:
        return Outcome(unrated_reason="closed_account")
    key = StateKey(imp.player_id, imp.system, imp.category)
    stored = states.get(key)
    before = stored if stored is not None else rules.start(imp, states)
    after = rules.carried(stored, rules.state(imp, before.version + 1))
    provisional, floor = rules.provisional_and_floor(after)
    return Outcome(changes=(RatingChange(key, before, after, provisional, floor),))


def importer(system: RatingSystem) -> RatingSystem:
    """The `RatingSystem` that takes `rating.imported` for `system`, by its declared import rules."""
    rules = system.imports
    assert rules is not None

    def rate(imp: RatingImported, states: Mapping[StateKey, RatingState], closed: Mapping[str, float]) -> Outcome:
        return rate_import(imp, states, closed, rules)

    def more_keys(imp: RatingImported, loaded: Mapping[StateKey, RatingState]) -> list[StateKey]:
        if StateKey(imp.player_id, imp.system, imp.category) in loaded:
            return []
        return rules.more_keys(imp, loaded)

    return RatingSystem(system.name, (f"{KIND}/{system.name}",), players, state_keys, rate,
                        categories=system.categories, cause_time=operator.attrgetter("imported_at"),
                        shown_rating=system.shown_rating, more_keys=more_keys, starts_unrated=system.starts_unrated,
                        inactive=system.inactive, parameters=system.parameters)
