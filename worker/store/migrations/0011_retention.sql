-- 0011_retention: what the retention task needs to remove processed ids and unrated rows by their windows
-- (issue 42; worker/pipeline/retention.py, DEDUPE_WINDOW_DAYS and UNRATED_WINDOW_DAYS, docs/operations.md
-- "Retention").
--
-- Rows expire by `processed_at`: the wall clock of the transaction that stored them, never earlier than the
-- broker's append time of their record (a producer's clock, which the message's own time is, can be wrong).
--
-- `unrated_players.processed_at`: the same value as its message's `processed_messages.processed_at` (both
-- default to now(), the batch transaction's start). A column with a non-volatile default is a catalogue
-- change (no rewrite, PostgreSQL 11 and later); the rows stored before this migration take its time, so
-- they are kept one window from now.
--
-- The indexes let each chunk of the task read its oldest rows by a range scan, never a scan of the table.
-- Their cost on the batches: one more index entry per stored row, appended at the right edge of its range
-- (the key only grows: processed_at within an outcome), so the inserts land on a few hot pages already in
-- the buffers, and write about 30 bytes of index a row, against the primary key's random inserts of 50-100
-- bytes (UUID ids land on a page of their own: issue 42's full-page images). (outcome, processed_at) and not
-- processed_at alone: the two outcomes have different windows (an unrated message keeps its reason for the
-- longer of the two), and each is one range of this index.
--
-- Building them takes a SHARE lock: the batches' writes wait until both are built. Measured on 10 million
-- processed ids (UUID ids, embedded PostgreSQL, 2 cores, maintenance_work_mem 64 MB): 6.1 s, and 301 MB of
-- index (30 bytes an id, against 967 MB for the primary key); so a database of 20 million ids pauses its
-- group's batches for about 12 s while a worker migrates it.
ALTER TABLE unrated_players ADD COLUMN processed_at timestamptz NOT NULL DEFAULT now();

CREATE INDEX processed_messages_expiry ON processed_messages (outcome, processed_at);
CREATE INDEX unrated_players_expiry ON unrated_players (processed_at);
