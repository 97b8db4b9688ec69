-- 0015_unreferenced_causes: each month's index of the causes that have no ref, (cause_source, cause_id)
-- WHERE cause_ref IS NULL (docs/operations.md "History by month").
--
-- Why: the changes of a message without a ref (a rating.imported, an account.closed's fair-play refunds:
-- their `cause.ref` is null) were found by the message's source and id with no index: the read API's
-- /v1/messages and `rating-worker message` read every month of the history for one such message (measured:
-- 36.6 s for one request on ./dev bench lifecycle's grown database, 62 million history rows, cold buffers;
-- hours for a year of a large platform). Such rows are few (imports and refunds, not games), so the index
-- is small, and a batch of games writes nothing more: their rows have a ref and are not in it.
--
-- From here `rating_changes_month_indexes` (0014) also makes this index for every new month.
--
-- Existing months, the partition of a history from before 0012 included, get it unless they have a valid
-- one. Building it reads the whole month under a SHARE lock: the batches writing into that month wait,
-- about as long as a sequential read of the month (measured: docs/operations.md "Migrating (0015)"). To
-- wait for none of it, build each month's index beforehand while the workers run (same section): one found
-- valid is kept, one not valid (a CONCURRENTLY build that failed) stops the migration before any is built.

-- The index of the causes without a ref of the month named `name` (a table in the current schema).
CREATE FUNCTION rating_changes_add_unreferenced(name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE INDEX %I ON %I (cause_source, cause_id) WHERE cause_ref IS NULL',
                   name || '_unreferenced', name);
END
$$;

-- A new month's indexes:
--   <month>_pkey          PRIMARY KEY (id) (as in 0012)
--   <month>_key_version   UNIQUE (player_id, system, category, version) (as in 0012)
--   <month>_cause_day     (change_day(changed_at), cause_ref) WHERE cause_ref IS NOT NULL (0014)
--   <month>_unreferenced  (cause_source, cause_id) WHERE cause_ref IS NULL
CREATE OR REPLACE FUNCTION rating_changes_month_indexes(name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (id)', name, name || '_pkey');
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I UNIQUE (player_id, system, category, version)',
                   name, name || '_key_version');
    PERFORM rating_changes_add_cause_day(name);
    PERFORM rating_changes_add_unreferenced(name);
END
$$;

-- The months there are: all are checked before any index is built.
DO $$
DECLARE
    month record;
    name text;
    missing text[] := '{}';
BEGIN
    FOR month IN SELECT m.partition, i.indisvalid AS valid FROM rating_changes_months() AS m
                 LEFT JOIN pg_class AS c ON c.relname = m.partition || '_unreferenced'
                                        AND c.relnamespace = current_schema()::regnamespace
                 LEFT JOIN pg_index AS i ON i.indexrelid = c.oid
                 ORDER BY m.lo LOOP
        IF month.valid IS NULL THEN
            missing := missing || month.partition;
        ELSIF NOT month.valid THEN
            RAISE EXCEPTION '%_unreferenced is not a valid index (a failed CONCURRENTLY build?): %', month.partition,
                'DROP INDEX it, then migrate';
        END IF;
    END LOOP;
    FOREACH name IN ARRAY missing LOOP
        PERFORM rating_changes_add_unreferenced(name);
    END LOOP;
END
$$;
