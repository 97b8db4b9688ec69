"""The offline commands when something is wrong (issue 38): one line and a documented exit code
(docs/operations.md, "Exit codes"), never a traceback; and a replay of nothing but bad lines says so and
fails, as an import does. Run as a user runs them: a subprocess each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.harness import empty_database
from worker.dev.streams import games

ROOT = Path(__file__).resolve().parents[2]


def rating_worker(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "worker", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})


def one_line(done: subprocess.CompletedProcess, code: int) -> str:
    """The command's only output, a line on stderr, after it ended with `code`."""
    assert done.returncode == code and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_replay_of_a_missing_file_names_it(tmp_path):
    line = one_line(rating_worker("replay", str(tmp_path / "history.jsonl")), 2)
    assert line == f"rating-worker replay: cannot read {tmp_path / 'history.jsonl'}: No such file or directory"


def test_replay_into_a_missing_folder_names_it(tmp_path):
    source = tmp_path / "history.jsonl"
    source.write_bytes(b"\n".join(games(3, players=4)) + b"\n")
    out = tmp_path / "nowhere" / "changes.jsonl"
    line = one_line(rating_worker("replay", str(source), "-o", str(out)), 2)
    assert line == f"rating-worker replay: cannot write {out}: No such file or directory"


def test_a_replay_of_bad_lines_only_says_so_and_fails(tmp_path):
    source = tmp_path / "history.jsonl"
    source.write_text('not json\n{"specversion": "1.0"}\n\n')
    done = rating_worker("replay", str(source), "-o", str(tmp_path / "changes.jsonl"))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1] == ("replay history.jsonl: 2 lines read: 0 rated, 0 unrated, 0 duplicates, "
                                            "2 bad, 0 failed (each reported above)")


def test_a_replay_with_a_bad_line_among_good_ones_fails_too(tmp_path):
    source = tmp_path / "history.jsonl"
    source.write_bytes(b"\n".join([*games(3, players=4), b"not json"]) + b"\n")
    done = rating_worker("replay", str(source), "-o", str(tmp_path / "changes.jsonl"))
    assert done.returncode == 1 and done.stderr.splitlines()[-1].startswith("replay history.jsonl: 4 lines read: 3 "
                                                                            "rated, "), done.stderr
    assert len((tmp_path / "changes.jsonl").read_bytes().splitlines()) == 6


async def test_replay_into_a_database_never_migrated_says_to_migrate(postgres, tmp_path):
    source = tmp_path / "history.jsonl"
    source.write_bytes(b"\n".join(games(3, players=4)) + b"\n")
    done = rating_worker("replay", str(source), "-o", str(tmp_path / "out"), "--database-url",
                         await empty_database(postgres))
    line = one_line(done, 3)
    assert line.startswith("rating-worker replay: database schema is at version 0, this worker needs ")
    assert "run `rating-worker migrate`" in line


def test_docs_outside_the_repository_says_where_to_run_it(tmp_path):
    line = one_line(rating_worker("docs", cwd=tmp_path), 2)
    assert line == ("rating-worker docs: cannot write docs/ratings.md: No such file or directory (run it from the "
                    "repository's root, or give --output and --settings-output)")
