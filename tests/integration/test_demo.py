"""The newcomer's first command: `rating-worker demo` streams games, shows ratings, stops cleanly; on a
terminal its screen fits, refreshes in place and keeps the log off it (driven in a real pseudo-terminal,
its screen read by a terminal emulator)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import orjson
import pexpect
import pyte
import pytest

from worker.ratings.csr import CATEGORIES


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in (
        "DATABASE_URL", "KAFKA_BOOTSTRAP_SERVERS", "COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE",
        "TTY_INTERACTIVE", "NO_COLOR")}


def _demo(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "worker", "demo", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=_env(), text=True)


def _closed(*ports: int) -> None:
    for port in ports:
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, f"something still listens on {port}"


def test_demo_rates_a_stream_and_stops_by_itself():
    proc = _demo("--games", "400", "--rate", "400", "--refresh", "0.5", "--seed", "3")
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    last = [line for line in out.splitlines() if line.startswith("rating-worker demo: 400 games sent")][-1]
    sent = re.match(r"rating-worker demo: 400 games sent, (\d+) duplicates, (\d+) bad; (\d+) messages processed",
                    last)
    duplicates, bad, processed = (int(x) for x in sent.groups())
    assert processed == 400 + duplicates + bad, last  # every message sent was handled
    assert f"dead letters: {bad}" in last
    final = out[out.rindex(last):]
    assert "BLITZ" in final and "±" in final  # the last screen, whole, in plain text
    assert "stopped: nothing left running" in out


def test_demo_stops_everything_on_ctrl_c():
    proc = _demo("--rate", "200", "--refresh", "0.5")
    deadline = time.monotonic() + 120
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if re.search(r"; [1-9]\d* messages processed", line):
            break
    head = "".join(lines)
    # the read API runs beside the worker: its printed URL is the leaderboard's page, whose JSON answers too
    api_url = re.search(r"read API: (http://127\.0\.0\.1:(\d+))(/leaderboards/csr/\w+) \(its JSON: (\S+),", head)
    assert api_url, head
    with urllib.request.urlopen(api_url[1] + api_url[3], timeout=10) as answer:
        assert answer.status == 200 and answer.headers.get_content_type() == "text/html"
        assert b'src="/static/leaderboard.js"' in answer.read()
    with urllib.request.urlopen(api_url[4], timeout=10) as answer:
        assert answer.status == 200 and "items" in orjson.loads(answer.read())
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, head + out
    assert "stopped: nothing left running" in out
    _closed(int(head.split("PostgreSQL: ")[1].split("/")[2].rsplit(":", 1)[1]),
            int(head.split("broker: ")[1].split()[0].rsplit(":", 1)[1]))
    with pytest.raises(OSError):  # the read API stopped with the rest
        socket.create_connection(("127.0.0.1", int(api_url[2])), timeout=2).close()


COLUMNS, ROWS = 80, 30
ENTRY = re.compile(r"^\s*(\d+) (player-\d{4})\s+(\d+\.\d)\s+±(\d+)\s*$")


def _sections(lines: list[str]) -> tuple[list[str], list[str]]:
    """The leaderboards' lines and the movers' lines of a screen."""
    top = next(i for i, line in enumerate(lines) if line.startswith("Leaderboards:"))
    movers = next(i for i, line in enumerate(lines) if line.startswith("Provisional (?)"))
    return lines[top + 1:movers], lines[movers + 1:]


def _entries(board_lines: list[str]) -> list[tuple[str, float, float]]:
    """Every (player, rating, rd) of the leaderboards, side by side ones split at their columns."""
    found = []
    for line in board_lines:
        for start in range(0, len(line), 32):
            m = ENTRY.match(line[start:start + 32])
            if m:
                found.append((m[2], float(m[3]), float(m[4])))
    return found


def test_demo_on_an_80_column_terminal_fits_shows_every_section_and_ends_on_ctrl_c(tmp_path):
    log = tmp_path / "demo.log"
    # The emulator is wider than the terminal the demo is told of: a line longer than 80 columns would show
    # past column 80 instead of wrapping out of sight.
    screen = pyte.Screen(COLUMNS + 40, ROWS)
    stream = pyte.ByteStream(screen)
    child = pexpect.spawn(sys.executable, ["-m", "worker", "demo", "--refresh", "0.5", "--rate", "300",
                                           "--log-file", str(log)],
                          dimensions=(ROWS, COLUMNS), env={**_env(), "TERM": "xterm-256color"}, timeout=180)
    shown: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                stream.feed(child.read_nonblocking(65536, timeout=0.5))
            except pexpect.TIMEOUT:
                pass
            shown = [row.rstrip() for row in screen.display]
            text = "\n".join(shown)
            # A screen worth reading: games processed, someone established, a bad message dead-lettered.
            if ("Provisional (?)" in text and re.search(r"dead letters +[1-9]", text)
                    and _entries(_sections(shown)[0]) and re.search(r"[1-9][\d,]* messages processed", text)):
                break
        else:
            raise AssertionError("no full screen within 180 s:\n" + "\n".join(shown))
        assert max(len(row) for row in shown) <= COLUMNS, "\n".join(row for row in shown if len(row) > COLUMNS)
        labels = [row.split()[0] if row.split() else "" for row in shown]
        for section in ("stream", "worker", "outbox", "dead", "metrics", "read", "log"):
            assert section in labels, (section, shown)
        assert re.search(r"consumer lag (\d+|measuring)", text) and "changes awaiting publication" in text
        assert re.search(r"dead letters +\d+, last: \w+: ", text)  # the last one's reason
        assert re.search(r"metrics +http://127\.0\.0\.1:\d+/metrics", text)
        at = labels.index("log")
        named = "".join(row.split()[-1] for row in shown[at:shown.index("", at)])  # the name, wrapped
        assert named == str(log), shown
        boards, movers = _sections(shown)
        for category in CATEGORIES:
            assert any(category.upper() in row.split() for row in boards), (category, shown)
        entries = _entries(boards)
        assert entries and all(rd <= 110 for _, _, rd in entries), entries  # established ratings only
        assert "?" not in "\n".join(boards)
        assert all("?" in row or "no provisional" in row for row in movers if row.strip()), movers
        assert "WARNING" not in text and "dead-lettered" not in text  # the log is in its file
        child.sendintr()  # Ctrl-C
        child.expect(pexpect.EOF, timeout=120)
        stream.feed(child.before)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, "\n".join(screen.display)
    assert any("stopped: nothing left running" in row for row in screen.display)
    assert "dead-lettered" in log.read_text()  # the worker's log lines went to the file named on the screen
