"""A platform's data as after N days, as rows (the pure part of `./dev bench lifecycle`): the processed
ids and the history its games left, the ratings and players they made, and the stream of the days after.

The model is the realistic case's (worker.dev.streams.games): two players drawn at random, a time control
of TCS, a random result. The keys are a platform's, not a test's: every CloudEvent id is a random UUID
(v4) from one of 8 game servers, every game id (cause_ref) another, so their index entries land on
random pages as a platform's would. Games come in time order, `spacing` seconds apart, over the `days`
before `end`; each game gives one processed id and two history rows, whose versions count per rating
from 1 without a gap, and `ratings` ends at each rating's last version, so that the worker continues
them. Players are named as worker.dev.streams names them (p000, p001, ...): the stream's players are
the first of them. Ratings move by an Elo step and RDs shrink towards the floor: values of a real row's
shape and size (history rows keep columns, no payload, as the worker writes them since migration 0003).
"""

from __future__ import annotations

import random
import uuid
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from worker.contract.changed import change_id
from worker.dev.streams import TCS, game_event
from worker.ratings import csr
from worker.ratings.inputs import TimeControl

SOURCES = tuple(f"/game-servers/gs-{k}" for k in range(1, 9))
RESULTS = ("1-0", "0-1", "1/2-1/2")
CATEGORIES = ("bullet", "blitz", "rapid", "classical", "correspondence")
#: the category of each of TCS (csr.category), by index
TC_CATEGORY = tuple(CATEGORIES.index(csr.category(TimeControl(**tc))) for tc in TCS)
PARAMETERS = "csr-1"
DAY = 86400.0

PROCESSED_COLUMNS = ("source", "id", "type", "outcome", "processed_at", "ref", "duplicates")
CHANGE_COLUMNS = ("id", "event_id", "player_id", "system", "category", "version", "rating", "delta", "cause_type",
                  "cause_source", "cause_id", "cause_ref", "changed_at", "created_at", "before_rating", "before_rd",
                  "before_volatility", "after_rating", "after_rd", "after_volatility", "provisional", "floor",
                  "games", "cause_time", "parameters")
RATING_COLUMNS = ("player_id", "system", "category", "rating", "rd", "volatility", "games", "peak", "last_at",
                  "version")


def player_name(i: int) -> str:
    """worker.dev.streams' name of player i (and bench/common.py prefill's)."""
    return f"p{i:03d}"


def random_uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


@dataclass(frozen=True)
class Plan:
    """What the grown database holds: `games_per_day` games a day for `days` days before `end` (epoch
    seconds) among `players` players; `seed` makes the same plan the same rows."""

    games_per_day: int
    days: int
    players: int
    end: float
    seed: int = 42

    @property
    def games(self) -> int:
        return self.games_per_day * self.days

    @property
    def spacing(self) -> float:
        return DAY / self.games_per_day

    @property
    def start(self) -> float:
        return self.end - self.days * DAY

    def key(self) -> str:
        """What identifies the rows (`end` aside: a cached build is reused whatever day it was built)."""
        return f"{self.games_per_day}x{self.days}d-{self.players}p-s{self.seed}"


def _stamp(at: float) -> datetime:
    return datetime.fromtimestamp(at, UTC)


class Histories:
    """Every rating's state as the games go: its version (= games), rating, RD, peak and last change."""

    def __init__(self, players: int) -> None:
        slots = players * len(CATEGORIES)
        self.version = array("i", bytes(4 * slots))
        self.rating = array("d", [csr.PARAMS.start_rating]) * slots
        self.rd = array("d", [csr.PARAMS.start_rd]) * slots
        self.peak = array("d", [0.0]) * slots
        self.last_at = array("d", [0.0]) * slots

    def play(self, a: int, b: int, score_a: float, at: float) -> tuple[tuple, tuple]:
        """Rate one game between slots a and b: for each, (version, before rating, before RD, after rating,
        after RD)."""
        ra, rb = self.rating[a], self.rating[b]
        expected_a = 1.0 / (1.0 + 10.0 ** ((rb - ra) / 400.0))
        return self._move(a, score_a - expected_a, at), self._move(b, expected_a - score_a, at)

    def _move(self, slot: int, surprise: float, at: float) -> tuple:
        before, rd = self.rating[slot], self.rd[slot]
        after = max(csr.PARAMS.rating_floor, before + (10.0 + rd / 4.0) * surprise)
        new_rd = max(csr.PARAMS.rd_floor, rd * 0.93)
        version = self.version[slot] + 1
        self.version[slot], self.rating[slot], self.rd[slot], self.last_at[slot] = version, after, new_rd, at
        if new_rd <= csr.PARAMS.provisional_above and after > self.peak[slot]:
            self.peak[slot] = after
        return version, before, rd, after, new_rd

    def rating_rows(self, first: int, last: int) -> Iterator[tuple]:
        """`ratings` rows (RATING_COLUMNS) of players first..last-1, each at its last version."""
        n = len(CATEGORIES)
        for player in range(first, last):
            name = player_name(player)
            for c, category in enumerate(CATEGORIES):
                slot = player * n + c
                if version := self.version[slot]:
                    peak = self.peak[slot] or None
                    yield (name, "csr", category, self.rating[slot], self.rd[slot], csr.PARAMS.start_volatility,
                           version, peak, self.last_at[slot], version)


@dataclass
class Chunk:
    processed: list[tuple]  # PROCESSED_COLUMNS
    changes: list[tuple]  # CHANGE_COLUMNS


class Builder:
    """The plan's games in time order, `chunk` at a time (next_chunk), each as its rows."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.rng = random.Random(plan.seed)
        self.histories = Histories(plan.players)
        self.done = 0
        self.next_id = 1  # rating_changes.id, in time order as the worker draws them

    def next_chunk(self, size: int) -> Chunk | None:
        plan, rng, histories = self.plan, self.rng, self.histories
        n_cat = len(CATEGORIES)
        processed, changes = [], []
        for i in range(self.done, min(plan.games, self.done + size)):
            at = plan.start + i * plan.spacing
            changed_at = _stamp(at)
            created_at = _stamp(at + 0.05 + rng.random())
            time = changed_at.strftime("%Y-%m-%dT%H:%M:%SZ")
            source, message_id, game_id = rng.choice(SOURCES), random_uuid(rng), random_uuid(rng)
            white, black = rng.sample(range(plan.players), 2)
            category = TC_CATEGORY[rng.randrange(len(TCS))]
            result = rng.randrange(3)
            score = (1.0, 0.0, 0.5)[result]
            processed.append((source, message_id, "game.finished", "applied", created_at, game_id, 0))
            moves = histories.play(white * n_cat + category, black * n_cat + category, score, at)
            for player, (version, before, before_rd, after, after_rd) in zip((white, black), moves, strict=True):
                name = player_name(player)
                cat = CATEGORIES[category]
                provisional = after_rd > csr.PARAMS.provisional_above
                changes.append((
                    self.next_id, change_id(source, message_id, name, "csr", cat, version), name, "csr", cat,
                    version, after, after - before, "game.finished", source, message_id, game_id, changed_at,
                    created_at, before, before_rd, csr.PARAMS.start_volatility, after, after_rd,
                    csr.PARAMS.start_volatility, provisional,
                    None if provisional else csr.floor_for_peak(histories.peak[player * n_cat + category]),
                    version, time, PARAMETERS))
                self.next_id += 1
        self.done += len(processed)
        return Chunk(processed, changes) if processed else None


def platform_games(n: int, players: int, start: float, spacing: float, seed: int = 3) -> list[bytes]:
    """n rated games among `players` players, `spacing` seconds apart from `start`: worker.dev.streams.games'
    games for the same seed (players, time controls, results), with a platform's keys: a random UUID id from
    one of SOURCES and a random UUID game id. The games are seeded, the keys are not, so that every call's
    messages are new ones, never duplicates of an earlier run's on the same database."""
    rng, keys = random.Random(seed), random.Random()  # games() draws from rng alone: the same games for a seed
    names = [player_name(i) for i in range(players)]
    out = []
    for i in range(n):
        white, black = rng.sample(names, 2)
        tc = rng.choice(TCS)
        result = rng.choice(RESULTS)
        event = game_event(0, white, black, result, _stamp(start + i * spacing), tc, keys.choice(SOURCES))
        event["id"], event["data"]["game_id"] = random_uuid(keys), random_uuid(keys)
        out.append(orjson.dumps(event))
    return out
