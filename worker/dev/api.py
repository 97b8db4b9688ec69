"""`rating-worker serve` as a child process, as the demo, the tests and `./dev bench api` run it: started on
a free port, ready once /healthz answers, stopped with SIGTERM (then SIGKILL), never outliving us."""

from __future__ import annotations

import os
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from worker.dev.processes import LOOPBACK, DevServiceError, free_port, spawn_child, stop_group, tail

START_TIMEOUT_S = 30.0


class ApiServer:
    """The read API on 127.0.0.1 against `database_url`; `env` adds settings (SUPPORT_TOKEN, ...)."""

    def __init__(self, database_url: str, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.log_path = log_path
        self._env = {**os.environ, "DATABASE_URL": database_url, "API_HOST": LOOPBACK, "API_PORT": str(self.port),
                     **(env or {})}
        self.proc = None

    def start(self) -> ApiServer:
        self.proc = spawn_child([sys.executable, "-m", "worker", "serve"], self.log_path, self._env, Path.cwd())
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DevServiceError(f"rating-worker serve exited with {self.proc.returncode}:\n{tail(self.log_path)}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1):
                    return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        self.stop()
        raise DevServiceError(f"rating-worker serve did not answer in {START_TIMEOUT_S:g} s:\n{tail(self.log_path)}")

    def stop(self) -> None:
        stop_group(self.proc, signal.SIGTERM, 15)

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
