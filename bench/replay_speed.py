"""`./dev bench replay-speed`: offline CSR replay's games/s against the replay of the issue's day (issue 22,
item 2), both in the same run, and against the pure engine's cost per game.

The history: BENCH_REPLAY_GAMES (100,000) rated CSR games among BENCH_REPLAY_PLAYERS (20,000) players of
all speeds, one a minute (worker.dev.streams.games, the issue's case). The baseline is the code of
BENCH_REPLAY_BASELINE (a06c197, the last commit before the streaming store: the replay the issue
measured), taken out of git into a temporary directory and run from there (`python -m worker` finds the
package in its working directory first). Each round runs both, in turns (a drift of the machine falls on
both), as the user runs them: `python -m worker replay FILE -o OUT` (through bench.common.replay_process, which
takes its own VmHWM as its largest RSS), interpreter start included. Both
outputs must be byte for byte the same (but for the `parameters` each record of now names). The median round is reported, with the engine's games/s measured
in this process between the rounds (bench/engine_speed.py's whole_game: csr.rate_game of one game, no I/O). A
warm-up run of each comes first and is not counted (the baseline's speed depends on whether the machine's
memory was touched lately; its first run of a session is its slowest).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

from bench.common import cpu_model, replay_process
from bench.engine_speed import whole_game
from worker.dev.streams import games

GAMES = int(os.environ.get("BENCH_REPLAY_GAMES", "100000"))
PLAYERS = int(os.environ.get("BENCH_REPLAY_PLAYERS", "20000"))
BASELINE = os.environ.get("BENCH_REPLAY_BASELINE", "a06c197")
ROUNDS = int(os.environ.get("BENCH_REPLAY_ROUNDS", "3"))
REPO = Path(__file__).resolve().parent.parent


def checkout(commit: str, into: Path) -> Path:
    """The worker package (and the schemas it links to) as of `commit`, in `into`."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "worker", "schemas"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        if sys.version_info >= (3, 11, 4):  # extraction filters came with 3.11.4
            tar.extractall(into, filter="tar")
        else:
            tar.extractall(into)  # noqa: S202 - our own repository's archive
    # Compiled before the first round, as the working tree's own code is: no round pays for compiling.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into / "worker")], check=True)
    found = subprocess.run([sys.executable, "-c", "import worker; print(worker.__file__)"], cwd=into, check=True,
                           capture_output=True, text=True).stdout.strip()
    if not found.startswith(str(into)):  # the installed package would be measured twice
        raise RuntimeError(f"the baseline imports {found}, not the checkout in {into}")
    return into


def replay(code: Path, source: Path, out: Path) -> tuple[float, float]:
    """(seconds, largest RSS in MiB) of one `python -m worker replay` run from `code`: the baseline keeps
    every record, so its memory is printed beside its speed."""
    seconds, rss, _ = replay_process(source, out, code)
    return seconds, rss


def main() -> None:
    print(f"bench replay-speed: {GAMES:,} CSR games among {PLAYERS:,} players, {ROUNDS} rounds, baseline "
          f"{BASELINE}; CPU {cpu_model()} ({os.cpu_count()} cores)", flush=True)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-replay-speed-") as tmp:
        tmp_path = Path(tmp)
        source = tmp_path / "games.jsonl"
        source.write_bytes(b"".join(line + b"\n" for line in games(GAMES, PLAYERS)))
        base = checkout(BASELINE, tmp_path / "baseline")
        # One run of each first, not counted: the baseline keeps every record (1 GB here), and this machine
        # charges a process for memory not touched lately, so its first run of a session is its slowest
        # (docs/performance.md). It takes the worst of it off; the baseline's rounds still vary (7,798 to
        # 13,732 games/s in the rounds of two runs of 2026-12-03).
        warm_then, _ = replay(base, source, tmp_path / "then.jsonl")
        warm_now, _ = replay(REPO, source, tmp_path / "now.jsonl")
        print(f"  warm-up (not counted): now {GAMES / warm_now:,.0f} games/s, baseline {GAMES / warm_then:,.0f}",
              flush=True)
        for n in range(1, ROUNDS + 1):
            then, then_rss = replay(base, source, tmp_path / "then.jsonl")
            engine = whole_game(200_000)
            now, now_rss = replay(REPO, source, tmp_path / "now.jsonl")
            # The baseline predates parameter sets: the same bytes but for the set each record names.
            now_bytes = re.sub(rb',"parameters":"[a-z]+-[0-9]+"', b"", (tmp_path / "now.jsonl").read_bytes())
            same = (tmp_path / "then.jsonl").read_bytes() == now_bytes
            if not same:
                raise RuntimeError("the replay's output differs from the baseline's")
            rounds.append((GAMES / now, GAMES / then, engine))
            print(f"  round {n}: now {GAMES / now:,.0f} games/s, baseline {GAMES / then:,.0f} "
                  f"({then / now:.2f}x), engine {engine:,.0f} games/s; largest RSS now {now_rss:,.0f} MiB, baseline "
                  f"{then_rss:,.0f}; outputs byte-identical", flush=True)
    now, then, engine = (statistics.median(r[i] for r in rounds) for i in range(3))
    ratio = statistics.median(r[0] / r[1] for r in rounds)
    print(f"replay: {now:,.0f} games/s, {ratio:.2f}x the baseline's {then:,.0f} (median of {ROUNDS} rounds); "
          f"{now / engine:.2f} of the pure engine's {engine:,.0f} games/s ({1e6 / now:.0f} us a game against "
          f"{1e6 / engine:.0f})")


if __name__ == "__main__":
    main()
