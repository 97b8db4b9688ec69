"""`rating-worker import FILE`: bring existing ratings in as `rating.imported` CloudEvents (issue 12).

    FILE (CSV or JSON lines) -> one `rating.imported` per line -> checked by the worker's own decoder
        -> the input topic (default), or PostgreSQL directly (`--database-url`), or nowhere (`--dry-run`)

Each line becomes the `data` of one message. The envelope's `source` is `/rating-worker/import` (or
`--source`) and its `id` is a uuid5 of the line's data in a canonical form (keys sorted, 1500.0 written
1500, times in UTC), so the same line always gives the same id: importing a file again, or a file that
overlaps one imported before, applies nothing twice (the worker's dedupe on (source, id)). A line whose
data equals an earlier line's in the same file is skipped as a duplicate.

The pure parts (readers, ids, envelopes, checks) are plain functions for the unit tests; `main` is the
command (argparse Namespace -> exit code).
"""

from worker.commands.importer.command import DESCRIPTION, add_parser, main
from worker.commands.importer.events import (
    ID_NAMESPACE,
    Duplicate,
    Good,
    Rejected,
    RejectsWriter,
    build_event,
    check_records,
    message_id,
)
from worker.commands.importer.read import (
    DATA_FIELDS,
    DEFAULT_SOURCE,
    DEFAULT_TOPIC,
    CsvHeader,
    ImportError_,
    Record,
    detect_format,
    read_csv,
    read_jsonl,
)

__all__ = ["DATA_FIELDS", "DEFAULT_SOURCE", "DEFAULT_TOPIC", "DESCRIPTION", "ID_NAMESPACE", "CsvHeader", "Duplicate",
           "Good", "ImportError_", "Record", "Rejected", "RejectsWriter", "add_parser", "build_event", "check_records",
           "detect_format", "main", "message_id", "read_csv", "read_jsonl"]
