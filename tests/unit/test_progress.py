"""The long commands' progress (worker.terminal.progress): a bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import io
import os
import re

import pyte

from worker.terminal.progress import Progress, file_position

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _due(progress: Progress) -> None:
    progress.next = 0.0  # as if its interval had passed


def test_without_a_terminal_a_plain_line_with_the_share_read_and_the_time_left(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"x" * 1000)
    err = io.StringIO()
    count = {"n": 0}
    with open(path, "rb", buffering=0) as f:  # unbuffered: the position is what was read
        progress = Progress("replay in.jsonl", describe=lambda: f"{count['n']:,} lines", count=lambda: count["n"],
                            stream=err, every=10.0)
        progress.track(f)
        progress.tick()
        assert err.getvalue() == ""  # not due yet: nothing
        f.read(250)
        count["n"] = 1234
        _due(progress)
        progress.tick()
        progress.end()
    (line,) = err.getvalue().splitlines()
    assert line.startswith("replay in.jsonl: 1,234 lines, ") and " lines/s, 25% of the input, " in line
    assert re.search(r", \d+:\d\d:\d\d left, \d+:\d\d:\d\d elapsed$", line), line
    assert "\x1b" not in line and "\r" not in line  # a log gets plain text


def test_a_run_that_resumes_part_way_counts_its_time_left_from_where_it_began(tmp_path):
    # A backfill resumed at 60% of its file reads 20% more in 100 s: 100 s left, not the 25 s that the
    # rate since the file's start would promise.
    path = tmp_path / "history.jsonl"
    path.write_bytes(b"x" * 1000)
    err = io.StringIO()
    with open(path, "rb", buffering=0) as f:
        f.seek(600)
        progress = Progress("backfill history.jsonl", describe=lambda: "", count=lambda: 0, stream=err)
        progress.track(f)
        f.read(200)
        progress.started -= 100.0
        _due(progress)
        progress.tick()
    assert ", 80% of the input, 0:01:40 left, 0:01:40 elapsed" in err.getvalue(), err.getvalue()


def test_from_a_pipe_there_is_no_share_and_no_time_left():
    read, write = os.pipe()
    try:
        with open(read, "rb", closefd=False) as pipe:
            assert file_position(pipe) is None
            err = io.StringIO()
            progress = Progress("import -", describe=lambda: "5 lines read", count=lambda: 5, stream=err)
            progress.track(pipe)
            _due(progress)
            progress.tick()
    finally:
        os.close(read)
        os.close(write)
    assert "5 lines read" in err.getvalue() and "%" not in err.getvalue() and " left" not in err.getvalue()


def test_a_gzip_file_is_measured_by_its_compressed_bytes(tmp_path):
    import gzip

    path = tmp_path / "in.csv.gz"
    with gzip.open(path, "wb") as f:
        f.write(os.urandom(200_000))  # does not compress: its position moves as it is read
    with gzip.open(path, "rb") as f:
        position, size = file_position(f)
        assert size == path.stat().st_size and position() == 0
        f.read(150_000)
        assert 0 < position() <= size


def test_on_a_terminal_a_bar_with_rate_and_time_left_cleared_at_the_end(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"x" * 1000)
    err = io.StringIO()
    with open(path, "rb", buffering=0) as f:  # unbuffered: the position is what was read
        progress = Progress("import in.csv", describe=lambda: "40 lines read, 2 rejected", count=lambda: 40,
                            stream=err, terminal=True)
        progress.track(f)
        f.read(500)
        _due(progress)
        progress.tick()
        drawn = ANSI.sub("", err.getvalue())
        assert "import in.csv" in drawn and "50%" in drawn and "40 lines read, 2 rejected" in drawn
        assert " lines/s" in drawn and "left" in drawn
        progress.write("line 7: invalid_json: not JSON :thumbs_up: [bold]x[/bold]\n")  # a note, as written
        _due(progress)
        progress.tick()  # the next redraw prints it above the bar
        assert "line 7: invalid_json: not JSON :thumbs_up: [bold]x[/bold]" in ANSI.sub("", err.getvalue())
        progress.end()
    screen = pyte.Screen(100, 5)  # what a terminal shows after it all: the note, and the bar gone
    pyte.Stream(screen).feed(err.getvalue().replace("\n", "\r\n"))
    shown = [row.rstrip() for row in screen.display]
    assert "line 7: invalid_json: not JSON :thumbs_up: [bold]x[/bold]" in shown, shown
    assert not any("import in.csv" in row for row in shown), shown


def test_on_a_narrow_terminal_the_counts_give_way_not_the_bar_rate_or_time_left(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    err = io.StringIO()
    progress = Progress("replay games-of-2026.jsonl", describe=lambda: "1,230,000 lines, 2,460,000 changes",
                        count=lambda: 1_230_000, stream=err, terminal=True)
    progress._position, progress._total = (lambda: 37), 100  # 37% of a file
    progress.started -= 100.0
    _due(progress)
    progress.tick()
    drawn = ANSI.sub("", err.getvalue()).split("\r")[-1].rstrip()
    progress.end()
    assert len(drawn) <= 80 and drawn.startswith("replay games-of-2026.jsonl 1,2"), drawn
    assert re.search(r"━+.* 37% 12,\d{3} lines/s 0:02:5\d left$", drawn), drawn


def test_a_file_name_is_text_not_markup_and_a_closed_input_keeps_its_share(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    path = tmp_path / "ratings[old].csv"
    path.write_bytes(b"x" * 1000)
    err = io.StringIO()
    progress = Progress("import ratings[old][/y].csv", describe=lambda: "9 lines read", count=lambda: 9, stream=err,
                        terminal=True)
    with open(path, "rb", buffering=0) as f:
        progress.track(f)
        f.read(1000)
        _due(progress)
        progress.tick()
    _due(progress)
    progress.tick()  # the input closed: still 100%, not back to nothing
    progress.end()
    drawn = ANSI.sub("", err.getvalue()).split("\r")
    assert "import ratings[old][/y].csv 9 lines read" in drawn[-3] and "100%" in drawn[-3], drawn


def test_quiet_shows_nothing(tmp_path):
    err = io.StringIO()
    progress = Progress("replay", describe=lambda: "1 lines", count=lambda: 1, stream=err, quiet=True)
    _due(progress)
    progress.tick()
    progress.end()
    assert err.getvalue() == ""


def _games(path, n: int) -> None:
    from worker.commands.demo import GameStream

    stream = GameStream(300, seed=5)
    path.write_bytes(b"".join(stream.next_game()[1] + b"\n" for _ in range(n)))


def test_replay_in_a_terminal_shows_the_bar_while_it_runs_and_then_only_its_output(tmp_path):
    import sys

    import pexpect

    source, out = tmp_path / "games.jsonl", tmp_path / "changes.jsonl"
    _games(source, 30_000)
    child = pexpect.spawn(sys.executable, ["-m", "worker", "replay", str(source), "-o", str(out)],
                          dimensions=(24, 80), encoding="utf-8", timeout=120)
    # The bar, with the lines so far, the share done and the rate, while it runs (at 80 columns the
    # counts are cut short).
    child.expect(r"replay games.jsonl [1-9][\d,]* lines.*\d+%.*lines/s")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert len(out.read_bytes().splitlines()) == 60_000 - sum(  # two changes a rated game
        2 for line in source.read_bytes().splitlines() if b'"rated":false' in line)


def test_replay_without_a_terminal_writes_no_bar(tmp_path):
    import subprocess
    import sys

    source, out = tmp_path / "games.jsonl", tmp_path / "changes.jsonl"
    _games(source, 2_000)
    done = subprocess.run([sys.executable, "-m", "worker", "replay", str(source), "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""  # a short run: not one periodic line due, no escapes
