-- 0012_history_partitions: the history (`rating_changes`) partitioned by month of `changed_at` (issue 42,
-- point 2), so that an old month can be detached, archived and dropped without a long lock
-- (`rating-worker history`, docs/operations.md "History by month").
--
-- One partition per calendar month (UTC) of the cause's time, named rating_changes_YYYY_MM. Months are
-- created by `rating_changes_add_month` below and by nothing else (the worker, backfill, the tests and the
-- benchmarks call it, or `rating_changes_ensure_months`): the function owns a month's shape.
--
-- Indexes: each partition carries its own, and the parent none. A unique index of a partitioned table must
-- include the partition key, so the parent's could only be UNIQUE (id, changed_at) and UNIQUE (player_id,
-- system, category, version, changed_at): neither keeps anything unique that the worker could get wrong (two
-- versions of a rating at different times would pass), and each would only be the per-partition index under
-- another name, plus a catalogue entry that every month's ATTACH must match. So a month has:
--   <month>_pkey         PRIMARY KEY (id): ids come from one sequence, unique across months; the relay and
--                        the outbox find a row by it
--   <month>_key_version  UNIQUE (player_id, system, category, version): a rating's history in version order
--                        (the read API, fair play); a backstop within the month. Versions themselves come from
--                        `ratings.version` under the player's row lock, which is what keeps them without gaps
--                        or doubles across months
--   <month>_cause_ref    (cause_ref) WHERE cause_ref IS NOT NULL: fair play, `rating-worker message`
-- A read by rating or by cause probes each attached month's index (an Append of index scans): about a B-tree
-- descent per month kept attached, which is what detaching old months bounds.
--
-- Months that do not exist yet: the store creates them before a batch writes into them (worker.store.months:
-- it keeps the months it knows, and a batch whose changed_at falls outside them has the missing ones created
-- in a short transaction of their own, lock_timeout and retried). There is no DEFAULT partition: creating a
-- month beside one would scan the default under an ACCESS EXCLUSIVE lock, and a row that lands there ties
-- its month to it. A month is built as a table of its own, then ATTACHed: ATTACH takes a SHARE UPDATE
-- EXCLUSIVE lock on the parent, which batches (ROW EXCLUSIVE) and reads (ACCESS SHARE) do not wait for,
-- where CREATE TABLE ... PARTITION OF takes ACCESS EXCLUSIVE.
--
-- An existing history is not rewritten: the table is renamed and ATTACHed as one partition,
-- rating_changes_before_YYYY_MM, of everything before the next month boundary after the migration (or after
-- its newest changed_at, when rows are dated ahead). ATTACH reads the whole table once to check the bound,
-- under an ACCESS EXCLUSIVE lock on it: batches and reads of the history wait (nothing is lost, nothing
-- fails) for about 2 s per 10 million history rows. Measured on 10,000,000 rows (4.5 GB with its indexes,
-- PostgreSQL 18): 1.7 s with the table in the OS's cache, 2.6 s from disk; a writer inserting all along
-- waited 1.65 s and 2.54 s once. The time is one read of the table: a year of a big platform's history
-- (billions of rows) waits minutes, and is better migrated in a quiet hour (docs/operations.md). An empty
-- table (a new database) is dropped instead, and the current and next months are created.
-- Workers of the previous version keep writing until that boundary (every row before it has a partition).

-- The attached partitions of the history and the range of changed_at each holds (-infinity / infinity:
-- MINVALUE / MAXVALUE). PostgreSQL keeps the bounds as an expression only; its text round-trips to a
-- timestamptz in the session that printed it.
CREATE FUNCTION rating_changes_months(OUT partition text, OUT lo timestamptz, OUT hi timestamptz)
RETURNS SETOF record LANGUAGE sql STABLE AS $$
    SELECT c.relname::text,
           CASE WHEN b[1] = 'MINVALUE' THEN '-infinity' ELSE btrim(b[1], '''')::timestamptz END,
           CASE WHEN b[2] = 'MAXVALUE' THEN 'infinity' ELSE btrim(b[2], '''')::timestamptz END
    FROM pg_inherits AS i
    JOIN pg_class AS c ON c.oid = i.inhrelid
    CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \((.+)\) TO \((.+)\)') AS b
    WHERE i.inhparent = 'rating_changes'::regclass AND NOT i.inhdetachpending
$$;

-- The month of `month` (any day of it), created and attached unless a partition covers it already; returns
-- the name of the partition that holds it. Serialized by the lock ATTACH takes anyway (SHARE UPDATE
-- EXCLUSIVE on the parent), taken first: two workers asking for one month create it once. A detached month
-- kept under the name (not dropped yet) leaves it to a new partition named rating_changes_YYYY_MM_2, ...
CREATE FUNCTION rating_changes_add_month(month date) RETURNS text LANGUAGE plpgsql AS $$
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
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY (id)', name, name || '_pkey');
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I UNIQUE (player_id, system, category, version)',
                   name, name || '_key_version');
    EXECUTE format('CREATE INDEX %I ON %I (cause_ref) WHERE cause_ref IS NOT NULL', name || '_cause_ref', name);
    EXECUTE format('ALTER TABLE rating_changes ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', name, month_lo, month_hi);
    RETURN name;
END
$$;

-- Every month that [first, last] touches, created where missing (idempotent); returns how many were
-- created. For loads of a whole range (bench/, tests); the worker asks only for the months its rows are in.
CREATE FUNCTION rating_changes_ensure_months(first timestamptz, last timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    month date := date_trunc('month', first AT TIME ZONE 'UTC')::date;
    before integer := (SELECT count(*) FROM rating_changes_months());
BEGIN
    IF first IS NULL OR last IS NULL OR first > last THEN
        RAISE EXCEPTION 'rating_changes_ensure_months(%, %): not a range', first, last;
    END IF;
    IF last - first > interval '100 years' THEN
        RAISE EXCEPTION 'rating_changes_ensure_months(%, %): more than 100 years of months', first, last;
    END IF;
    WHILE month <= (last AT TIME ZONE 'UTC')::date LOOP
        PERFORM rating_changes_add_month(month);
        month := (month + interval '1 month')::date;
    END LOOP;
    RETURN (SELECT count(*) FROM rating_changes_months()) - before;
END
$$;

-- `rating-worker history`'s statements on one month, which name it: DDL takes no parameters, so the name is
-- given to these functions as a value and quoted here (%I), after it is checked to be a month of the history
-- (a table named as rating_changes_add_month and the migration name them). The client sends only `SELECT
-- f($1)`. (DETACH ... CONCURRENTLY can run neither in a function nor in a transaction: queries.sql has it.)
CREATE FUNCTION rating_changes_month_table(month_name text) RETURNS regclass LANGUAGE plpgsql STABLE AS $$
DECLARE
    found regclass;
BEGIN
    IF month_name !~ '^rating_changes_(before_)?[0-9]{4}_[0-9]{2}(_[0-9]+)?$' THEN
        RAISE EXCEPTION 'not a month of the history: %', month_name USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT c.oid INTO found FROM pg_class AS c
    WHERE c.relname = month_name AND c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace;
    IF found IS NULL THEN
        RAISE EXCEPTION 'no month of the history named %', month_name USING ERRCODE = 'undefined_table';
    END IF;
    RETURN found;
END
$$;

-- The rows of a month (a read of the whole month).
CREATE FUNCTION rating_changes_month_rows(month_name text) RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM rating_changes_month_table(month_name);
    EXECUTE format('SELECT count(*) FROM %I', month_name) INTO n;
    RETURN n;
END
$$;

-- What `history archive` wrote of a month, kept as its table's comment.
CREATE FUNCTION rating_changes_mark_archived(month_name text, note text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM rating_changes_month_table(month_name);
    EXECUTE format('COMMENT ON TABLE %I IS %L', month_name, note);
END
$$;

-- A detached month dropped (refused while it is a partition of the history: detach it first).
CREATE FUNCTION rating_changes_drop_month(month_name text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    month regclass := rating_changes_month_table(month_name);
BEGIN
    IF EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = month) THEN
        RAISE EXCEPTION '% is a partition of the history: detach it first', month_name
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    EXECUTE format('DROP TABLE %I', month_name);
END
$$;

-- The table as it stands becomes the parent's first partition (or goes, when empty).
DO $$
DECLARE
    old_table regclass;
    bound timestamptz := (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
    newest timestamptz;
    name text;
    grant_row record;
BEGIN
    ALTER TABLE rating_changes RENAME TO rating_changes_unpartitioned;
    old_table := 'rating_changes_unpartitioned'::regclass;
    CREATE TABLE rating_changes (LIKE rating_changes_unpartitioned INCLUDING DEFAULTS)
        PARTITION BY RANGE (changed_at);
    -- The ids' sequence follows the history, not its first partition (dropped one day, and the sequence with it).
    ALTER SEQUENCE rating_changes_id_seq OWNED BY rating_changes.id;  -- 0001's bigserial
    -- Whoever could read or write the history still can (the read-only role of deploy/postgres).
    FOR grant_row IN
        SELECT a.privilege_type AS privilege, a.grantee = 0 AS to_public, pg_get_userbyid(a.grantee) AS grantee_name
        FROM pg_class AS c CROSS JOIN LATERAL aclexplode(c.relacl) AS a
        WHERE c.oid = old_table AND a.grantee <> c.relowner
    LOOP
        -- A privilege is a keyword (no %I for it): one of PostgreSQL's table privileges, or nothing is run.
        IF grant_row.privilege NOT IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES',
                                       'TRIGGER', 'MAINTAIN') THEN
            RAISE EXCEPTION 'rating_changes: unexpected privilege %', grant_row.privilege;
        ELSIF grant_row.to_public THEN
            EXECUTE format('GRANT %s ON rating_changes TO PUBLIC', grant_row.privilege);
        ELSE
            EXECUTE format('GRANT %s ON rating_changes TO %I', grant_row.privilege, grant_row.grantee_name);
        END IF;
    END LOOP;

    IF NOT EXISTS (SELECT 1 FROM rating_changes_unpartitioned) THEN
        DROP TABLE rating_changes_unpartitioned CASCADE;  -- and the views on it, made again below
        PERFORM rating_changes_ensure_months(now(), now() + interval '1 month');
        RETURN;
    END IF;

    BEGIN
        EXECUTE format('ALTER TABLE rating_changes ATTACH PARTITION rating_changes_unpartitioned '
                       'FOR VALUES FROM (MINVALUE) TO (%L)', bound);
    EXCEPTION WHEN check_violation THEN
        -- Rows dated after the boundary (a producer's clock ahead): the partition reaches past the newest.
        SELECT max(changed_at) INTO newest FROM rating_changes_unpartitioned;
        bound := (date_trunc('month', newest AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
        EXECUTE format('ALTER TABLE rating_changes ATTACH PARTITION rating_changes_unpartitioned '
                       'FOR VALUES FROM (MINVALUE) TO (%L)', bound);
    END;
    name := 'rating_changes_before_' || to_char(bound AT TIME ZONE 'UTC', 'YYYY_MM');
    EXECUTE format('ALTER TABLE rating_changes_unpartitioned RENAME TO %I', name);
    EXECUTE format('ALTER TABLE %I RENAME CONSTRAINT rating_changes_pkey TO %I', name, name || '_pkey');
    EXECUTE format('ALTER TABLE %I RENAME CONSTRAINT rating_changes_key_version TO %I', name, name || '_key_version');
    EXECUTE format('ALTER INDEX rating_changes_cause_ref RENAME TO %I', name || '_cause_ref');
END
$$;

-- The views read the parent (a view follows the table it was made on, renamed or not; or went with it).
CREATE OR REPLACE VIEW published_changes AS
SELECT c.id, c.player_id, c.system, c.category, c.version, c.cause_type, c.cause_source, c.cause_id,
       c.cause_ref, c.changed_at,
       CASE WHEN c.payload IS NULL THEN c.before_rating ELSE (d.data -> 'before' ->> 'rating')::float8 END
           AS before_rating,
       CASE WHEN c.payload IS NULL THEN c.after_rating ELSE (d.data -> 'after' ->> 'rating')::float8 END
           AS after_rating,
       CASE WHEN c.payload IS NOT NULL THEN (d.data ->> 'delta')::float8
            WHEN c.before_rating IS NOT NULL AND c.after_rating IS NOT NULL THEN c.delta END AS delta
FROM rating_changes AS c
CROSS JOIN LATERAL (SELECT convert_from(c.payload, 'UTF8')::jsonb -> 'data' AS data) AS d;
