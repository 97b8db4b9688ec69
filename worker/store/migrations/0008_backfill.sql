-- 0008_backfill: where `rating-worker backfill` stands in each history file it loads (issue 22, item 3).
--
-- One row per history file, written in the same transaction as each chunk of its rows: after a crash or
-- Ctrl-C the next run finds the last chunk committed and goes on after it, so nothing is applied twice
-- and nothing is skipped. A file is known by the digest of its first MiB (`head_digest`), not by its
-- name (a history moved or renamed is still the same history); `digest` covers every byte done, so that
-- a resumed run can check that the file it reads is the one it started (a history edited in between
-- would otherwise mix two streams). `processed` counts the rows it wrote to processed_messages: a
-- database whose count differs was written by something else too (a worker), and is not backfilled into.
CREATE TABLE backfill_progress (
    head_digest text COLLATE "C" PRIMARY KEY,   -- sha256 (hex) of the file's first MiB
    name        text NOT NULL,                  -- the file as the first run named it
    digest      text COLLATE "C" NOT NULL,      -- sha256 (hex) of the file's bytes [0, bytes_done)
    bytes_done  bigint NOT NULL,                -- an offset after a whole line
    lines_done  bigint NOT NULL,
    processed   bigint NOT NULL,                -- rows written to processed_messages
    changes     bigint NOT NULL,                -- rows written to rating_changes
    published   boolean NOT NULL,               -- its changes went to the outbox (--publish)
    started_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz NULL
);
