"""`rating-worker history`: the history's months (migration 0012), listed, and an old one detached, archived
to a file and dropped, each without a long lock (docs/operations.md, "History by month")."""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import re
import sys
from datetime import UTC, datetime, timedelta

import orjson

from worker.commands.operator import UsageError, add_common, command, connect, emit
from worker.terminal.progress import Progress
from worker.terminal.table import table

#: Fair play refunds the games of the 30 days before a closure (docs/rules.md, "Fair play"): a month whose
#: rows reach into them stays attached.
FAIR_PLAY_DAYS = 30
PREFIX = "rating_changes_"


class Refused(UsageError):
    """What the operator asked would lose something the worker still needs: one line, exit 2."""


def label(name: str) -> str:
    """A month as the command shows and takes it: rating_changes_2026_11 -> 2026-11 (before-2027-01, 2026-11-2)."""
    return name.removeprefix(PREFIX).replace("_", "-")


def _day(epoch: float | None) -> str:
    if epoch is None:
        return ""
    if epoch == float("-inf"):
        return "(all before)"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


def _bounds(m) -> tuple[float | None, float | None]:
    """Its range of changed_at: the partition's bounds while attached, else what its name says (the month's
    table keeps the name it was created with)."""
    if m.lo is not None:
        return m.lo, m.hi
    match = re.fullmatch(r"rating_changes_(before_)?(\d{4})_(\d{2})(?:_\d+)?", m.name)
    if match is None:
        return None, None
    start = datetime(int(match[2]), int(match[3]), 1, tzinfo=UTC)
    end = (start + timedelta(days=32)).replace(day=1)
    return (float("-inf"), start.timestamp()) if match[1] else (start.timestamp(), end.timestamp())


def _state(m) -> str:
    return "detaching" if m.detaching else "attached" if m.attached else "detached"


def _archived(m) -> dict | None:
    try:
        return orjson.loads(m.archived) if m.archived else None
    except orjson.JSONDecodeError:
        return None


async def _find(admin, wanted: str):
    months = await admin.months()
    for m in months:
        if wanted in (m.name, label(m.name)):
            return m
    known = ", ".join(label(m.name) for m in months) or "none"
    raise UsageError(f"no month {wanted!r} in the history (months: {known})")


async def months_list(args: argparse.Namespace) -> int:
    from worker.store.months import MonthAdmin

    conn = await connect(args)
    try:
        admin = MonthAdmin(conn)
        months = await admin.months()
        counts = {m.name: await admin.count(m.name) for m in months} if args.count else {}
    finally:
        await conn.close()
    out = []
    for m in months:
        rows = counts.get(m.name, m.rows_estimate if m.rows_estimate >= 0 else None)
        archive = _archived(m)
        lo, hi = _bounds(m)
        out.append({"month": label(m.name), "table": m.name, "from": _day(lo), "to": _day(hi),
                    "state": _state(m), "rows": rows, "rows_counted": args.count, "bytes": m.bytes,
                    "archived_to": archive and archive.get("file")})
    text = table(["month", "from", "to (excluded)", "state", "rows" if args.count else "rows (est.)", "size",
                  "archived to"],
                 [[o["month"], o["from"], o["to"], o["state"], "?" if o["rows"] is None else f"{o['rows']:,}",
                   _size(o["bytes"]), o["archived_to"] or ""] for o in out]) if out else "no months"
    emit(args.json, out, text)
    return 0


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return str(n)


async def detach(args: argparse.Namespace) -> int:
    from worker.store.months import MonthAdmin

    conn = await connect(args)
    try:
        admin = MonthAdmin(conn)
        m = await _find(admin, args.month)
        if not m.attached:
            raise Refused(f"{label(m.name)} is detached already")
        if not m.detaching:  # an interrupted detach was checked when it began: it is completed
            await _still_needed(admin, m)
        if not args.json:
            print(f"detaching {label(m.name)}: waits for the transactions that could read it to end", file=sys.stderr)
        await admin.detach(m.name, finalize=m.detaching)
    finally:
        await conn.close()
    emit(args.json, {"month": label(m.name), "detached": True},
         f"{label(m.name)} detached: the history no longer reads it; archive it, then drop it")
    return 0


async def _still_needed(admin, m) -> None:
    """Refuse a month the worker still reads: fair play's window, changes not yet published."""
    keep_until = datetime.fromtimestamp(m.hi, UTC) + timedelta(days=FAIR_PLAY_DAYS)
    if keep_until > datetime.now(UTC):
        raise Refused(f"{label(m.name)} is still needed: fair play refunds the games of the last {FAIR_PLAY_DAYS} "
                      f"days (its rows reach {_day(m.hi)}), detach it after {keep_until:%Y-%m-%d %H:%M} UTC")
    waiting = await admin.unpublished(m.name)
    if waiting:
        raise Refused(f"{label(m.name)} is still needed: {waiting:,} of its changes are not published yet "
                      "(rating-worker outbox)")


async def archive(args: argparse.Namespace) -> int:
    from worker.store.months import MonthAdmin

    path = os.path.abspath(args.to)
    if os.path.exists(path):
        raise UsageError(f"{args.to} exists: name a new file (an archive is never overwritten)")
    if not os.path.isdir(os.path.dirname(path)):
        raise UsageError(f"{args.to}: no such directory")
    conn = await connect(args)
    try:
        admin = MonthAdmin(conn)
        m = await _find(admin, args.month)
        rows, written, digest = await _copy(admin, m, path, args.quiet or args.json)
        note = {"file": path, "rows": rows, "bytes": written, "sha256": digest, "detached": not m.attached,
                "at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")}
        await admin.mark_archived(m.name, orjson.dumps(note).decode())
    finally:
        await conn.close()
    emit(args.json, {"month": label(m.name), **note},
         f"{label(m.name)} archived to {args.to}: {rows:,} rows, {written:,} bytes (sha256 {digest})")
    return 0


async def _copy(admin, m, path: str, quiet: bool) -> tuple[int, int, str]:
    """COPY the month as CSV into `path` (gzip if it ends in .gz), through `path`.part, renamed once complete:
    (rows, bytes of the file, its sha256)."""
    part = path + ".part"
    compress = path.endswith(".gz")
    done = {"bytes": 0}
    shown = Progress(f"archive {label(m.name)}", describe=lambda: f"{done['bytes'] / 1e6:,.1f} MB of CSV "
                     f"(the month's table: {m.bytes / 1e6:,.1f} MB)", count=lambda: done["bytes"] // 1000,
                     unit="kB", quiet=quiet, every=5.0)
    try:
        with open(part, "wb") as raw:
            out = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if compress else raw

            async def write(chunk: bytes) -> None:
                out.write(chunk)
                done["bytes"] += len(chunk)
                shown.tick()

            rows = await admin.archive(m.name, write)
            if compress:
                out.close()
            raw.flush()
            os.fsync(raw.fileno())
    except BaseException:
        shown.end()
        if os.path.exists(part):
            os.unlink(part)
        raise
    shown.end()
    os.rename(part, path)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return rows, os.path.getsize(path), digest.hexdigest()


async def drop(args: argparse.Namespace) -> int:
    from worker.store.months import MonthAdmin

    conn = await connect(args)
    try:
        admin = MonthAdmin(conn)
        m = await _find(admin, args.month)
        if m.attached:
            raise Refused(f"{label(m.name)} is attached: detach it first (rating-worker history detach {label(m.name)})")
        archived = _archived(m)
        if not args.without_archive and not (archived and archived.get("detached")):
            raise Refused(f"{label(m.name)} has no archive made since it was detached: archive it first "
                          "(rating-worker history archive --to FILE), or drop it with --without-archive")
        await admin.drop(m.name)
    finally:
        await conn.close()
    emit(args.json, {"month": label(m.name), "dropped": True}, f"{label(m.name)} dropped ({_size(m.bytes)} freed)")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("history", help="the history's months: list, detach, archive, drop", description=(
        "The history (rating_changes) is kept in one partition per month of the changes' own time (UTC), created "
        "as the worker needs them. An old month can leave the database in three steps, none of which stops the "
        "worker: `detach` (it is no longer read; refused for a month fair play may still refund, the last "
        f"{FAIR_PLAY_DAYS} days, or one with changes not yet published), `archive --to FILE` (its rows as CSV "
        "with a header, gzip if FILE ends in .gz; load it back with COPY ... FROM ... (FORMAT csv, HEADER "
        "match) into a month made by rating_changes_add_month), then `drop` (once detached and archived). "
        "Without a subcommand: the list. docs/operations.md, \"History by month\"."))
    add_common(p)
    p.add_argument("--count", action="store_true", help="count each month's rows (reads every month) instead of "
                   "the planner's estimate")
    p.set_defaults(func=command(months_list))
    actions = p.add_subparsers(dest="action", metavar="{list,detach,archive,drop}")
    listing = actions.add_parser("list", help="every month: its range, rows, size, attached or detached")
    add_common(listing)
    listing.add_argument("--count", action="store_true", help="count the rows instead of the planner's estimate")
    listing.set_defaults(func=command(months_list))
    for name, fn, text in (("detach", detach, "detach a month (DETACH ... CONCURRENTLY: no long lock)"),
                           ("archive", archive, "copy a month's rows to a CSV file"),
                           ("drop", drop, "drop a detached, archived month")):
        q = actions.add_parser(name, help=text, description=text)
        add_common(q)
        q.add_argument("month", help="YYYY-MM, or a month as `rating-worker history` lists it (before-2027-01)")
        if name == "archive":
            q.add_argument("--to", required=True, metavar="FILE", help="the file to write (must not exist; .gz: "
                           "gzip)")
            q.add_argument("--quiet", action="store_true", help="no progress on stderr")
        if name == "drop":
            q.add_argument("--without-archive", action="store_true", help="drop a month that was not archived")
        q.set_defaults(func=command(fn))
