"""`./dev bench replay`: `rating-worker replay` of long histories, memory and speed (issue 22).

For each of BENCH_REPLAY_SIZES (1,000,000, 5,000,000, 10,000,000 messages) it writes a history file and
replays it in a process of its own (`python -m worker replay FILE -o OUT`, through bench.common.replay_process,
which takes its own VmHWM; OUT's lines are counted),
reporting its largest RSS, its messages/s and CSR games/s, and RSS against the first size's: memory must
stay flat in the stream's length. The history is a platform's at a constant rate of message time (BENCH_REPLAY_PER_DAY, 100,000 a
day), so that a longer stream is more days, not a denser one (at 100,000 a day the 7-day dedupe window
is full from 800,000 messages on):

  90%   CSR games among BENCH_REPLAY_PLAYERS (200,000) players, each keeping to two time controls
   4%   ChessKite attempts (4,000 puzzles); 3% Chess Tempo attempts (5,000 problems, both modes) by a
        tenth of the players (every (user, problem) pair is a state of its own: docs/rules.md#chess-tempo counts repeats
        over all earlier attempts, so these grow with the stream)
 0.5%   Turbo Live events of 8 players
   1%   duplicates of a message of the last hour; 0.1% bad lines
        and 20 fair-play closures a day (a reviewed account's 30 days of games are refunded)

The pure engine's cost per game beside it: `./dev bench engine`.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

from bench.common import cpu_model, replay_process
from worker.dev.streams import TCS, game_event, turbo_event

SIZES = [int(x) for x in os.environ.get("BENCH_REPLAY_SIZES", "1000000,5000000,10000000").split(",")]
PLAYERS = int(os.environ.get("BENCH_REPLAY_PLAYERS", "200000"))
PUZZLERS = PLAYERS // 10  # the players who also solve Chess Tempo problems
PER_DAY = int(os.environ.get("BENCH_REPLAY_PER_DAY", "100000"))
START = datetime(2025, 1, 1, tzinfo=UTC)


def history(n: int, seed: int = 1, counts: dict[str, int] | None = None):
    """n lines of the mix above, in message-time order; counts["games"] counts the CSR games (not their
    duplicates) as they are made."""
    counts = {} if counts is None else counts
    counts.setdefault("games", 0)
    rng = random.Random(seed)
    step = 86400 / PER_DAY
    recent: list[bytes] = [b""] * max(1, PER_DAY // 24)  # the last hour's lines, a ring
    filled = 0
    closures_every = max(1, PER_DAY // 20)
    for i in range(n):
        at = START + timedelta(seconds=i * step)
        stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        roll = rng.random()
        if roll < 0.01 and filled:
            yield recent[rng.randrange(min(filled, len(recent)))]  # a producer's retry
            continue
        if roll < 0.011:
            yield b'{"specversion": "1.0", "id": "broken"'  # cut short
            continue
        if i % closures_every == closures_every - 1:
            player = f"u{rng.randrange(PLAYERS)}"
            line = orjson.dumps({"specversion": "1.0", "id": f"close-{i}", "source": "/review", "type": "account.closed",
                                 "time": stamp, "data": {"player_id": player, "reason": "fair_play", "closed_at": stamp}})
        elif roll < 0.051:
            line = orjson.dumps({"specversion": "1.0", "id": f"kite-{i}", "source": "/kite", "type": "puzzle.attempted",
                                 "time": stamp, "data": {
                                     "system": "chesskite", "player_id": f"u{rng.randrange(PLAYERS)}",
                                     "puzzle_id": f"pz-{rng.randrange(4000)}", "correct": rng.random() < 0.6,
                                     "challenge": rng.random() < 0.5, "puzzle_rating": rng.randint(600, 2200),
                                     "attempted_at": stamp}})
        elif roll < 0.081:
            mode = "blitz" if rng.random() < 0.5 else "standard"
            data = {"system": "chesstempo", "mode": mode, "player_id": f"u{rng.randrange(PUZZLERS)}",
                    "puzzle_id": f"cp-{rng.randrange(5000)}", "correct": rng.random() < 0.65, "attempted_at": stamp}
            if mode == "blitz":
                data |= {"seconds": round(rng.uniform(2, 40), 2), "seconds_after_first_move": round(rng.uniform(0, 10), 2)}
            line = orjson.dumps({"specversion": "1.0", "id": f"ct-{i}", "source": "/tempo", "type": "puzzle.attempted",
                                 "time": stamp, "data": data})
        elif roll < 0.086:
            chosen = rng.sample(range(PLAYERS), 8)
            entries = [(f"u{p}", round(rng.random(), 3), rng.randint(5, 40),
                        (rng.randint(0, 3), rng.randint(0, 1), rng.randint(0, 3))) for p in chosen]
            line = orjson.dumps(turbo_event(i, entries, at, "/turbo"))
        else:
            # A player keeps to two time controls, as players do: his first (his number mod 6) and one
            # more; white chooses one of his, against a player whose first it is. A stream's distinct
            # ratings then level off as a platform's do, instead of growing to 6 a player.
            white = rng.randrange(PLAYERS)
            speed = (white % 6 + rng.randrange(2) * (1 + white // 6 % 5)) % 6
            black = white
            while black == white:
                black = rng.randrange(PLAYERS // 6) * 6 + speed
            line = orjson.dumps(game_event(i, f"u{white}", f"u{black}", rng.choice(["1-0", "0-1", "1/2-1/2"]), at,
                                           TCS[speed], "/games"))
            counts["games"] += 1
        recent[filled % len(recent)] = line
        filled += 1
        yield line


def write_history(path: Path, n: int) -> int:
    """Writes n lines; returns how many of them are CSR games."""
    started = time.perf_counter()
    counts: dict[str, int] = {}
    with open(path, "wb") as f:
        for i, line in enumerate(history(n, counts=counts), start=1):
            f.write(line + b"\n")
            if i % 1_000_000 == 0:
                print(f"  writing: {i:,}/{n:,} lines ({time.perf_counter() - started:.0f} s)", flush=True)
    return counts["games"]


def replay_file(path: Path) -> tuple[float, float, int]:
    """(seconds, largest RSS in MiB, output lines) of one `rating-worker replay` process."""
    out = path.with_suffix(".out")
    seconds, rss, errors = replay_process(path, out)
    reported = [e for e in errors if "incomplete_history" in e or "rating_error" in e]
    print(f"  replay's stderr: {len(errors):,} lines ({len(errors) - len(reported):,} bad lines, {len(reported)} other)"
          + (f", first other: {reported[0]}" if reported else ""), flush=True)
    with open(out, "rb") as f:
        changes = sum(1 for _ in f)
    out.unlink()
    return seconds, rss, changes


def main() -> None:
    print(f"bench replay: {', '.join(f'{n:,}' for n in SIZES)} messages, {PLAYERS:,} players, {PER_DAY:,} messages "
          f"a day of message time; CPU {cpu_model()} ({os.cpu_count()} cores)", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        for n in SIZES:
            path = Path(tmp) / f"history-{n}.jsonl"
            games = write_history(path, n)
            seconds, rss, changes = replay_file(path)
            path.unlink()
            rows.append((n, games, seconds, rss))
            print(f"replay: {n:,} messages ({n / PER_DAY:.0f} days, {games:,} CSR games) in {seconds:.0f} s = "
                  f"{n / seconds:,.0f} messages/s, {games / seconds:,.0f} games/s; largest RSS {rss:,.0f} MiB; "
                  f"{changes:,} changes written", flush=True)
    first = rows[0]
    print(f"\n| messages | days | messages/s | CSR games/s | largest RSS | RSS against {first[0]:,} |\n"
          f"|---|---|---|---|---|---|")
    for n, games, seconds, rss in rows:
        print(f"| {n:,} | {n / PER_DAY:.0f} | {n / seconds:,.0f} | {games / seconds:,.0f} | {rss:,.0f} MiB | "
              f"{rss / first[3]:.2f}x |")
    print(f"\n{cpu_model()}, {os.cpu_count()} CPUs; largest RSS of the replay process (its own VmHWM)")


if __name__ == "__main__":
    main()
