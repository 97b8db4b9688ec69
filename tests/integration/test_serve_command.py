"""`rating-worker serve` as an operator starts it: a setting it can not use stops it in one line with exit 2
(no traceback), a port already taken too; PostgreSQL away does not stop it (it answers 503 until the
database is back: tests/integration/test_api_http.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

UNREACHABLE = "postgresql://nobody@127.0.0.1:1/ratings"


def serve(*args: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "API_PORT", "API_CORS_ORIGINS")}
    return subprocess.run([sys.executable, "-m", "worker", "serve", *args], env={**full, **env}, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize(("args", "env", "named"), [
    ((), {}, "DATABASE_URL is not set"),
    (("--api-port", "70000"), {"DATABASE_URL": UNREACHABLE}, "API_PORT=70000"),
    (("--api-port", "http"), {"DATABASE_URL": UNREACHABLE}, "API_PORT='http'"),
    ((), {"DATABASE_URL": UNREACHABLE, "API_CORS_ORIGINS": "example.org"}, "API_CORS_ORIGINS"),
    (("--api-db-pool-size", "0"), {"DATABASE_URL": UNREACHABLE}, "API_DB_POOL_SIZE=0"),
    (("--api-db-timeout-s", "nan"), {"DATABASE_URL": UNREACHABLE}, "API_DB_TIMEOUT_S=nan"),
    ((), {"DATABASE_URL": "mysql://x@y/z"}, "DATABASE_URL must start with postgresql://"),
])
def test_a_setting_it_cannot_use_is_one_line_and_exit_2(args, env, named):
    result = serve(*args, **env)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "Traceback" not in result.stderr, result.stderr


def test_a_port_in_use_is_exit_2_naming_it():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve("--api-host", "127.0.0.1", "--api-port", str(port), DATABASE_URL=UNREACHABLE)
    assert result.returncode == 2, result
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr
