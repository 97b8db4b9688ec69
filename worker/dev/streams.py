"""Message generators shared by tests and benchmarks: realistic CloudEvents as bytes."""

from __future__ import annotations

import csv
import random
from datetime import UTC, datetime, timedelta

import orjson

from worker.contract.schemas import IMPORTED_DATA_FIELDS

TCS = [
    {"base_seconds": 60, "increment_seconds": 0}, {"base_seconds": 180, "increment_seconds": 2},
    {"base_seconds": 300, "increment_seconds": 0}, {"base_seconds": 900, "increment_seconds": 10},
    {"base_seconds": 1800, "increment_seconds": 20}, {"days_per_move": 2},
]


def game_event(i: int, white: str, black: str, result: str, at: datetime, tc: dict | None = None,
               source: str = "/test/games", rated: bool = True) -> dict:
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "specversion": "1.0", "id": f"game-{i}", "source": source, "type": "game.finished", "time": stamp,
        "data": {"game_id": f"g-{i}", "rated": rated, "variant": "standard",
                 "time_control": tc or TCS[2], "white": {"player_id": white}, "black": {"player_id": black},
                 "result": result, "finished_at": stamp},
    }


def games(n: int, players: int, seed: int = 1, source: str = "/test/games", speeds: bool = True) -> list[bytes]:
    """n rated games among `players` players, one minute apart, mixed speeds and results."""
    rng = random.Random(seed)
    names = [f"p{i:03d}" for i in range(players)]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        white, black = rng.sample(names, 2)
        tc = rng.choice(TCS) if speeds else TCS[2]
        result = rng.choice(["1-0", "0-1", "1/2-1/2"])
        out.append(orjson.dumps(game_event(i, white, black, result, start + timedelta(minutes=i), tc, source)))
    return out


def player_of(value: bytes) -> bytes:
    """The record key the platform would use: the white player (the worker does not rely on keys)."""
    return orjson.loads(value)["data"]["white"]["player_id"].encode()


def turbo_event(i: int, players: list[tuple[str, float, int, tuple[int, int, int]]], at: datetime,
                source: str = "/test/turbo", fmt: str = "10min") -> dict:
    """A Turbo Live event: players as (player_id, agreement, votes, (won, drawn, lost))."""
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "specversion": "1.0", "id": f"turbo-{i}", "source": source, "type": "event.finished", "time": stamp,
        "data": {"competition_id": f"tl-{i}", "kind": "turbo_live", "rated": True, "finished_at": stamp,
                 "format": fmt,
                 "players": [{"player_id": p, "agreement": a, "votes": v,
                              "team_games": {"won": w, "drawn": d, "lost": lo}} for p, a, v, (w, d, lo) in players]},
    }


def turbo_events(n: int, players: int, seed: int = 1, size: int = 8, source: str = "/test/turbo",
                 prefix: str = "p") -> list[bytes]:
    """n rated Turbo Live events of `size` players drawn from `players`, ten minutes apart."""
    rng = random.Random(seed)
    names = [f"{prefix}{i:03d}" for i in range(players)]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        chosen = rng.sample(names, size)
        entries = [(p, round(rng.random(), 3), rng.randint(5, 40), (rng.randint(0, 3), rng.randint(0, 1),
                                                                     rng.randint(0, 3))) for p in chosen]
        out.append(orjson.dumps(turbo_event(i, entries, start + timedelta(minutes=10 * i), source)))
    return out


def random_rounds(rng: random.Random, chosen: list[str], rounds: int) -> list[dict]:
    """Random pairings of an even field, every player once a round, random results."""
    played = []
    for r in range(1, rounds + 1):
        order = rng.sample(chosen, len(chosen))
        for a, b in zip(order[::2], order[1::2], strict=True):
            played.append({"round": r, "white": a, "black": b, "result": rng.choice(["1-0", "0-1", "1/2-1/2"])})
    return played


def uscf_events(n: int, players: int, seed: int = 1, size: int = 6, rounds: int = 4) -> list[bytes]:
    """n US Chess events (Swiss-like random pairings), a week apart, mixed time controls."""
    rng = random.Random(seed)
    names = [f"u{i:03d}" for i in range(players)]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        chosen = rng.sample(names, size)
        played = random_rounds(rng, chosen, rounds)
        stamp = (start + timedelta(days=7 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        minutes, inc = rng.choice([(90, 30), (25, 5), (40, 5), (5, 3)])
        out.append(orjson.dumps({
            "specversion": "1.0", "id": f"uscf-{i}", "source": "/test/uscf", "type": "event.finished", "time": stamp,
            "data": {"competition_id": f"open-{i}", "kind": "uscf", "rated": True, "finished_at": stamp,
                     "time_control": {"base_minutes": minutes, "increment_seconds": inc},
                     "players": [{"player_id": p, "age": rng.choice([12, 30])} if rng.random() < 0.5
                                 else {"player_id": p} for p in chosen],
                     "games": played}}))
    return out


def puzzle_attempts(n: int, players: int, seed: int = 1) -> list[bytes]:
    """ChessKite attempts, about half of them challenge cards (only those are rated)."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        stamp = (start + timedelta(seconds=30 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        out.append(orjson.dumps({
            "specversion": "1.0", "id": f"attempt-{i}", "source": "/test/kite", "type": "puzzle.attempted",
            "time": stamp,
            "data": {"system": "chesskite", "player_id": f"k{rng.randrange(players):03d}", "puzzle_id": f"pz-{i % 97}",
                     "correct": rng.random() < 0.6, "challenge": rng.random() < 0.5,
                     "puzzle_rating": rng.randint(600, 2200), "attempted_at": stamp}}))
    return out


def fide_events(n: int, names: list[str], seed: int = 1, size: int = 6, rounds: int = 5) -> list[bytes]:
    """FIDE standard tournaments among `names`, ten days apart (so months roll over)."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 3, tzinfo=UTC)
    out = []
    for i in range(n):
        chosen = rng.sample(names, size)
        played = random_rounds(rng, chosen, rounds)
        stamp = (start + timedelta(days=10 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        out.append(orjson.dumps({
            "specversion": "1.0", "id": f"fide-{i}", "source": "/test/fide", "type": "event.finished", "time": stamp,
            "data": {"competition_id": f"fide-{i}", "kind": "fide", "rated": True, "finished_at": stamp,
                     "rating_type": "standard", "players": [{"player_id": p} for p in chosen], "games": played}}))
    return out


def chesstempo_attempts(n: int, users: int, problems: int, seed: int = 1, days: int = 5, start: datetime | None = None,
                        source: str = "/test/tempo") -> list[bytes]:
    """Chess Tempo attempts, standard and blitz, spread over `days` UTC days (in time order), with repeats."""
    rng = random.Random(seed)
    start = start or datetime(2026, 3, 1, 6, tzinfo=UTC)
    step = days * 86400 / max(n, 1)
    out = []
    for i in range(n):
        stamp = (start + timedelta(seconds=i * step)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        mode = "blitz" if rng.random() < 0.5 else "standard"
        data = {"system": "chesstempo", "mode": mode, "player_id": f"t{rng.randrange(users):03d}",
                "puzzle_id": f"cp-{rng.randrange(problems)}", "correct": rng.random() < 0.65, "attempted_at": stamp}
        if mode == "blitz":
            data |= {"seconds": round(rng.uniform(2, 40), 2), "seconds_after_first_move": round(rng.uniform(0, 10), 2)}
        out.append(orjson.dumps({"specversion": "1.0", "id": f"ct-{i}", "source": source, "type": "puzzle.attempted",
                                 "time": stamp, "data": data}))
    return out


# ---- rating.imported rows, as an import file holds them (the importer's tests and bench/imports.py) ----

IMPORTED_AT = "2026-11-01T00:00:00Z"


def import_rows(n: int, seed: int = 1, prefix: str = "imp") -> list[dict]:
    """n rating.imported data objects, one per player, every system, optional fields sometimes left out."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        system = rng.choices(["csr", "fide", "uscf", "tsr", "chesskite"], [40, 25, 15, 10, 10])[0]
        row: dict = {"player_id": f"{prefix}{i:07d}", "system": system, "imported_at": IMPORTED_AT}
        maybe = rng.random() < 0.7  # most lines have the optional fields, some take the start values
        if system == "csr":
            row["category"] = rng.choice(["bullet", "blitz", "rapid", "classical", "correspondence"])
            row["rating"] = round(rng.uniform(700, 2700), 1)
            if maybe:
                row.update(rd=round(rng.uniform(45, 350), 1), volatility=round(rng.uniform(0.04, 0.09), 4),
                           games=rng.randint(0, 3000), last_played_at="2026-10-28T18:30:00Z")
                row["peak"] = round(row["rating"] + rng.uniform(0, 150), 1)
        elif system == "tsr":
            row.update(category="turbo", rating=round(rng.uniform(800, 2400), 1))
            if maybe:
                row.update(rd=round(rng.uniform(45, 350), 1), games=rng.randint(0, 500))
        elif system == "fide":
            row.update(category=rng.choice(["standard", "rapid", "blitz"]), rating=rng.randint(1400, 2800))
            if maybe:
                row.update(games=rng.randint(0, 900), peak=row["rating"] + rng.randint(0, 100),
                           birth_year=rng.randint(1950, 2015))
        elif system == "uscf":
            row.update(category=rng.choice(["regular", "quick", "blitz"]), rating=rng.randint(100, 2700))
            if maybe:
                games = rng.randint(0, 400)
                wins = rng.randint(0, games)
                draws = rng.randint(0, games - wins)
                row.update(games=games, wins=wins, draws=draws, losses=games - wins - draws,
                           events=rng.randint(0, 60), peak=row["rating"] + rng.randint(0, 100))
        else:
            row.update(category="puzzle", rating=rng.randint(400, 2800))
            if maybe:
                row["games"] = rng.randint(0, 5000)
        rows.append(row)
    return rows


def write_csv(path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(IMPORTED_DATA_FIELDS)
        for row in rows:
            w.writerow(["" if row.get(f) is None else row[f] for f in IMPORTED_DATA_FIELDS])


def write_jsonl(path, rows: list[dict]) -> None:
    with open(path, "wb") as fh:
        for row in rows:
            fh.write(orjson.dumps(row) + b"\n")


def every_type() -> list[bytes]:
    """A fixed stream of every message type and kind (4,300 lines): CSR games, TSR, US Chess and FIDE events
    (FIDE ratings imported first, so that events are rated), ChessKite and Chess Tempo attempts, a
    fair-play closure inside its window and another closure, imports of all six systems, two bad lines,
    a FIDE list (rating.period_closed), and more games after them. For checks over everything the worker
    can publish."""
    def ce(i: str, type_: str, data: dict, time: str) -> bytes:
        return orjson.dumps({"specversion": "1.0", "id": i, "source": "/fixed", "type": type_, "time": time,
                             "data": data})

    listed = "2025-12-01T00:00:00Z"
    out = [ce(f"fimp-{i}", "rating.imported", {"player_id": f"p{i:03d}", "system": "fide", "category": "standard",
                                               "rating": 1500 + 25 * i, "games": 40, "imported_at": listed}, listed)
           for i in range(30)]
    out += games(3000, players=80, seed=5)
    out += turbo_events(40, players=30, seed=6)
    out += uscf_events(30, players=40, seed=7)
    out += puzzle_attempts(500, players=50, seed=8)
    out += fide_events(20, [f"p{i:03d}" for i in range(40)], seed=9)
    out += chesstempo_attempts(400, users=40, problems=60, seed=10)
    january, march = "2026-01-03T00:00:00Z", "2026-03-01T00:00:00Z"
    out += [
        ce("x-1", "account.closed", {"player_id": "p001", "reason": "fair_play", "closed_at": january}, january),
        ce("x-2", "account.closed", {"player_id": "p002", "reason": "abuse", "closed_at": march}, march),
        ce("x-3", "rating.imported", {"player_id": "imp1", "system": "fide", "category": "standard", "rating": 2012,
                                      "games": 57, "imported_at": march}, march),
        ce("x-4", "rating.imported", {"player_id": "imp2", "system": "csr", "category": "blitz", "rating": 1700,
                                      "rd": 80, "imported_at": march}, march),
        ce("x-5", "rating.imported", {"player_id": "imp3", "system": "uscf", "category": "regular", "rating": 1500,
                                      "games": 30, "imported_at": march}, march),
        ce("x-6", "rating.imported", {"player_id": "imp4", "system": "chesskite", "category": "puzzle",
                                      "rating": 1200, "imported_at": march}, march),
        ce("x-7", "rating.imported", {"player_id": "imp5", "system": "chesstempo", "category": "blitz",
                                      "rating": 1600, "rd": 100, "imported_at": march}, march),
        ce("x-8", "rating.imported", {"player_id": "imp6", "system": "tsr", "category": "turbo", "rating": 1550,
                                      "imported_at": march}, march),
        # q001 plays rapid only, then his blitz rating is imported: a category that starts from the others
        *[orjson.dumps(game_event(9000 + i, "q001", "q002", "1-0" if i % 2 else "1/2-1/2",
                                  datetime(2026, 2, 1, 12, i, tzinfo=UTC), TCS[3], "/fixed-rapid"))
          for i in range(6)],
        ce("x-9", "rating.imported", {"player_id": "q001", "system": "csr", "category": "blitz",
                                      "rating": 1600, "imported_at": march}, march),
        b"not json",
        ce("x-10", "game.finished", {"bad": 1}, march),
        # the March 2027 list: every open FIDE period closes, the players idle since 2025 go inactive
        ce("x-11", "rating.period_closed", {"system": "fide", "list": "2027-03", "closed_at": "2027-03-01T00:00:00Z"},
           "2027-03-01T00:00:00Z"),
    ]
    return out + games(300, players=80, seed=11, source="/after")
