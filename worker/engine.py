"""Messages + states -> new states + changes, for a whole batch, through the state port.

The registry maps a message to the rating system that rates it; `apply_batch` is the one place
that drives a store (PostgreSQL in the worker, memory in `replay`), so both paths are the same code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from worker.changes import change_record, message_cause
from worker.ratings import csr
from worker.ratings.inputs import GameFinished, Message
from worker.ratings.state import Outcome, RatingState, StateKey
from worker.store.base import ChangeRecord, ProcessedMessage, StateStore


class BatchHooks(Protocol):
    """How a caller orders concurrent batches: called around the locks and before the commit."""

    async def before_lock(self) -> None: ...

    async def after_lock(self) -> None: ...

    async def before_commit(self) -> None: ...


class RatingSystem(Protocol):
    def players(self, payload) -> list[str]: ...

    def state_keys(self, payload) -> list[StateKey]: ...

    def cause_time(self, payload) -> float: ...

    def rate(self, payload, states: Mapping[StateKey, RatingState], closed: Mapping[str, float]) -> Outcome: ...


class CsrGames:
    """game.finished -> CSR."""

    def players(self, game: GameFinished) -> list[str]:
        return [game.white_id, game.black_id]

    def state_keys(self, game: GameFinished) -> list[StateKey]:
        return csr.state_keys(game)

    def cause_time(self, game: GameFinished) -> float:
        return game.finished_at

    def rate(self, game: GameFinished, states, closed) -> Outcome:
        return csr.rate_game(game, states, closed)


# Adding a system: a module in worker/ratings/, an adapter like CsrGames, one line here.
REGISTRY: dict[str, RatingSystem] = {
    "game.finished": CsrGames(),
}


def registry_key(message: Message) -> str:
    payload = message.payload
    if message.type == "event.finished":
        return f"event.finished/{payload.kind}"
    if message.type in ("puzzle.attempted", "rating.imported"):
        return f"{message.type}/{payload.system}"
    return message.type


def system_for(message: Message) -> RatingSystem | None:
    """The system that rates this message, or None when this version of the worker has none."""
    return REGISTRY.get(registry_key(message)) or REGISTRY.get(message.type)


@dataclass(slots=True)
class BatchResult:
    """Per input message, in order: applied | unrated | duplicate; plus what to publish."""

    outcomes: list[str] = field(default_factory=list)
    unrated_reasons: list[str | None] = field(default_factory=list)
    records: list[ChangeRecord] = field(default_factory=list)
    row_ids: list[int] = field(default_factory=list)


async def apply_batch(store: StateStore, messages: Sequence[Message], hooks: BatchHooks | None = None) -> BatchResult:
    """Apply messages in order in one store transaction (every message must have a system).

    Lock first, then dedupe: a message being applied by another worker holds its players' locks,
    so its processed id is visible by the time ours are granted. `hooks` let the pipeline keep
    several batches in flight without reordering them (see pipeline.BatchOrder).
    """
    systems = [system_for(m) for m in messages]
    players = sorted({p for m, s in zip(messages, systems, strict=True) for p in s.players(m.payload)})
    keys = {k for m, s in zip(messages, systems, strict=True) for k in s.state_keys(m.payload)}
    result = BatchResult()
    async with store.transaction() as tx:
        if hooks is not None:
            await hooks.before_lock()
        await tx.lock_players(players)
        if hooks is not None:
            await hooks.after_lock()
        done = await tx.processed([(m.source, m.id) for m in messages])
        closed = await tx.closed_accounts(players)
        working = await tx.load_states(keys)
        changed: dict[StateKey, RatingState] = {}
        processed: list[ProcessedMessage] = []
        for message, system in zip(messages, systems, strict=True):
            ident = (message.source, message.id)
            if ident in done:
                result.outcomes.append("duplicate")
                result.unrated_reasons.append(None)
                continue
            done.add(ident)
            outcome = system.rate(message.payload, working, closed)
            if outcome.changes:
                at = system.cause_time(message.payload)
                cause = message_cause(message)
                for ch in outcome.changes:
                    working[ch.key] = ch.after
                    changed[ch.key] = ch.after
                    result.records.append(change_record(message, ch, at, cause))
            status = "applied" if outcome.rated else "unrated"
            result.outcomes.append(status)
            result.unrated_reasons.append(outcome.unrated_reason)
            processed.append(ProcessedMessage(message.source, message.id, message.type, status))
        result.row_ids = await tx.save(changed, result.records, processed, {})
        if hooks is not None:
            await hooks.before_commit()
    return result
