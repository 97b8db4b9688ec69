-- 0009_parameter_sets: which parameter set rated each change (issue 22, item 4).
--
-- A rating system's parameters are dated sets (worker.ratings.parameters): each message is rated with the
-- set in effect at its own time, and its rating.changed names the set (`parameters`, "csr-1"). The
-- history keeps the name as a column, like every other field the outbox relay rebuilds the bytes from.
-- Rows written before this migration have none, and are published again without the field, as they
-- were published the first time (the same bytes).
ALTER TABLE rating_changes ADD COLUMN parameters text COLLATE "C";
