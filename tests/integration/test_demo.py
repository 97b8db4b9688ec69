"""The newcomer's first command: `rating-worker demo` streams games, shows ratings, stops cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time


def _demo(*args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "KAFKA_BOOTSTRAP_SERVERS")}
    return subprocess.Popen([sys.executable, "-m", "worker", "demo", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, text=True)


def test_demo_rates_a_stream_and_stops_by_itself():
    proc = _demo("--games", "400", "--rate", "400", "--refresh", "0.5", "--seed", "3")
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    final = out[out.rindex("rating-worker demo: 400 games sent"):]
    assert "400 messages processed" in final
    assert "BLITZ" in final and "±" in final
    bad = int(final.split(" bad;")[0].rsplit(" ", 1)[1])
    assert f"dead letters: {bad}" in final
    assert "stopped: nothing left running" in out


def test_demo_stops_everything_on_ctrl_c():
    proc = _demo("--rate", "200", "--refresh", "0.5")
    deadline = time.monotonic() + 120
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if "messages processed" in line and not line.split("; ")[1].startswith("0 messages"):
            break
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    head = "".join(lines)
    assert proc.returncode == 0, head + out
    assert "stopped: nothing left running" in out
    pg_port = int(head.split("PostgreSQL: ")[1].split("/")[2].rsplit(":", 1)[1])
    broker_port = int(head.split("broker: ")[1].split()[0].rsplit(":", 1)[1])
    for port in (pg_port, broker_port):
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, f"something still listens on {port}"
