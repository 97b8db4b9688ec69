-- 0014_cause_day: a month's index of causes is by the cause's day, then its ref: (change_day(changed_at),
-- cause_ref), not (cause_ref) (issue 42, point 3; docs/operations.md "History by month").
--
-- Why: game ids are a platform's random UUIDs, so every game inserted its ref at a random place of the
-- month's cause_ref index, which outgrows the buffers within a month, and after each checkpoint the first
-- insert into each of its leaves logged the whole page. On ./dev bench lifecycle's grown database, after
-- 150,000 games since a checkpoint, that index took 0.40 of the 0.75 full pages a game, and its leaves were
-- read from disk. Led by the day, the refs a batch inserts land in the day's part of the index, a few
-- pages that stay in the buffers (measured there: 0.006 full pages a game, and +29% games/s).
--
-- Who reads it:
--   fair play (`games_with`): both sides of a cause share its time (`changed_at` is the cause's), so the
--     opponents' rows are found by the day and the ref, one descent a month;
--   a lookup by ref alone (`rating-worker message`, the read API's messages, a FIDE list): a skip scan
--     (PostgreSQL 18) over the days of each month, about 31 descents a month instead of one (measured on
--     the grown database: 0.15 ms for 14 days in the buffers, so a few ms for a year of months). Detaching
--     old months bounds it, as for reads by player.
-- The partition of a history migrated by 0012 (rating_changes_before_YYYY_MM, any number of days) keeps its
-- (cause_ref) index: it takes only changes dated before its bound, and a skip scan over years of days would
-- be slow.
--
-- change_day(changed_at): the UTC day, immutable (AT TIME ZONE with a named zone), plain SQL so that the
-- planner inlines it in the statements and in the index alike.
--
-- From here `rating_changes_month_indexes` owns a month's indexes (`rating_changes_add_month` calls it);
-- a later change of them replaces that function only.
--
-- Existing months (rating_changes_YYYY_MM) get the new index, and lose the old one. Building it takes a
-- SHARE lock on the month: the batches writing into it wait, about 2 s per million rows (measured: 41 s for
-- the 25 million rows of the grown database's current month, 2 cores, maintenance_work_mem 512 MB). To wait
-- for none of it, build each month's index beforehand while the workers run (docs/operations.md "Migrating
-- (0014)"): one found valid is kept, one not valid (a CONCURRENTLY build that failed) stops the migration
-- before any index is dropped.
CREATE OR REPLACE FUNCTION change_day(changed_at timestamptz) RETURNS date
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN (changed_at AT TIME ZONE 'UTC')::date;

-- The index of causes of the month named `name` (a table in the current schema).
CREATE FUNCTION rating_changes_add_cause_day(name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE INDEX %I ON %I (change_day(changed_at), cause_ref) WHERE cause_ref IS NOT NULL',
                   name || '_cause_day', name);
END
$$;

-- A new month's indexes:
--   <month>_pkey         PRIMARY KEY (id) (as in 0012)
--   <month>_key_version  UNIQUE (player_id, system, category, version) (as in 0012)
--   <month>_cause_day    (change_day(changed_at), cause_ref) WHERE cause_ref IS NOT NULL
CREATE FUNCTION rating_changes_month_indexes(name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (id)', name, name || '_pkey');
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I UNIQUE (player_id, system, category, version)',
                   name, name || '_key_version');
    PERFORM rating_changes_add_cause_day(name);
END
$$;

-- 0012's function, its indexes now from rating_changes_month_indexes.
CREATE OR REPLACE FUNCTION rating_changes_add_month(month date) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    first date := date_trunc('month', month)::date;
    month_lo timestamptz := first::timestamp AT TIME ZONE 'UTC';
    month_hi timestamptz := (first + interval '1 month')::timestamp AT TIME ZONE 'UTC';
    name text := 'rating_changes_' || to_char(first, 'YYYY_MM');
    covering text;
    n int := 1;
BEGIN
    LOCK TABLE rating_changes IN SHARE UPDATE EXCLUSIVE MODE;
    SELECT m.partition INTO covering FROM rating_changes_months() AS m WHERE m.lo < month_hi AND month_lo < m.hi LIMIT 1;
    IF covering IS NOT NULL THEN
        RETURN covering;
    END IF;
    WHILE EXISTS (SELECT 1 FROM pg_class WHERE relname = name AND relnamespace = current_schema()::regnamespace) LOOP
        n := n + 1;
        name := 'rating_changes_' || to_char(first, 'YYYY_MM') || '_' || n;
    END LOOP;
    EXECUTE format('CREATE TABLE %I (LIKE rating_changes INCLUDING DEFAULTS)', name);
    PERFORM rating_changes_month_indexes(name);
    EXECUTE format('ALTER TABLE rating_changes ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', name, month_lo, month_hi);
    RETURN name;
END
$$;

-- The months there are: each gets its index of causes by day unless it has a valid one, then loses its
-- index by ref. All are checked before any is dropped.
DO $$
DECLARE
    month record;
    valid boolean;
BEGIN
    FOR month IN SELECT m.partition FROM rating_changes_months() AS m
                 WHERE m.partition !~ '^rating_changes_before_' ORDER BY m.lo LOOP
        SELECT i.indisvalid INTO valid FROM pg_class AS c JOIN pg_index AS i ON i.indexrelid = c.oid
        WHERE c.relname = month.partition || '_cause_day' AND c.relnamespace = current_schema()::regnamespace;
        IF valid IS NULL THEN
            PERFORM rating_changes_add_cause_day(month.partition);
        ELSIF NOT valid THEN
            RAISE EXCEPTION '%_cause_day is not a valid index (a failed CONCURRENTLY build?): %', month.partition,
                'DROP INDEX it, then migrate';
        END IF;
    END LOOP;
    FOR month IN SELECT m.partition FROM rating_changes_months() AS m
                 WHERE m.partition !~ '^rating_changes_before_' LOOP
        EXECUTE format('DROP INDEX IF EXISTS %I', month.partition || '_cause_ref');
    END LOOP;
END
$$;
