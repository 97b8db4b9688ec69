"""Child processes of the embedded services: started in their own process group, never outliving us
(atexit, and PR_SET_PDEATHSIG where the kernel has it), stopped or paused as a group; their scratch
directories, and the sweep of those a killed test run left behind. (The package docstring says why.)"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

LOOPBACK = "127.0.0.1"
PG_SYSTEM_USER = "embedded_postgres"
PG_SUPERUSER = "postgres"
TMP_PREFIX = "rating-devsvc-"

# Settings for a throw-away test/demo server: no fsync (a crash of the *machine* may corrupt it,
# a crash of PostgreSQL itself does not), only TCP on loopback, no Unix socket in /tmp.
DEFAULT_PG_SETTINGS: dict[str, str] = {
    "listen_addresses": LOOPBACK,
    "unix_socket_directories": "",
    "fsync": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "log_min_messages": "warning",
    "log_statement": "none",
}


class DevServiceError(RuntimeError):
    """A development service could not be started or used."""


# ---------------------------------------------------------------------------------------------
# process helpers
# ---------------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_libc: Any = None
if sys.platform.startswith("linux"):
    try:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:  # pragma: no cover - exotic libc
        _libc = None


def make_preexec(parent_pid: int) -> Callable[[], None] | None:
    """preexec_fn arming PR_SET_PDEATHSIG(SIGKILL) in the child, or None where it cannot work.

    Runs after Popen's setsid/setreuid (so a later credential change cannot clear it). If the parent
    already died between fork and prctl, the child kills itself.
    """
    if _libc is None or threading.current_thread() is not threading.main_thread():
        return None
    libc = _libc

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def spawn_child(cmd: list[str], log_path: Path, env: dict[str, str], cwd: Path, **kwargs: Any) -> subprocess.Popen:
    """Start a service as our own child: its own session (signalled as a group), output to its log,
    and killed with us (PR_SET_PDEATHSIG) so that it never outlives the process that started it."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=make_preexec(os.getpid()),
            env=env,
            cwd=str(cwd),
            **kwargs,
        )


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that is free right now (the OS picks it; tiny race until the service binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def tail(path: Path | None, lines: int = 40) -> str:
    if path is None:
        return ""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def run_in_thread(fn: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine function to completion on a private event loop in a helper thread.

    Works whether or not the calling thread already runs an event loop.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(fn())  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc

    t = threading.Thread(target=target, name="devservices-check", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def descendants(pid: int) -> list[int]:
    """PIDs of all descendants of ``pid`` (from /proc; empty where there is no /proc)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name (field 2) may contain spaces and parentheses: split after the last ')'
        fields = stat[stat.rfind(b")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def signal_group(proc: subprocess.Popen[bytes] | None, sig: int) -> None:
    """Send ``sig`` to the process group led by ``proc`` (started with start_new_session) and to
    every descendant: PostgreSQL's children call setsid() and so are *not* in the group."""
    if proc is None:
        return
    targets = descendants(proc.pid) if proc.poll() is None else []
    if sig == signal.SIGCONT:
        targets.reverse()
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in targets:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop_group(proc: subprocess.Popen[bytes] | None, first: int, timeout: float) -> None:
    """Politely stop a process group (``first`` signal), then SIGKILL whatever is left of it."""
    if proc is None:
        return
    signal_group(proc, signal.SIGCONT)  # a SIGSTOPped (paused) service cannot handle ``first``
    if proc.poll() is None:
        try:
            os.kill(proc.pid, first)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    # The group outlives its leader when children linger (e.g. PostgreSQL backends): kill them all.
    signal_group(proc, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


live: set[Any] = set()
live_lock = threading.Lock()


def stop_all_at_exit() -> None:
    with live_lock:
        services = list(live)
    for svc in services:
        with contextlib.suppress(Exception):
            svc.stop()


atexit.register(stop_all_at_exit)


def new_base_dir(kind: str) -> Path:
    base = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{kind}-"))
    (base / "owner.pid").write_text(str(os.getpid()))
    return base


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_dirs() -> None:
    """Remove temp dirs left by processes that died without cleaning up (e.g. SIGKILLed)."""
    tmp = Path(tempfile.gettempdir())
    for d in tmp.glob(f"{TMP_PREFIX}*"):
        try:
            owner = int((d / "owner.pid").read_text().strip())
        except (OSError, ValueError):
            continue
        if owner == os.getpid() or pid_alive(owner):
            continue
        pm = d / "data" / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError, IndexError):
            if pid_alive(int(pm.read_text().splitlines()[0])):
                continue  # its server still runs (started from a thread, no death signal)
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------------------------
