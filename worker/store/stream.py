"""The offline replay's store: the memory store's port with memory flat in the stream's length (issue 22).

`rating-worker replay` of a platform's history (tens of millions of messages) cannot keep what the memory
store keeps for tests and small runs: every change record with its output bytes and every processed
message. This store keeps only what the rules read:

- every state, packed (worker.store.packed: a third of a dict's memory), every fair-play closure and
  the key orders of sweeps;
- the history rows a rating system declares its queries may ask for (`RatingSystem.history_kept`: fair
  play's 30 days of CSR games), for that long plus the dedupe window before the stream's clock, as the
  GameSide rows the queries return, indexed by player: a closure up to the dedupe window late still finds
  every game it refunds;
- the ids of the messages processed within the dedupe window (default 7 days of message time), as 128-bit
  digests (about a third of the memory of the ids themselves).

`dedupe_window_s=None` keeps every id and every such history row: exact whatever the stream's order.

`watched`: the players whose games a history query can ask for, when known before the stream is applied
(replay of a file reads it once for its fair-play closures first), each with its first and last closure
time (None: every game). Then only the games with one of them are kept, from the
declared window before that time (30 days) until the closure is applied (a closed account is not refunded
again): exact whatever the order, and small (a platform's history holds tens of millions of games in any
30 days, its closures for fair play a few thousand accounts).

The clock is the latest message time applied (the median of each commit's times: the changes' cause times,
an unrated message's own time), moved as transactions commit; windows are trimmed a day at a time, so
each holds between its length and a day more (the dedupe window, when longer than 8 days, an eighth of
its length more: it is kept in at most nine spans, each a set that one lookup asks). What falls outside
a window changes the answer, never silently for the history: a duplicate delivered more than the window
after the first delivery is applied again (docs/operations.md, "The commands"), and a history query reaching
before the rows kept is recorded in `history_short` for replay to report.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence, Set
from hashlib import blake2b

from worker.contract.changed import ChangeRecord
from worker.ratings.inputs import GameSide
from worker.ratings.registry import every_declaration
from worker.ratings.state import RatingState, StateKey
from worker.ratings.system import HistoryKept, HistoryQuery
from worker.store.base import ProcessedMessage, Unpublished
from worker.store.memory import MemoryStore

__all__ = ["DEFAULT_DEDUPE_WINDOW_S", "StreamStore"]

DAY = 86400.0
DEFAULT_DEDUPE_WINDOW_S = 7 * DAY

Cause = tuple[str, str]  # (source, id) of the message that caused a change


def _digest(ident: tuple[str, str]) -> int:
    """A processed id as a 128-bit number: a collision (two messages taken for one) is as likely as
    guessing a random 128-bit key. The source's length keeps ("a", "bc") apart from ("ab", "c")."""
    source, message_id = ident
    text = f"{len(source)}:{source}{message_id}".encode()
    return int.from_bytes(blake2b(text, digest_size=16).digest(), "big")


class _Game:
    """The kept sides of one cause (a game), in the order they were written."""

    __slots__ = ("at", "cause_type", "seq", "sides", "system")

    def __init__(self, seq: int, system: str, cause_type: str, at: float) -> None:
        self.seq, self.system, self.cause_type, self.at = seq, system, cause_type, at
        self.sides: list[GameSide] = []


class StreamStore(MemoryStore):
    def __init__(self, dedupe_window_s: float | None = DEFAULT_DEDUPE_WINDOW_S,
                 kept: Sequence[HistoryKept] | None = None,
                 watched: Mapping[str, tuple[float, float] | None] | Set[str] | None = None) -> None:
        super().__init__(packed=True)
        # Not kept here: reading them would answer wrongly, so they are not there to read.
        del self.history, self.messages
        self.dedupe_window_s = dedupe_window_s
        declared = kept if kept is not None else [s.history_kept for s in every_declaration()
                                                  if s.history_kept is not None]
        self._kept = {(k.system, k.cause_type) for k in declared}
        window_s = max((k.seconds for k in declared), default=0.0)
        self._history_s = window_s + (dedupe_window_s or 0.0)
        # watched player -> the times between which his games are kept (None: nobody watched, a window of all)
        self.watched: dict[str, tuple[float, float]] | None = None
        if watched is not None:
            at = watched if isinstance(watched, Mapping) else dict.fromkeys(watched)
            self.watched = {p: (-math.inf, math.inf) if t is None else (t[0] - window_s, t[1]) for p, t in at.items()}
        self._watched_ever = frozenset(self.watched or ())
        self.clock = -math.inf  # the latest message time applied
        self._trimmed_day: int | None = None
        self._asked: dict[tuple[str, str], int] = {}  # the ids the last transaction asked about -> digests
        # The digests processed, by span of the clock (None: before any message time, or every id when no
        # window). A set a span, not one set of all: a span that leaves the window is freed whole, while one
        # big set with a day's ids taken out every day filled with deleted slots and was rebuilt every
        # few days (a second table of 32 MiB beside the first: the largest RSS of a long replay). A span
        # is a day, or an eighth of a window longer than 8 days: a lookup asks every span's set.
        window = dedupe_window_s or DAY
        self._id_span_s = DAY if window <= 8 * DAY else math.ceil(window / 8 / DAY) * DAY
        self._ids_by_span: dict[int | None, set[int]] = {}
        self._games: dict[Cause, _Game] = {}
        self._games_by_day: dict[int, list[Cause]] = {}
        self._games_of: dict[tuple[str, str], dict[Cause, None]] = {}  # (player, system) -> causes, in order
        self._seq = 0
        self._rows = 0
        self.history_from = -math.inf  # every kept row caused at this time or later is here
        # queries that asked for rows not kept (older than history_from, or of a player not watched), with
        # history_from when they asked
        self.history_short: dict[HistoryQuery, float] = {}

    @property
    def processed_ids(self) -> set[tuple[str, str]]:
        raise TypeError("StreamStore keeps digests of the processed ids, not the ids: use MemoryStore")

    def ids_kept(self) -> int:
        return sum(map(len, self._ids_by_span.values()))

    def games_kept(self) -> int:
        return len(self._games)

    # ---- what a transaction reads and keeps ----------------------------------------------------------

    def processed_among(self, ids: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        spans = list(self._ids_by_span.values())
        # Kept for the commit that follows, which stores the same ids' digests (a digest is 1% of a replay).
        self._asked = asked = {i: _digest(i) for i in ids}
        found = set()
        for ident, digest in asked.items():
            for kept in spans:
                if digest in kept:
                    found.add(ident)
                    break
        return found

    def games_with(self, query: HistoryQuery) -> list[GameSide]:
        """As the memory store answers it: both sides of the player's games in the window, in the order
        they were written (a refund sums in that order, and floats are summed exactly so)."""
        if (query.system, query.cause_type) not in self._kept:
            raise ValueError(f"history of {query.system}/{query.cause_type} is not kept: declare it in the "
                             f"system's history_kept")
        if query.since < self.history_from or (self.watched is not None and query.player_id not in self._watched_ever):
            self.history_short.setdefault(query, self.history_from)
        games = self._games
        found = [games[c] for c in self._games_of.get((query.player_id, query.system), ())]
        found = [g for g in found if g.cause_type == query.cause_type and query.since <= g.at <= query.until]
        found.sort(key=lambda g: g.seq)
        return [side for g in found for side in g.sides]

    def next_row_ids(self, n: int) -> list[int]:
        return list(range(self._rows + 1, self._rows + 1 + n))

    def commit(self, states: dict[StateKey, RatingState], records: list[ChangeRecord],
               processed: list[ProcessedMessage], closures: dict[str, float]) -> None:
        self._update(states, closures)
        self._rows += len(records)
        # The message times seen: a change's cause time, or an unrated message's own (an applied one
        # carries none, its changes do).
        times = [r.changed_at for r in records] + [p.at for p in processed if p.at is not None]
        if times:
            # The median, not the latest: one message dated far ahead (a producer's wrong clock) would
            # otherwise empty every window at once. A later clock only ever keeps more.
            self.clock = max(self.clock, statistics.median_low(times))
        self._keep_games(records)
        for player_id in closures:
            self._closed(player_id)
        # By the clock, not by its own time: a late message's id is kept a whole window too.
        span = None if self.dedupe_window_s is None or self.clock == -math.inf else self._span(self.clock)
        kept = self._ids_by_span.get(span)
        asked, self._asked = self._asked, {}
        for p in processed:
            if p.outcome != "duplicate":  # a duplicate's id is kept since its first delivery
                ident = (p.source, p.id)
                digest = asked.get(ident)
                if digest is None:
                    digest = _digest(ident)
                if kept is None:
                    kept = self._ids_by_span[span] = set()
                kept.add(digest)
        self._trim()

    def _keep_games(self, records: list[ChangeRecord]) -> None:
        if self.watched is not None and not self.watched:
            return  # no closure left to refund anyone
        kept = self._kept
        records = [r for r in records if (r.key.system, r.cause_type) in kept]
        if self.watched is None:
            for r in records:
                self._keep(r)
            return
        # Both sides of a game are written by one message, so in one commit: kept if one side is watched
        # and the game is in the window of his closure.
        by_cause: dict[Cause, list[ChangeRecord]] = {}
        for r in records:
            by_cause.setdefault((r.cause_source, r.cause_id), []).append(r)
        for sides in by_cause.values():
            if any(self._needed(r.key.player_id, r.changed_at) for r in sides):
                for r in sides:
                    self._keep(r)

    def _closed(self, player_id: str) -> None:
        """A watched account's closure was applied: a later one refunds nobody, so his games go, except
        those another watched account still needs."""
        if self.watched is None or self.watched.pop(player_id, None) is None:
            return
        for key in [k for k in self._games_of if k[0] == player_id]:
            for cause in list(self._games_of.get(key, ())):
                if not any(self._needed(side.player_id, side.at) for side in self._games[cause].sides):
                    self._drop(cause)

    def _drop(self, cause: Cause) -> None:
        """A kept game goes, from its players' indexes too."""
        game = self._games.pop(cause)
        for side in game.sides:
            of = self._games_of.get((side.player_id, game.system))
            if of is not None:
                of.pop(cause, None)
                if not of:
                    del self._games_of[(side.player_id, game.system)]

    def _needed(self, player_id: str, at: float) -> bool:
        """Whether a watched account's closure, not yet applied, may refund a game of his at this time."""
        span = self.watched.get(player_id)
        return span is not None and span[0] <= at <= span[1]

    def _keep(self, r: ChangeRecord) -> None:
        cause = (r.cause_source, r.cause_id)
        game = self._games.get(cause)
        if game is None:
            if r.changed_at < self.history_from:
                return  # older than what is kept: a query for it is reported as short anyway
            self._seq += 1
            game = self._games[cause] = _Game(self._seq, r.key.system, r.cause_type, r.changed_at)
            if self.watched is None:  # trimmed by day; a watched account's go with his closure
                self._games_by_day.setdefault(self._day(r.changed_at), []).append(cause)
        game.sides.append(GameSide(r.cause_source, r.cause_id, r.key.player_id, r.key.category, r.delta,
                                   r.changed_at))
        self._games_of.setdefault((r.key.player_id, r.key.system), {})[cause] = None

    def _trim(self) -> None:
        """Once a day of the clock: drop the ids and games whose day left their window."""
        if self.dedupe_window_s is None or self.clock == -math.inf:
            return
        today = self._day(self.clock)
        if today == self._trimmed_day:
            return
        self._trimmed_day = today
        undated = self._ids_by_span.pop(None, None)  # processed before any message had a time: from now on
        if undated:
            self._ids_by_span.setdefault(self._span(self.clock), set()).update(undated)
        first_span = self._span(self.clock - self.dedupe_window_s)
        for span in [s for s in self._ids_by_span if s < first_span]:
            del self._ids_by_span[span]
        if self.watched is not None:
            return  # a watched account's games go with his closure (_closed), not by day
        first_game_day = self._day(self.clock - self._history_s)
        for day in [d for d in self._games_by_day if d < first_game_day]:
            for cause in self._games_by_day.pop(day):
                self._drop(cause)
        self.history_from = max(self.history_from, first_game_day * DAY)

    @staticmethod
    def _day(t: float) -> int:
        return int(t // DAY)

    def _span(self, t: float) -> int:
        return int(t // self._id_span_s)

    # ---- no outbox offline -------------------------------------------------------------------------------

    async def mark_published(self, row_ids: Sequence[int]) -> None:
        return None

    async def unpublished(self, limit: int, older_than_seconds: float) -> list[Unpublished]:
        return []

    async def outbox_backlog(self) -> int:
        return 0

    def short_histories(self) -> dict[HistoryQuery, float]:
        short, self.history_short = self.history_short, {}
        return short
