"""`rating-worker import FILE`: the command (arguments -> an exit code), its progress and summary."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import IO
from urllib.parse import urlsplit

from worker import config as config_mod
from worker.commands.importer.events import RejectsWriter
from worker.commands.importer.read import (
    DEFAULT_BATCH,
    DEFAULT_SOURCE,
    DEFAULT_TOPIC,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    ImportError_,
    detect_format,
)
from worker.commands.importer.send import (
    Counts,
    Failed,
    dry_run,
    to_broker,
    to_database,
)
from worker.config import mask_url
from worker.contract.times import parse_time
from worker.terminal.progress import Progress


def _summary(args, counts: Counts, elapsed: float, mode: str, out: IO[str]) -> None:
    rate = counts.read / elapsed if elapsed > 0 else 0.0
    w = out.write
    w(f"rating-worker import: {args.file}: {counts.read:,} lines read in {elapsed:.1f} s ({rate:,.0f} lines/s)\n")
    if mode == "dry-run":
        w(f"  valid     {counts.done:>12,}  (dry run: nothing was sent or written)\n")
    elif mode == "broker":
        w(f"  produced  {counts.done:>12,}  to topic {args.topic} (acknowledged by the broker; the worker applies "
          "them, skipping any imported before)\n")
    else:
        w(f"  applied   {counts.applied:>12,}  ratings replaced in PostgreSQL (rating.changed published later by "
          "a running worker's outbox relay)\n")
        w(f"  already   {counts.already:>12,}  imported before (the same source and id): skipped\n")
        if counts.unrated:
            w(f"  ignored   {counts.unrated:>12,}  accounts closed for fair play\n")
        if counts.done and not counts.applied:
            w("  nothing new: every line had been imported before\n")
    w(f"  rejected  {counts.rejected:>12,}\n")
    if counts.duplicates:
        w(f"  duplicate {counts.duplicates:>12,}  lines with the same data as an earlier line: skipped\n")
        for d in counts.shown_duplicates:
            w(f"    line {d.line}: the same as line {d.first}\n")
        if counts.duplicates > len(counts.shown_duplicates):
            w(f"    ... and {counts.duplicates - len(counts.shown_duplicates):,} more\n")
    if counts.rejected:
        w("rejected lines:\n")
        for r in counts.shown:
            w(f"  line {r.line}: {r.error_class}: {r.reason}\n")
        more = counts.rejected - len(counts.shown)
        if more > 0:
            where = f"all of them are in {args.rejects}" if args.rejects else "use --rejects FILE to write them all"
            w(f"  ... and {more:,} more ({where})\n")
        elif args.rejects:
            w(f"  (written to {args.rejects})\n")


def _progress_counts(c: Counts) -> str:
    return (f"{c.read:,} lines read, {c.done:,} imported, {c.rejected:,} rejected"
            + (f", {c.duplicates:,} duplicate" if c.duplicates else ""))


def settings(**given: str) -> config_mod.Config:
    """The worker's settings this import needs (a URL, or the broker and its security settings), read
    and checked as every command reads them (config.load_for_tool); a bad one is a usage error."""
    try:
        return config_mod.load_for_tool(argparse.Namespace(**given), database="database_url" in given,
                                        kafka="kafka_bootstrap_servers" in given)
    except config_mod.ConfigError as exc:
        raise ImportError_(str(exc)) from None


async def _run(args, counts: Counts, progress: Progress, rejects, mode: str, target: str,
               kafka: config_mod.Config | None) -> None:
    notes = progress  # a note while the bar is up goes above it, not into it
    if mode == "dry-run":
        await dry_run(args, counts, progress, rejects, notes)
    elif mode == "broker":
        await to_broker(args, counts, progress, rejects, notes, kafka)
    else:
        await to_database(args, counts, progress, rejects, notes, target)


def main(args: argparse.Namespace) -> int:
    """The command: an exit code (0 all lines good, 1 some rejected, 2 usage, 3 broker/database failure)."""
    err = sys.stderr
    rejects: RejectsWriter | None = None
    try:
        if args.batch_size < 1:
            raise ImportError_(f"--batch-size {args.batch_size}: must be at least 1")
        if not 1 <= len(args.source) <= 256 or "\x00" in args.source:
            raise ImportError_("--source: 1 to 256 characters (a CloudEvents source, e.g. /rating-worker/import)")
        if args.imported_at is not None:
            try:
                parse_time(args.imported_at)
            except ValueError as exc:
                raise ImportError_(f"--imported-at {args.imported_at!r}: {exc}") from None
        fmt = detect_format(args.file, args.format)
        if args.file != "-" and not os.path.isfile(args.file):
            raise ImportError_(f"cannot read {args.file!r}: no such file")
        kafka = None
        if args.dry_run:
            mode, target = "dry-run", ""
        elif args.database_url is not None:
            mode, target = "database", args.database_url or os.environ.get("DATABASE_URL", "")
            if not target:
                raise ImportError_("--database-url without a URL reads DATABASE_URL, which is not set")
            if urlsplit(target).scheme not in ("postgres", "postgresql"):
                raise ImportError_(f"--database-url must start with postgresql:// (got {target.split(':')[0]!r})")
            settings(database_url=target)
        else:
            mode = "broker"
            target = args.bootstrap_servers or os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "")
            if not target:
                raise ImportError_("no broker: give --bootstrap-servers or set KAFKA_BOOTSTRAP_SERVERS "
                                   "(or --database-url to write to PostgreSQL directly, or --dry-run)")
            kafka = settings(kafka_bootstrap_servers=target)  # with the KAFKA_SECURITY_* / SASL / SSL settings
            inputs = os.environ.get("KAFKA_INPUT_TOPICS")
            if inputs and args.topic not in [t.strip() for t in inputs.split(",")]:
                err.write(f"rating-worker import: note: topic {args.topic} is not in KAFKA_INPUT_TOPICS ({inputs}): "
                          "a worker with these settings will not read it\n")
        if args.rejects:
            rejects = RejectsWriter(args.rejects, fmt)
    except (ImportError_, OSError) as exc:
        err.write(f"rating-worker import: {exc}\n")
        return EXIT_USAGE

    counts = Counts()
    progress = Progress(f"import {os.path.basename(args.file)}", describe=lambda: _progress_counts(counts), count=lambda: counts.read,
                        stream=err, quiet=args.quiet)
    where = {"dry-run": "dry run (checking only)", "broker": f"to topic {args.topic} at {target}",
             "database": f"into PostgreSQL {mask_url(target)}"}[mode]
    if not args.quiet:
        err.write(f"rating-worker import: {args.file} ({fmt}) {where}\n")
    code = EXIT_OK
    try:
        asyncio.run(_run(args, counts, progress, rejects, mode, target, kafka))
    except ImportError_ as exc:
        progress.end()
        err.write(f"rating-worker import: {exc}\n")
        return EXIT_USAGE
    except Failed as exc:
        progress.end()
        err.write(f"rating-worker import: failed: {exc}\n")
        if not counts.read:  # the database or the broker refused before a line was read: that line says it all
            return EXIT_FAILED
        err.write(f"rating-worker import: {counts.done:,} lines were imported before the failure; running the "
                  "same command again is safe (lines imported before are skipped)\n")
        code = EXIT_FAILED
    except KeyboardInterrupt:
        progress.end()
        err.write(f"rating-worker import: interrupted after {counts.done:,} imported lines; running the same "
                  "command again is safe (lines imported before are skipped)\n")
        code = 130
    finally:
        progress.end()  # whatever ended the run: a bar left up would hide the cursor and swallow the output
        if rejects is not None:
            rejects.close()
    try:
        _summary(args, counts, progress.elapsed(), mode, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head`: the import itself is done; keep its exit status
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if code != EXIT_OK:
        return code
    return EXIT_REJECTED if counts.rejected else EXIT_OK


DESCRIPTION = """\
Import existing ratings (an official FIDE or US Chess rating, the CSR of an older system, a correction
by an operator) as rating.imported messages: each line replaces the worker's state of one
(player_id, system, category), counts as a change (next version, a rating.changed with cause
rating.imported) and is applied in order with everything else. What a line leaves out takes the
system's start values.

Input: CSV with a header row, or JSON lines (one data object per line), told apart by the file name
(.csv; .jsonl, .ndjson, .json; optionally .gz) or --format ('-' reads stdin and needs --format). The
columns/fields are the rating.imported data fields:
  player_id, system, category, rating (required), rd, volatility, games, wins, draws, losses, events,
  peak, birth_year, last_played_at, imported_at (required, or --imported-at), and for FIDE k (10, 20
  or 40: the K the list shows), ever_2300, ever_2400 (true/false, 1/0 or yes/no in CSV)
A FIDE rating is the one on the list of the imported_at month (import the list as of its 1st).
An empty cell (or a JSON null) is absent; cells are trimmed; other columns/fields are ignored (named
once on stderr). Which fields each system holds: the worker's schemas/rating.imported.json; a
field the system cannot hold (an RD for FIDE, a FIDE rating under 1400, or 1000 on a list before 2024-03) makes
the line bad.

Every line is checked by the worker's own decoder before anything is sent; a bad line is rejected with
its line number and reason (in the summary, and all of them in --rejects FILE) and the good lines are
imported. Use --dry-run first to check a whole file.

Ids: each message's id is derived from the line's data (source /rating-worker/import or --source), so
running the same file again, or a file that overlaps an earlier one, applies nothing twice; the
summary of a --database-url run says how many lines had been imported before. To import the same
values again on purpose, change imported_at (or --source). Lines of one file with the same data are
imported once.

Where to:
  default         produce to --topic (default ratings.imported, one of the worker's input topics),
                  keyed by player_id, at --bootstrap-servers / KAFKA_BOOTSTRAP_SERVERS (with the
                  worker's KAFKA_SECURITY_PROTOCOL / KAFKA_SASL_* / KAFKA_SSL_* settings). The running
                  worker applies and publishes them (the lines were checked here with the worker's
                  decoder, so none should be dead-lettered).
  --database-url  apply directly to PostgreSQL, --batch-size lines per transaction, through the
                  worker's engine: states, history, processed ids and the outbox, as the worker
                  writes them. The rating.changed messages are NOT published by this command: they
                  wait in the outbox and the outbox relay of a running worker publishes them (at its
                  start, then every RELAY_INTERVAL_S for rows older than RELAY_MIN_AGE_S). Meant for
                  a stopped worker (faster than the topic for a first bulk load); safe next to a
                  running one (the same row locks and dedupe), but then an import and a game of the
                  same player are applied in whichever order they commit.
  --dry-run       check only: nothing is sent or written.

Exit status: 0 every line was imported (or was a duplicate); 1 some lines were rejected (the others
were imported); 2 usage or configuration error, nothing imported; 3 the broker or the database failed
(what was acknowledged/committed stays; running the same command again is safe).

Examples:
  rating-worker import fide-2026-11.csv --dry-run
  rating-worker import fide-2026-11.csv --bootstrap-servers kafka-1:9092
  rating-worker import legacy-csr.jsonl.gz --database-url postgresql://rating@db/ratings --rejects bad.jsonl
  export-ratings | rating-worker import - --format jsonl --imported-at 2026-11-01T00:00:00Z

  player_id,system,category,rating,rd,volatility,games,peak,birth_year,imported_at
  p1,fide,standard,2012,,,57,2080,2009,2026-11-01T00:00:00Z
  anna,csr,blitz,1712.4,85,0.059,140,1750,,2026-11-01T00:00:00Z
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "import", help="import existing ratings from a CSV or JSON lines file (rating.imported)",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="CSV or JSON lines file ('-' for stdin, with --format)")
    p.add_argument("--format", choices=("csv", "jsonl"), help="the input format (default: from the file name)")
    p.add_argument("--source", default=DEFAULT_SOURCE,
                   help=f"the CloudEvents source of the messages (default {DEFAULT_SOURCE}); part of their identity")
    p.add_argument("--imported-at", metavar="TIME",
                   help="imported_at for lines that have none (RFC 3339, e.g. 2026-11-01T00:00:00Z)")
    p.add_argument("--topic", default=DEFAULT_TOPIC, help=f"the topic to produce to (default {DEFAULT_TOPIC})")
    p.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]",
                   help="Kafka bootstrap servers [env KAFKA_BOOTSTRAP_SERVERS]")
    p.add_argument("--database-url", nargs="?", const="", metavar="URL",
                   help="apply directly to this PostgreSQL instead of producing (alone: the URL in DATABASE_URL)")
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH,
                   help=f"lines per PostgreSQL transaction, or per producer flush (default {DEFAULT_BATCH})")
    p.add_argument("--dry-run", action="store_true", help="check every line, import nothing")
    p.add_argument("--rejects", metavar="FILE",
                   help="write the rejected lines there, with their line number and reason (CSV in, CSV out)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress line, only the summary")
    p.set_defaults(func=main)

