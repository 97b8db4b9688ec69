"""`rating.imported`: an existing rating brought in from elsewhere replaces one state (RULES.md, Common).

What the message leaves out takes the system's start values; the change counts like any other
(next version, a `rating.changed` with cause `rating.imported`). The message's fields have already
been checked against what each system can hold (worker.contract.decode).
"""

from __future__ import annotations

from collections.abc import Mapping

from worker.ratings import chesskite, chesstempo, csr, fide, tsr, uscf
from worker.ratings.inputs import RatingImported
from worker.ratings.state import Outcome, RatingChange, RatingState, StateKey


def players(imp: RatingImported) -> list[str]:
    return [imp.player_id]


def state_keys(imp: RatingImported) -> list[StateKey]:
    return [StateKey(imp.player_id, imp.system, imp.category)]


def imported_state(imp: RatingImported, version: int) -> RatingState:
    """The state the import stands for, with each system's start values for what it leaves out."""
    games = imp.games or 0
    last_at = imp.last_played_at
    if imp.system in (csr.SYSTEM, tsr.SYSTEM):
        p = csr.PARAMS if imp.system == csr.SYSTEM else tsr.PARAMS
        rd = p.start_rd if imp.rd is None else imp.rd
        vol = p.start_volatility if imp.volatility is None else imp.volatility
        return RatingState(imp.rating, rd, vol, games, imp.peak, last_at, version)
    if imp.system == uscf.SYSTEM:
        extra = {"wins": imp.wins or 0, "draws": imp.draws or 0, "losses": imp.losses or 0, "events3": imp.events or 0}
        return RatingState(imp.rating, None, None, games, imp.peak, last_at, version, extra)
    if imp.system == fide.SYSTEM:
        # A published list rating with no open period (fide.view reads a state without "published" so).
        extra = {"birth_year": imp.birth_year} if imp.birth_year is not None else None
        return RatingState(float(imp.rating), None, None, games, imp.peak, last_at, version, extra)
    if imp.system == chesstempo.SYSTEM:
        rd = chesstempo.PARAMS.start_rd if imp.rd is None else imp.rd
        return RatingState(imp.rating, rd, None, games, None, last_at, version)
    return RatingState(imp.rating, None, None, games, None, last_at, version)  # chesskite


def _provisional_and_floor(system: str, state: RatingState) -> tuple[bool, float | None]:
    if system == csr.SYSTEM:
        return csr.is_provisional(state.rd), csr.floor_for_peak(state.peak)
    if system == tsr.SYSTEM:
        return state.rd > tsr.PARAMS.provisional_above, None
    if system == uscf.SYSTEM:
        return state.games <= uscf.PARAMS.established_after, uscf.floor_of(state)
    if system == chesstempo.SYSTEM:
        return chesstempo.is_provisional(state.rd), None
    return False, None


def _before(imp: RatingImported, states: Mapping[StateKey, RatingState]) -> RatingState:
    stored = states.get(StateKey(imp.player_id, imp.system, imp.category))
    if stored is not None:
        return stored
    if imp.system == chesskite.SYSTEM:
        return chesskite.start_state()
    if imp.system == chesstempo.SYSTEM:
        return chesstempo.start_state()
    if imp.system in (csr.SYSTEM, tsr.SYSTEM):
        p = csr.PARAMS if imp.system == csr.SYSTEM else tsr.PARAMS
        return RatingState(p.start_rating, p.start_rd, p.start_volatility)
    return RatingState(0.0)  # US Chess and FIDE: no rating before


def rate_import(imp: RatingImported, states: Mapping[StateKey, RatingState], closed: Mapping[str, float] = {}) -> Outcome:  # noqa: B006
    """Replace the state; an import for an account closed for fair play is ignored (RULES.md)."""
    if imp.player_id in closed:
        return Outcome(unrated_reason="closed_account")
    before = _before(imp, states)
    after = imported_state(imp, before.version + 1)
    provisional, floor = _provisional_and_floor(imp.system, after)
    key = StateKey(imp.player_id, imp.system, imp.category)
    return Outcome(changes=(RatingChange(key, before, after, provisional, floor),))
