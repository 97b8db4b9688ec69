"""Debian's PostgreSQL server, for what the embedded one lacks (TLS in the tests, lz4 and zstd in
`./dev bench wal-compression`): where it is installed, and whom to run it as."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def debian_server_bin_dir() -> Path | None:
    """The newest of Debian's PostgreSQL versions installed (/usr/lib/postgresql/N/bin), for what the embedded
    server lacks (TLS, lz4); None without one."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


def debian_server_user() -> dict | None:
    """subprocess' user and group for Debian's server: none to change ({}) unless we are root, which PostgreSQL
    refuses to run as; then the package's `postgres` user, else `nobody`; None as root with neither."""
    if os.geteuid() != 0:
        return {}
    import pwd

    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pw = pwd.getpwnam(name)
            return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
    return None
