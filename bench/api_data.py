"""The databases `./dev bench api` (bench/api.py) reads, and the requests it sends them.

rated    BENCH_API_RATED (20,000) players rated by real games: BENCH_API_GAMES (200,000) CSR games (3 blitz
         to 1 rapid) run through the engine by `rating-worker backfill`, the rows the worker writes. The
         games are not uniform: each player has a hidden strength (normal, 1500 +- 300) that decides his
         results, a few play far more than most (Pareto), and half the games pair players of close strength,
         so that the ratings spread and some players are established (RD <= 110) and some are not.
stored   BENCH_API_STORED (1,000,000) players: a file copy of `rated` (its players, ratings and histories
         as they are) with the rest bulk-loaded by one statement each: a CSR blitz rating for every one
         (normal, 1500 +- 300; games skewed, RD falling with them and rising with idle time, so that a
         share is established), a rapid rating for three in ten, their last three changes each as the
         worker writes history rows, and one account in a thousand closed for fair play.

Players are named as worker.dev.streams names them (p000 ... p999, p1000, ...): the worker's games among
the first BENCH_API_RATED players (`busy_games`) play the rated ones in either database.
"""

from __future__ import annotations

import bisect
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from pathlib import Path

import asyncpg
import orjson

from bench.common import copy_db, fresh_db
from worker.api.problems import encode_cursor
from worker.dev.streams import TCS, game_event

SOURCE = "/bench/api"
BLITZ, RAPID = TCS[2], TCS[3]  # 5+0 and 15+10
START = datetime(2026, 1, 1, tzinfo=UTC)
GAME_STEP = timedelta(seconds=20)


def names(players: int) -> list[str]:
    return [f"p{i:03d}" for i in range(players)]


def rated_games(n: int, players: int, seed: int = 40, first: int = 0, start: datetime = START) -> list[bytes]:
    """`n` CSR games among `players` players (ids game-`first`, ...), 20 s apart from `start`: results drawn
    from hidden strengths, activity skewed, half the pairings between players of close strength."""
    rng = random.Random(seed)
    ids = names(players)
    strength = [rng.gauss(1500, 300) for _ in ids]
    by_strength = sorted(range(players), key=strength.__getitem__)
    place = {p: i for i, p in enumerate(by_strength)}
    cumulative = list(accumulate(min(rng.paretovariate(1.2), 100.0) for _ in ids))
    out = []
    for i in range(n):
        white = bisect.bisect(cumulative, rng.random() * cumulative[-1])
        if rng.random() < 0.5:  # a pairing by strength: someone close to him on the ladder
            j = place[white] + rng.choice((-1, 1)) * rng.randint(1, 100)
            black = by_strength[min(max(j, 0), players - 1)]
        else:
            black = rng.randrange(players)
        if black == white:
            black = (white + 1) % players
        expected = 1 / (1 + 10 ** ((strength[black] - strength[white]) / 400))
        r = rng.random()
        result = "1-0" if r < expected - 0.1 else "1/2-1/2" if r < expected + 0.1 else "0-1"
        tc = BLITZ if rng.random() < 0.75 else RAPID
        out.append(orjson.dumps(game_event(first + i, ids[white], ids[black], result, start + i * GAME_STEP, tc,
                                           SOURCE)))
    return out


def busy_games(n: int, players: int, after_games: int) -> list[bytes]:
    """The worker's games while the API is measured: the same players, after the rated history's last game."""
    return rated_games(n, players, seed=41, first=10_000_000, start=START + (after_games + 1) * GAME_STEP)


async def build_rated(pg, name: str, games: int, players: int) -> str:
    """A migrated database `name` with `games` games among `players` players, rated by `rating-worker
    backfill` (the engine, and the worker's own `save`); vacuumed and analyzed."""
    url = await fresh_db(pg, name)
    with tempfile.TemporaryDirectory(prefix="bench-api-") as tmp:
        path = Path(tmp) / "games.jsonl"
        path.write_bytes(b"".join(v + b"\n" for v in rated_games(games, players)))
        done = subprocess.run([sys.executable, "-m", "worker", "backfill", str(path), "--database-url", url,
                               "--quiet"], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"backfill failed ({done.returncode}): {done.stderr[-2000:]}")
    await _vacuum(url)
    return url


# One statement per table, all on the server: the players after the rated ones (g from $1 to $2 - 1).
_BULK = """
SELECT setseed(0.4242);
CREATE TEMP TABLE bulk AS
SELECT g, 'p' || g AS player_id, s.category, s.rapid,
       1 + floor(150 * random() ^ 3)::int AS games, random() AS u1, random() AS u2, random() AS idle
FROM generate_series({first}, {last}) AS g
CROSS JOIN LATERAL (VALUES ('blitz', false), ('rapid', true)) AS s(category, rapid)
WHERE NOT s.rapid OR g % 10 < 3;
CREATE TEMP TABLE bulk_ratings AS
SELECT player_id, category, games, idle,
       least(greatest(1500 + 300 * sqrt(-2 * ln(greatest(u1, 1e-12))) * cos(2 * pi() * u2), 400), 3000)
           + CASE WHEN rapid THEN 40 ELSE 0 END AS rating,
       least(350, 45 + 300 / sqrt(games) + 70 * idle ^ 2) AS rd,
       extract(epoch FROM timestamptz '2026-01-01') - idle * 300 * 86400 AS last_at
FROM bulk;
INSERT INTO players (player_id, closed_at, closed_reason)
SELECT 'p' || g, CASE WHEN g % 1000 = 7 THEN timestamptz '2025-12-01' END,
       CASE WHEN g % 1000 = 7 THEN 'fair_play' END
FROM generate_series({first}, {last}) AS g;
INSERT INTO ratings (player_id, system, category, rating, rd, volatility, games, peak, last_at, version)
SELECT player_id, 'csr', category, rating, rd, 0.06, games,
       CASE WHEN rd <= 110 THEN rating + 30 * idle END, last_at, games
FROM bulk_ratings;
-- the history's months (migration 0012): a change is at most two hours before its rating's last_at
SELECT rating_changes_ensure_months(to_timestamp(min(last_at) - 3 * 3600), to_timestamp(max(last_at)))
FROM bulk_ratings;
INSERT INTO rating_changes (event_id, player_id, system, category, version, rating, delta, cause_type,
                            cause_source, cause_id, cause_ref, changed_at, payload, before_rating, before_rd,
                            before_volatility, after_rating, after_rd, after_volatility, provisional, floor,
                            games, cause_time, inactive, parameters)
SELECT md5(b.player_id || b.category || v)::uuid::text, b.player_id, 'csr', b.category, v, h.after, h.delta,
       'game.finished', '{source}', 'bulk-' || b.player_id || '-' || b.category || '-' || v,
       'bulk-' || b.player_id || '-' || b.category || '-' || v, to_timestamp(h.at), NULL,
       h.after - h.delta, b.rd + 2, 0.06, h.after, b.rd, 0.06, b.rd > 110, NULL, v,
       to_char(to_timestamp(h.at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), NULL, 'csr-1'
FROM bulk_ratings AS b
CROSS JOIN LATERAL generate_series(greatest(1, b.games - 2), b.games) AS v
CROSS JOIN LATERAL (SELECT b.rating - 4 * (b.games - v) AS after, 8 * sin(v + b.games) AS delta,
                           b.last_at - (b.games - v) * 3600 AS at) AS h;
"""


async def build_stored(pg, template: str, name: str, stored: int, rated: int) -> str:
    """`template` (the rated database) copied by its files, and players `rated` ... `stored` - 1 added."""
    url = await copy_db(pg, template, name)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(_BULK.format(first=rated, last=stored - 1, source=SOURCE))
    finally:
        await conn.close()
    await _vacuum(url)
    return url


async def _vacuum(url: str) -> None:
    """Vacuumed (the visibility map an index-only count needs, as autovacuum keeps it) and analyzed."""
    conn = await asyncpg.connect(url)
    try:
        for table in ("players", "ratings", "rating_changes", "processed_messages"):
            await conn.execute(f"VACUUM (ANALYZE) {table}")
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()


@dataclass(frozen=True)
class Shape:
    """What a database holds, for the report."""

    players: int
    ratings: int
    changes: int
    blitz_board: int  # CSR blitz ratings on the leaderboard (established, account open)
    blitz: int  # CSR blitz ratings

    def describe(self) -> str:
        return (f"{self.players:,} players, {self.ratings:,} ratings, {self.changes:,} history rows; CSR blitz "
                f"leaderboard {self.blitz_board:,} of {self.blitz:,} ratings ({self.blitz_board / self.blitz:.0%} "
                f"established)")


async def shape(url: str) -> Shape:
    conn = await asyncpg.connect(url)
    try:
        r = await conn.fetchrow("""
            SELECT (SELECT count(*) FROM players) AS players, (SELECT count(*) FROM ratings) AS ratings,
                   (SELECT count(*) FROM rating_changes) AS changes,
                   (SELECT count(*) FROM leaderboard WHERE system = 'csr' AND category = 'blitz') AS board,
                   (SELECT count(*) FROM ratings WHERE system = 'csr' AND category = 'blitz') AS blitz""")
        return Shape(r["players"], r["ratings"], r["changes"], r["board"], r["blitz"])
    finally:
        await conn.close()


#: route -> (label, [(path, arguments of the bare loop's reads)]): see `requests`
Requests = dict[str, list[tuple[str, tuple]]]


async def requests(url: str, n: int, seed: float = 0.17) -> Requests:
    """`n` requests of each route, drawn at random from the whole database (players, ratings, leaderboard
    entries), each as the path wrk sends and the arguments the bare loop reads with.

    player      /v1/players/{id}: any player (closed accounts included)
    board       /v1/leaderboards/csr/{blitz,rapid}?limit=100: the first pages
    board_page  ...?limit=100&cursor=...: the page after a random entry of the blitz board
    history     /v1/players/{id}/history/csr/{category}: the first page (100) of any rating
    preview     /v1/preview/csr/blitz?white=&black=: two players with a blitz rating, accounts open"""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"SELECT setseed({seed})")
        players = await conn.fetch("SELECT player_id FROM players ORDER BY random() LIMIT $1", n)
        ratings = await conn.fetch("SELECT player_id, category FROM ratings WHERE system = 'csr' "
                                   "ORDER BY random() LIMIT $1", n)
        # with the rank and position a cursor carries (what the pages before it numbered)
        entries = await conn.fetch(
            "SELECT * FROM (SELECT rating, player_id, rank() OVER (ORDER BY rating DESC) AS rank, "
            "row_number() OVER (ORDER BY rating DESC, player_id) AS position FROM leaderboard "
            "WHERE system = 'csr' AND category = 'blitz') AS board ORDER BY random() LIMIT $1", n)
        pairs = await conn.fetch("""
            SELECT r.player_id FROM ratings AS r JOIN players AS p USING (player_id)
            WHERE r.system = 'csr' AND r.category = 'blitz' AND p.closed_reason IS NULL
            ORDER BY random() LIMIT $1""", 2 * n)
    finally:
        await conn.close()
    ids = [p["player_id"] for p in pairs]
    return {
        "player": [(f"/v1/players/{r['player_id']}", (r["player_id"],)) for r in players],
        "board": [(f"/v1/leaderboards/csr/{c}?limit=100", ("csr", c)) for c in ("blitz", "rapid")],
        "board_page": [(f"/v1/leaderboards/csr/blitz?limit=100&cursor="
                        f"{encode_cursor('board', e['rating'], e['player_id'], e['rank'], e['position'])}",
                        ("csr", "blitz", e["rating"], e["player_id"])) for e in entries],
        "history": [(f"/v1/players/{r['player_id']}/history/csr/{r['category']}",
                     (r["player_id"], "csr", r["category"])) for r in ratings],
        "preview": [(f"/v1/preview/csr/blitz?white={w}&black={b}", (w, b)) for w, b in zip(ids[::2], ids[1::2], strict=False)],
    }


def elapsed(started: float) -> str:
    return f"{time.perf_counter() - started:.0f} s"
