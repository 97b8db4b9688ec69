-- Every SQL statement the store runs, by name: `worker.store.queries.QUERIES["name"]`.
--
-- A block starts with a line `-- name: <name>`; the comment lines right after it document the
-- statement and are not sent.
--
-- A batch's writes are COPYed into the session's staging tables (create_staging) and moved by one
-- statement (save). Its reads, and the few rows of its other writes (unrated players, closures),
-- travel as ONE jsonb parameter per group of rows (a JSON array of row arrays, written by orjson
-- through the connection's jsonb codec) and are expanded on the server with jsonb_array_elements():
-- one round trip per statement whatever the batch size. Measured on 1,000 history rows, this costs
-- ~2 ms of client CPU against ~14 ms for one asyncpg array parameter per column (asyncpg encodes
-- arrays element by element, ~1 us each), and less wall time too; COPY costs the client more (~0.14
-- us a field) and the server much less.
-- JSON numbers convert to float8 exactly ((e->>i)::float8 parses the shortest repr orjson wrote).
-- Payload bytes travel as one concatenated bytea, cut with substring() by offset and length.
-- Times cross the boundary as epoch seconds (float8); to_timestamp() and extract(epoch ...) convert
-- on the server, so the Python side never builds datetimes.


-- ---------------------------------------------------------------------------------------------
-- Batch transaction (PostgresStore.transaction), in the order the engine calls them
-- ---------------------------------------------------------------------------------------------

-- name: lock_players_insert
-- $1 jsonb array of player ids. Create the lock anchors of players never seen. Rows are inserted
-- in one fixed (byte) order, the same as the FOR UPDATE below: a new row is locked by its
-- uncommitted insert, so inserting in a fixed order is taking those locks in a fixed order, and two
-- batches with overlapping players can not wait for each other in a cycle. Existing rows are left
-- alone (DO NOTHING does not wait on row locks, only on another transaction's insert of the same id).
INSERT INTO players (player_id)
SELECT p FROM jsonb_array_elements_text($1::jsonb) AS u(p)
ORDER BY p COLLATE "C"
ON CONFLICT (player_id) DO NOTHING;

-- name: lock_players_select
-- $1 jsonb array of player ids. Lock every player row in byte order (ORDER BY runs before the row
-- locks are taken), and return the closures at the same time so `closed_accounts` needs no round
-- trip. Must be its own statement, after the insert: in READ COMMITTED each statement takes a new
-- snapshot, so rows inserted by a batch we waited for are visible, and locked, here.
-- A join, not `player_id = ANY(array)`: with stale statistics the planner may pick a seq scan, and
-- ANY over a non-constant array is a linear search per row (measured: 50 ms instead of 3 ms for
-- 1,000 ids against 3,000 players); a join is linear whatever the plan.
SELECT p.player_id, p.closed_reason, extract(epoch FROM p.closed_at)::float8 AS closed_at
FROM jsonb_array_elements_text($1::jsonb) AS u(player_id)
JOIN players AS p ON p.player_id = u.player_id
ORDER BY p.player_id
FOR UPDATE OF p;

-- name: processed
-- $1 jsonb [[source, id], ...]: the pairs already processed. Found by their digest (index
-- processed_messages_key, migration 0013), the texts compared as well.
SELECT m.source, m.id
FROM jsonb_array_elements($1::jsonb) AS e
JOIN processed_messages AS m
  ON message_key(m.source, m.id) = message_key(e->>0, e->>1) AND m.source = e->>0 AND m.id = e->>1;

-- name: closed_accounts
-- $1 jsonb array of player ids: those closed for fair play, with the closure time (epoch
-- seconds). Only used for players not locked by this transaction (lock_players_select returns
-- the others): the plan's read. The WHERE matches the partial index players_fair_play (migration
-- 0004), so each id probes that small index, not the players table.
SELECT p.player_id, extract(epoch FROM p.closed_at)::float8 AS closed_at
FROM jsonb_array_elements_text($1::jsonb) AS u(player_id)
JOIN players AS p ON p.player_id = u.player_id
WHERE p.closed_reason = 'fair_play' AND p.closed_at IS NOT NULL;

-- name: scan_states
-- $1 system, $2 player_id, $3 category: the next $4 stored states of the system after that key, in key
-- order (a sweep's pages, worker.engine.sweep; the primary key's range, other systems' rows filtered).
SELECT r.player_id, r.system, r.category, r.rating, r.rd, r.volatility, r.games, r.peak,
       r.last_at, r.version, r.extra
FROM ratings AS r
WHERE (r.player_id, r.system, r.category) > ($2::text, $1::text, $3::text) AND r.system = $1
ORDER BY r.player_id, r.system, r.category
LIMIT $4;

-- name: load_states
-- $1 jsonb [[player_id, system, category], ...]: the stored states of these keys.
SELECT r.player_id, r.system, r.category, r.rating, r.rd, r.volatility, r.games, r.peak,
       r.last_at, r.version, r.extra
FROM jsonb_array_elements($1::jsonb) AS e
JOIN ratings AS r ON r.player_id = e->>0 AND r.system = e->>1 AND r.category = e->>2;

-- name: versions_changed
-- $1 jsonb [[player_id, system, category, version], ...]: the positions (from 1) of the keys whose
-- stored version is not the one given (0: expected not stored). A plan's check under the locks:
-- nothing comes back when it holds, so no state crosses the wire twice.
SELECT e.i
FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(v, i)
LEFT JOIN ratings AS r ON r.player_id = e.v->>0 AND r.system = e.v->>1 AND r.category = e.v->>2
WHERE coalesce(r.version, 0) <> (e.v->>3)::int4;

-- name: games_with
-- $1 player, $2 system, $3 cause type, $4 since, $5 until (epoch seconds, both included): both
-- sides of every game of that type that changed the player's rating in that system in the window
-- (fair-play refunds). The player's own rows come from the (player_id, system, category, version)
-- key, the other sides from each month's index of causes by day (migration 0014: every side of a cause
-- has its time, so its day); the player's own rows are returned too.
SELECT o.cause_source, o.cause_id, o.player_id, o.category, o.delta,
       extract(epoch FROM o.changed_at)::float8 AS at
FROM rating_changes AS x
JOIN rating_changes AS o
  ON change_day(o.changed_at) = change_day(x.changed_at) AND o.cause_ref = x.cause_ref
 AND o.cause_source = x.cause_source AND o.cause_id = x.cause_id AND o.system = x.system
WHERE x.player_id = $1 AND x.system = $2 AND x.cause_type = $3
  AND x.changed_at BETWEEN to_timestamp($4::float8) AND to_timestamp($5::float8)
ORDER BY o.id;

-- name: ratings_at_most
-- $1 system, $2 category, $3 RD: player_id, rating of the ratings with RD at most $3 (Chess Tempo's
-- top group, once per UTC day and mode; a scan of the system's ratings in that category).
SELECT player_id, rating FROM ratings WHERE system = $1 AND category = $2 AND rd <= $3::float8;

-- name: create_staging
-- Per connection of the worker's pool (worker.store.postgres.create_pool): the session's own tables
-- a batch's new states, history rows and processed ids are COPYed into before `save` moves them
-- (emptied at every commit). COPY's binary rows are encoded by asyncpg in C, column by column: ~2x
-- less database time per batch than the same rows as one jsonb parameter per group, parsed and
-- taken apart with ->> on the server (./dev bench limit, issue 21). Times stay epoch seconds here
-- (float8) so that the client never builds datetimes; `save` converts them.
CREATE TEMP TABLE IF NOT EXISTS staged_states (
    player_id text COLLATE "C", system text COLLATE "C", category text COLLATE "C",
    rating float8, rd float8, volatility float8, games int4, peak float8, last_at float8,
    version int4, extra jsonb
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS staged_changes (
    ord int4, event_id text COLLATE "C", player_id text COLLATE "C", system text COLLATE "C",
    category text COLLATE "C", version int4, rating float8, delta float8, cause_type text COLLATE "C",
    cause_source text COLLATE "C", cause_id text COLLATE "C", cause_ref text COLLATE "C",
    changed_at float8, before_rating float8, before_rd float8, before_volatility float8,
    after_rating float8, after_rd float8, after_volatility float8, provisional bool, floor float8,
    games int4, cause_time text, inactive bool, parameters text
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS staged_processed (
    source text COLLATE "C", id text COLLATE "C", type text COLLATE "C", outcome text COLLATE "C",
    reason text, duplicates int4, ref text
) ON COMMIT DELETE ROWS;

-- name: clear_staging
-- The rows a batch staged from its plan, when the plan no longer holds under the locks (rare).
DELETE FROM staged_states;
DELETE FROM staged_changes;
DELETE FROM staged_processed;

-- name: save
-- Everything a batch writes, in one statement once its rows are staged (create_staging: COPY, one
-- round trip per table with rows): every data-modifying WITH runs once and to completion whether or
-- not the final SELECT reads it.
--   staged_states     the new states
--   staged_processed  outcome "duplicate" counts more deliveries of a message processed by an earlier
--                     batch on its row (migration 0005)
--   staged_changes    the history rows, `ord` their order in the batch: ids are drawn in that order,
--                     so that the relay (ORDER BY id) publishes a player's changes in version order
--   $1 unrated    jsonb [player_id, source, id, system, reason, message_at (epoch seconds or null)]
--                 (migration 0005; few)
--   $2 closures   jsonb [player_id, closed_at (epoch seconds)]          (fair play; rare)
--   $3 publish    true: every history row gets its outbox row and (id, event_id) comes back (the
--                 worker); false: neither (a backfill of a platform's history, which is not published)
-- The rating.changed bytes are not stored: the columns are (migration 0003), and
-- worker.contract.changed.encode_change rebuilds the bytes from them for the relay.
-- With $3, every history row also gets its outbox row (same statement, same transaction):
-- unpublished until mark_published deletes it, and (id, event_id) of the history rows comes back;
-- event ids are unique, the caller maps them back to input order.
-- The ratings upsert stays ON CONFLICT DO UPDATE. Its updates are not HOT: the leaderboard index
-- (migration 0002) covers `rating`. Measured: an UPDATE ... FROM for the existing keys plus an INSERT
-- for the new ones writes half the WAL records (no separate row-lock record) but is no faster (27 ms
-- against 26 ms for 2,000 rows).
WITH
states AS (
    INSERT INTO ratings AS r
        (player_id, system, category, rating, rd, volatility, games, peak, last_at, version, extra)
    SELECT player_id, system, category, rating, rd, volatility, games, peak, last_at, version, extra
    FROM staged_states
    ON CONFLICT (player_id, system, category) DO UPDATE SET
        rating = excluded.rating,
        rd = excluded.rd,
        volatility = excluded.volatility,
        games = excluded.games,
        peak = excluded.peak,
        last_at = excluded.last_at,
        version = excluded.version,
        extra = excluded.extra,
        updated_at = now()
),
processed AS (
    INSERT INTO processed_messages (source, id, type, outcome, reason, duplicates, ref)
    SELECT source, id, type, outcome, reason, duplicates, ref
    FROM staged_processed
    WHERE outcome <> 'duplicate'
),
repeats AS (
    UPDATE processed_messages AS m SET duplicates = m.duplicates + s.duplicates
    FROM staged_processed AS s
    WHERE s.outcome = 'duplicate' AND message_key(m.source, m.id) = message_key(s.source, s.id)
      AND m.source = s.source AND m.id = s.id
),
unrated AS (
    INSERT INTO unrated_players (player_id, source, id, system, reason, message_at)
    SELECT e->>0, e->>1, e->>2, e->>3, e->>4, to_timestamp((e->>5)::float8)
    FROM jsonb_array_elements($1::jsonb) AS e
),
closures AS (
    INSERT INTO players AS p (player_id, closed_at, closed_reason)
    SELECT e->>0, to_timestamp((e->>1)::float8), 'fair_play'
    FROM jsonb_array_elements($2::jsonb) AS e
    ON CONFLICT (player_id) DO UPDATE SET
        closed_at = excluded.closed_at,
        closed_reason = excluded.closed_reason
),
changes AS (
    INSERT INTO rating_changes
        (event_id, player_id, system, category, version, rating, delta, cause_type, cause_source,
         cause_id, cause_ref, changed_at, before_rating, before_rd, before_volatility, after_rating,
         after_rd, after_volatility, provisional, floor, games, cause_time, inactive, parameters)
    SELECT event_id, player_id, system, category, version, rating, delta, cause_type, cause_source,
           cause_id, cause_ref, to_timestamp(changed_at), before_rating, before_rd, before_volatility,
           after_rating, after_rd, after_volatility, provisional, floor, games, cause_time, inactive, parameters
    FROM staged_changes
    ORDER BY ord
    RETURNING id, event_id
),
outbox AS (
    INSERT INTO outbox (change_id)
    SELECT id FROM changes WHERE $3::bool
)
SELECT id, event_id FROM changes WHERE $3::bool;


-- ---------------------------------------------------------------------------------------------
-- Backfill (worker.store.bulk, worker.commands.backfill): a history loaded in large chunks, each
-- written by the staging tables and `save` above in one transaction with the file's position
-- ---------------------------------------------------------------------------------------------

-- name: backfill_lock
-- One backfill at a time per database: a session-level advisory lock, held by the command's own
-- connection for the whole run (released when it ends, however it ends).
SELECT pg_try_advisory_lock(hashtext('rating-worker backfill'));

-- name: backfill_runs
-- Every history file backfilled into this database, finished or not, in the order they were started.
SELECT head_digest, name, digest, bytes_done, lines_done, processed, changes, published, finished_at
FROM backfill_progress
ORDER BY started_at, head_digest;

-- name: backfill_written
-- What the database holds that a backfill checks before it starts: the processed ids (all of them
-- written by finished backfills, or none) and whether any player or rating exists at all.
SELECT (SELECT count(*) FROM processed_messages) AS processed,
       EXISTS (SELECT 1 FROM players) OR EXISTS (SELECT 1 FROM ratings) AS anything;

-- name: backfill_record
-- $1 head digest, $2 name, $3 digest, $4 bytes done, $5 lines done, $6 processed, $7 changes (rows
-- written so far by the file), $8 published, $9 finished: where the file stands, in the transaction
-- of the chunk that got it there.
INSERT INTO backfill_progress AS b
    (head_digest, name, digest, bytes_done, lines_done, processed, changes, published, finished_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $9::bool THEN now() END)
ON CONFLICT (head_digest) DO UPDATE SET
    digest = excluded.digest,
    bytes_done = excluded.bytes_done,
    lines_done = excluded.lines_done,
    processed = excluded.processed,
    changes = excluded.changes,
    updated_at = now(),
    finished_at = excluded.finished_at;

-- name: backfill_states
-- Every stored state, for a backfill that resumes (or loads a second file): the engine's memory.
SELECT player_id, system, category, rating, rd, volatility, games, peak, last_at, version, extra
FROM ratings;

-- name: backfill_players
-- Every player (the lock anchors a backfill writes for new ones) with his fair-play closure, if any.
SELECT player_id, closed_reason, extract(epoch FROM closed_at)::float8 AS closed_at
FROM players;


-- ---------------------------------------------------------------------------------------------
-- Outbox relay (outside batch transactions)
-- ---------------------------------------------------------------------------------------------

-- name: mark_published
-- $1 int8[] of history row ids: remove them from the outbox. Idempotent (ids already gone match
-- nothing); the history rows are not touched. `= ANY(array)` here, not a join: the planner gets
-- a bitmap scan of the primary key that visits each outbox page once, and rows are deleted (row
-- locked) in an order that does not depend on the order of the ids given. Measured on 2,000 ids:
-- 3.1 ms, against 7.7 ms for a join on unnest() or on jsonb_array_elements() (one index probe per
-- id, in the caller's order).
DELETE FROM outbox WHERE change_id = ANY($1::int8[]);

-- name: unpublished
-- $1 limit, $2 minimum age in seconds: history rows still in the outbox, oldest first, with what
-- rebuilds their rating.changed (payload: rows written before migration 0003).
SELECT r.id, r.payload, r.event_id, r.player_id, r.system, r.category, r.version, r.rating, r.delta,
       r.cause_type, r.cause_source, r.cause_id, r.cause_ref,
       extract(epoch FROM r.changed_at)::float8 AS changed_at,
       r.before_rating, r.before_rd, r.before_volatility, r.after_rating, r.after_rd,
       r.after_volatility, r.provisional, r.floor, r.games, r.cause_time, r.inactive,
       r.parameters
FROM outbox AS o
JOIN rating_changes AS r ON r.id = o.change_id
WHERE o.created_at <= now() - make_interval(secs => $2::float8)
ORDER BY o.change_id
LIMIT $1;

-- name: history_rows
-- Every history row, in order, with what rebuilds its rating.changed (as `unpublished` returns them).
SELECT r.id, r.payload, r.event_id, r.player_id, r.system, r.category, r.version, r.rating, r.delta,
       r.cause_type, r.cause_source, r.cause_id, r.cause_ref,
       extract(epoch FROM r.changed_at)::float8 AS changed_at,
       r.before_rating, r.before_rd, r.before_volatility, r.after_rating, r.after_rd,
       r.after_volatility, r.provisional, r.floor, r.games, r.cause_time, r.inactive,
       r.parameters
FROM rating_changes AS r
ORDER BY r.id;

-- name: outbox_backlog
-- History rows not yet published (the outbox is small: a count is cheap).
SELECT count(*) FROM outbox;


-- ---------------------------------------------------------------------------------------------
-- Retention (worker.store.retention, run by the worker's side task worker.pipeline.retention): expired
-- processed ids and unrated rows removed in chunks, one short transaction each, outside batch transactions
-- ---------------------------------------------------------------------------------------------

-- name: retention_limits
-- $1 lock_timeout, $2 statement_timeout (PostgreSQL durations): for this chunk's transaction only.
SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true);

-- name: retention_lock
-- One worker of the group removes at a time: the others' passes skip (released at the chunk's commit).
SELECT pg_try_advisory_xact_lock(hashtext('rating-worker retention'));

-- name: retention_processed
-- $1 outcome (applied, unrated), $2 window in seconds, $3 how many: remove up to $3 of that outcome's ids
-- stored more than the window ago, oldest first (a range of index processed_messages_expiry, migration
-- 0011), with the unrated rows of the same messages (index unrated_players_message): a player's unrated row
-- never outlives its message's id, so `player_unrated` finds its id, and a message applied again after its
-- id expired can store its rows again. SKIP LOCKED: a row a batch holds (the `repeats` count of a duplicate
-- of it) is left for the next pass, never waited for; the rows are locked here, so their ctid holds.
WITH expired AS (
    SELECT ctid FROM processed_messages
    WHERE outcome = $1 AND processed_at < now() - make_interval(secs => $2::float8)
    ORDER BY processed_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM processed_messages
    WHERE ctid = ANY(ARRAY(SELECT ctid FROM expired))
    RETURNING source, id
),
left_out AS (
    DELETE FROM unrated_players AS u USING gone AS g
    WHERE u.source = g.source AND u.id = g.id
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS ids, (SELECT count(*) FROM left_out) AS unrated;

-- name: retention_unrated
-- $1 window in seconds, $2 how many: remove up to $2 unrated rows stored more than the window ago, oldest
-- first (index unrated_players_expiry, migration 0011); their messages' ids stay as long as theirs.
WITH expired AS (
    SELECT ctid FROM unrated_players
    WHERE processed_at < now() - make_interval(secs => $1::float8)
    ORDER BY processed_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM unrated_players WHERE ctid = ANY(ARRAY(SELECT ctid FROM expired))
    RETURNING 1
)
SELECT count(*) FROM gone;

-- name: retention_oldest
-- The age in seconds of the oldest row kept of each kind (null: none), each the first entry of its range
-- of an expiry index (migration 0011).
SELECT extract(epoch FROM now() - (SELECT min(processed_at) FROM processed_messages
                                    WHERE outcome = 'applied'))::float8 AS applied,
       extract(epoch FROM now() - (SELECT min(processed_at) FROM processed_messages
                                    WHERE outcome = 'unrated'))::float8 AS unrated_ids,
       extract(epoch FROM now() - (SELECT min(processed_at) FROM unrated_players))::float8 AS unrated_players;

-- name: table_sizes
-- $1 text[] of table names: each one's bytes on disk, its rows (with TOAST) and its indexes apart, summed
-- over its partitions when it is partitioned (pg_partition_tree's leaves; it gives none for a plain table,
-- which is its own). Sizes are read from the files' lengths: no table is scanned.
SELECT t.name, coalesce(sum(pg_table_size(p.relid)), 0)::int8 AS table_bytes,
       coalesce(sum(pg_indexes_size(p.relid)), 0)::int8 AS index_bytes
FROM unnest($1::text[]) AS t(name)
LEFT JOIN LATERAL (
    SELECT c.oid::regclass FROM pg_class AS c WHERE c.oid = to_regclass(t.name) AND c.relkind = 'r'
    UNION ALL
    SELECT relid FROM pg_partition_tree(to_regclass(t.name)) WHERE isleaf
) AS p(relid) ON true
GROUP BY t.name
ORDER BY t.name;


-- ---------------------------------------------------------------------------------------------
-- The history's months (migration 0012; worker.store.months): the partitions of rating_changes, one per
-- month of changed_at, created before a write needs them, and detached, archived and dropped by
-- `rating-worker history`. Statements on one month take its name: the server quotes it (format's %I)
-- into the statement the store then runs, for DDL takes no parameters.
-- ---------------------------------------------------------------------------------------------

-- name: months_attached
-- The attached months and the range of changed_at each holds, in epoch seconds (-Infinity: the history
-- from before partitioning has no lower bound).
SELECT partition, extract(epoch FROM lo)::float8 AS lo, extract(epoch FROM hi)::float8 AS hi
FROM rating_changes_months()
ORDER BY lo;

-- name: months_lock_timeout
-- $1 lock_timeout (a PostgreSQL duration), for the creating transaction only: ATTACH waits for a SHARE
-- UPDATE EXCLUSIVE lock on the parent, which another month being created or detached holds.
SELECT set_config('lock_timeout', $1, true);

-- name: months_add
-- $1 a day of the month: its partition, created and attached unless one holds it (migration 0012).
SELECT rating_changes_add_month($1::date);

-- name: months_list
-- Every month, attached, being detached (a DETACH ... CONCURRENTLY interrupted) or detached and kept:
-- its bounds when attached, its size, the planner's estimate of its rows (-1: never vacuumed nor analyzed)
-- and its comment (where `history archive` wrote it).
SELECT c.relname::text AS name, extract(epoch FROM m.lo)::float8 AS lo, extract(epoch FROM m.hi)::float8 AS hi,
       i.inhrelid IS NOT NULL AS attached, coalesce(i.inhdetachpending, false) AS detaching,
       c.reltuples::int8 AS rows_estimate, pg_total_relation_size(c.oid) AS bytes,
       obj_description(c.oid, 'pg_class') AS archived
FROM pg_class AS c
LEFT JOIN pg_inherits AS i ON i.inhrelid = c.oid AND i.inhparent = 'rating_changes'::regclass
LEFT JOIN rating_changes_months() AS m ON m.partition = c.relname
WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
  AND c.relname ~ '^rating_changes_(before_)?[0-9]{4}_[0-9]{2}(_[0-9]+)?$'
ORDER BY c.relname;

-- name: months_count
-- $1 a month's name: its rows (a read of the whole month; migration 0012's function quotes the name).
SELECT rating_changes_month_rows($1::text);

-- name: months_unpublished
-- $1 a month's name: its history rows still in the outbox (changes the broker has not acknowledged).
SELECT count(*) FROM outbox AS o JOIN rating_changes AS r ON r.id = o.change_id
WHERE r.tableoid = rating_changes_month_table($1::text);

-- name: months_detach
-- $1 a month's name: the statement that detaches it without blocking the batches (CONCURRENTLY: a SHARE
-- UPDATE EXCLUSIVE lock, then a wait for the transactions that could see it). The one statement the server
-- builds for the client to run (with the next): DETACH ... CONCURRENTLY can run neither in a transaction
-- block nor in a function, and DDL takes no parameters; the name is quoted here (%I) and checked first by
-- rating_changes_month_table (tests/unit/test_hostile_input.py names these two).
SELECT format('ALTER TABLE rating_changes DETACH PARTITION %I CONCURRENTLY', rating_changes_month_table($1::text)::text);

-- name: months_detach_finalize
-- $1 a month's name: the statement that completes a detach that was interrupted.
SELECT format('ALTER TABLE rating_changes DETACH PARTITION %I FINALIZE', rating_changes_month_table($1::text)::text);

-- name: months_mark_archived
-- $1 a month's name, $2 what the archive was (the file, its rows and bytes, when): kept as the table's comment.
SELECT rating_changes_mark_archived($1::text, $2::text);

-- name: months_drop
-- $1 a month's name: dropped, once detached (no lock on the history; refused while attached).
SELECT rating_changes_drop_month($1::text);


-- ---------------------------------------------------------------------------------------------
-- Migrations (worker/store/migrate.py)
-- ---------------------------------------------------------------------------------------------

-- name: migrations_lock
-- $1 lock key. Session-level: held across the per-migration transactions, so that workers
-- starting at the same time migrate one after the other.
SELECT pg_advisory_lock($1::int8);

-- name: migrations_unlock
SELECT pg_advisory_unlock($1::int8);

-- name: migrations_bootstrap
-- The table the migrator reads before it knows anything; 0001_initial declares it too.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    checksum   text NOT NULL
);

-- name: migrations_table_exists
SELECT to_regclass('schema_migrations') IS NOT NULL;

-- name: migrations_applied
SELECT version, name, checksum FROM schema_migrations ORDER BY version;

-- name: migrations_current
SELECT coalesce(max(version), 0) FROM schema_migrations;

-- name: migrations_record
-- $1 version, $2 name, $3 checksum (sha256 of the file).
INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3);


-- ---------------------------------------------------------------------------------------------
-- The operator's commands (worker/operator.py): reads only, outside batch transactions
-- ---------------------------------------------------------------------------------------------

-- name: leaderboard
-- $1 system, $2 category, $3 how many: the best established ratings (view `leaderboard`, served by
-- the partial index ratings_leaderboard: n index entries read, no sort).
SELECT player_id, rating, rd, games, peak, version, to_timestamp(last_at) AS last_played_at
FROM leaderboard
WHERE system = $1 AND category = $2
ORDER BY rating DESC, player_id
LIMIT $3;

-- name: leaderboard_active
-- $1 system, $2 category, $3 how many, $4 epoch seconds: the best established ratings of players who
-- played since then (the same partial index, read in order; the inactive entries are skipped as met).
SELECT player_id, rating, rd, games, peak, version, to_timestamp(last_at) AS last_played_at
FROM leaderboard
WHERE system = $1 AND category = $2 AND last_at >= $4
ORDER BY rating DESC, player_id
LIMIT $3;

-- name: demo_status
-- The demo's screen: changes awaiting publication, and the newest change's id (the movers' window
-- starts at the id the newest had half a minute ago).
SELECT (SELECT count(*) FROM outbox) AS unpublished,
       (SELECT coalesce(max(id), 0) FROM rating_changes) AS newest_change;

-- name: demo_processed
-- $1 source: how many of its messages were processed (the demo waits for its own to be).
SELECT count(*) FROM processed_messages WHERE source = $1;

-- name: provisional_movers
-- $1 change id, $2 how many: the CSR ratings still provisional (RD > 110, the leaderboard's rule) that
-- moved most through the changes after that id (the primary key's range), with where they are now.
SELECT c.player_id, c.category, sum(c.delta) AS moved, r.rating, r.rd
FROM rating_changes AS c
JOIN ratings AS r ON r.player_id = c.player_id AND r.system = c.system AND r.category = c.category
WHERE c.id > $1 AND c.system = 'csr' AND r.rd > 110
GROUP BY c.player_id, c.category, r.rating, r.rd
ORDER BY abs(sum(c.delta)) DESC, c.player_id, c.category
LIMIT $2;

-- name: player_account
-- $1 player id: the account row (absent for a player never seen).
SELECT player_id, closed_reason, closed_at FROM players WHERE player_id = $1;

-- name: player_ratings
-- $1 player id, $2 the systems that publish ratings: every rating of his, with the provisional mark and
-- floor of its latest change (as published: each system's own rule, computed once by the engine). A
-- system's internal records (Chess Tempo's repeat records) are not ratings.
SELECT r.system, r.category, r.rating, r.rd, r.volatility, r.games, r.peak, r.version,
       to_timestamp(r.last_at) AS last_at,
       coalesce(to_jsonb(c.provisional),
                convert_from(c.payload, 'UTF8')::jsonb -> 'data' -> 'provisional') AS provisional,
       CASE WHEN c.payload IS NULL THEN to_jsonb(c.floor)
            ELSE convert_from(c.payload, 'UTF8')::jsonb -> 'data' -> 'floor' END AS floor,
       CASE WHEN c.payload IS NULL THEN to_jsonb(c.after_rating)
            ELSE convert_from(c.payload, 'UTF8')::jsonb -> 'data' -> 'after' -> 'rating' END AS shown,
       CASE WHEN c.payload IS NULL THEN to_jsonb(c.inactive)
            ELSE convert_from(c.payload, 'UTF8')::jsonb -> 'data' -> 'inactive' END AS inactive,
       r.last_at AS last_at_s, r.extra
FROM ratings AS r
LEFT JOIN rating_changes AS c
  ON c.player_id = r.player_id AND c.system = r.system AND c.category = r.category
 AND c.version = r.version
WHERE r.player_id = $1 AND r.system = ANY($2::text[])
ORDER BY r.system, r.category;

-- name: player_history
-- $1 player id, $2 how many, $3 system or null, $4 category or null: the latest changes, newest
-- first (the rating_changes_key_version index: per rating, in order of version), as published.
SELECT system, category, version, before_rating AS before, after_rating AS rating, delta, cause_type,
       cause_source, cause_id, cause_ref, changed_at
FROM published_changes
WHERE player_id = $1 AND ($3::text IS NULL OR system = $3) AND ($4::text IS NULL OR category = $4)
ORDER BY changed_at DESC, id DESC
LIMIT $2;

-- name: player_series
-- $1 player id, $2 system or null, $3 category or null, $4 how many of each rating's latest changes: his
-- ratings' histories for his charts, oldest first per rating, with the rating's number of changes (its
-- version). Each rating reads only its last $4 changes, a range of the rating_changes_key_version index,
-- so that a player with tens of thousands of games costs what the chart shows. The values as published;
-- rows written before migration 0003 carry them in their payload only (parsed once a row).
SELECT r.system, r.category, r.version AS changes, c.version, c.changed_at,
       CASE WHEN c.payload IS NULL THEN c.after_rating ELSE (d.data -> 'after' ->> 'rating')::float8 END AS rating,
       CASE WHEN c.payload IS NULL THEN c.after_rd ELSE (d.data -> 'after' ->> 'rd')::float8 END AS rd,
       CASE WHEN c.payload IS NULL THEN c.floor ELSE (d.data ->> 'floor')::float8 END AS floor,
       CASE WHEN c.payload IS NULL THEN c.provisional ELSE (d.data ->> 'provisional')::boolean END AS provisional
FROM ratings AS r
JOIN rating_changes AS c
  ON c.player_id = r.player_id AND c.system = r.system AND c.category = r.category AND c.version > r.version - $4
CROSS JOIN LATERAL (SELECT convert_from(c.payload, 'UTF8')::jsonb -> 'data' AS data) AS d
WHERE r.player_id = $1 AND ($2::text IS NULL OR r.system = $2) AND ($3::text IS NULL OR r.category = $3)
ORDER BY r.system, r.category, c.version;

-- name: outbox_oldest
-- The outbox's size and its oldest unpublished change (the relay publishes rows older than a few
-- seconds; an old one here means publishing is stuck).
SELECT (SELECT count(*) FROM outbox) AS backlog,
       o.created_at, r.event_id, r.player_id, r.system, r.category, r.version, r.changed_at
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (SELECT * FROM outbox ORDER BY change_id LIMIT 1) AS o ON true
LEFT JOIN rating_changes AS r ON r.id = o.change_id;

-- name: player_unrated
-- $1 player id, $2 how many, $3 system or null: the latest valid messages that left him unchanged, and
-- why (migration 0005), newest first by the message's own time (the primary key finds a player's rows; they are sorted
-- here: a player has few).
SELECT u.system, u.reason, u.message_at, u.source, u.id, m.type, m.ref
FROM unrated_players AS u
JOIN processed_messages AS m
  ON message_key(m.source, m.id) = message_key(u.source, u.id) AND m.source = u.source AND m.id = u.id
WHERE u.player_id = $1 AND ($3::text IS NULL OR u.system = $3)
ORDER BY u.message_at DESC NULLS LAST, u.source, u.id
LIMIT $2;

-- name: message_processed
-- $1 source, $2 id: the processed message (no row: never processed).
SELECT type, outcome, reason, ref, duplicates, processed_at FROM processed_messages
WHERE message_key(source, id) = message_key($1, $2) AND source = $1 AND id = $2;

-- name: message_changes_by_ref
-- $1 source, $2 id, $3 its ref (game, competition or puzzle id): the rating changes it caused (index
-- each month's index of causes, migration 0014), as published.
SELECT player_id, system, category, version, before_rating, after_rating AS rating, delta, changed_at
FROM published_changes
WHERE cause_ref = $3 AND cause_source = $1 AND cause_id = $2
ORDER BY player_id, system, category, version;

-- name: message_changes_without_ref
-- $1 source, $2 id: the rating changes caused by a message of a type without a ref (an import, a fair-play
-- closure; worker.contract.types.WITHOUT_REF), found by each month's index of such causes (migration
-- 0015). As published.
SELECT player_id, system, category, version, before_rating, after_rating AS rating, delta, changed_at
FROM published_changes
WHERE cause_source = $1 AND cause_id = $2 AND cause_ref IS NULL
ORDER BY player_id, system, category, version;

-- name: message_changes_by_cause
-- $1 source, $2 id: the rating changes caused by a message processed before migration 0005, which kept no
-- ref with the processed id. No index covers the cause: a scan of the history, for such old messages only
-- (an operator's question, read-only). As published.
SELECT player_id, system, category, version, before_rating, after_rating AS rating, delta, changed_at
FROM published_changes
WHERE cause_source = $1 AND cause_id = $2
ORDER BY player_id, system, category, version;

-- name: message_unrated
-- $1 source, $2 id: whom it left unchanged, and why (index unrated_players_message).
SELECT player_id, system, reason FROM unrated_players WHERE source = $1 AND id = $2 ORDER BY player_id;

-- The read API's own (worker.api; the answers above serve it too)

-- name: player_boards
-- $1 player id, $2 the systems that publish ratings: his ratings that stand on their leaderboards (the
-- view's rule, accounts closed for fair play left out), by the ratings' primary key.
SELECT system, category, rating FROM leaderboard WHERE player_id = $1 AND system = ANY($2::text[]);

-- name: board_ratings
-- $1 system, $2 category: every rating on the board, lowest first, as one run of big-endian float8s
-- (worker.api.standings places a rating among them by bisection; read at most every few seconds, not per
-- request). One value, not a row per rating: 280,000 rows decoded one by one held the API's event loop
-- for a tenth of a second, which every request behind it waited for.
SELECT coalesce(string_agg(float8send(rating), ''::bytea ORDER BY rating), ''::bytea)
FROM leaderboard WHERE system = $1 AND category = $2;

-- name: leaderboard_page
-- $1 system, $2 category, $3 how many, $4 rating and $5 player id of the entry before the page (first
-- page: 'Infinity' and ''): the next entries in the board's order (the partial index ratings_leaderboard
-- read from that entry on: a keyset, stable while ratings change, and no OFFSET to count through).
SELECT player_id, rating, rd, games, to_timestamp(last_at) AS last_played_at
FROM leaderboard
WHERE system = $1 AND category = $2 AND rating <= $4 AND (rating < $4 OR player_id > $5)
ORDER BY rating DESC, player_id
LIMIT $3;

-- name: leaderboard_page_active
-- As leaderboard_page, of the players whose last rated game is at or after $6 (epoch seconds).
SELECT player_id, rating, rd, games, to_timestamp(last_at) AS last_played_at
FROM leaderboard
WHERE system = $1 AND category = $2 AND rating <= $4 AND (rating < $4 OR player_id > $5) AND last_at >= $6
ORDER BY rating DESC, player_id
LIMIT $3;

-- name: rating_history
-- $1 player id, $2 system, $3 category, $4 the version after which to start, $5 and $6 the cause's time
-- from and to (timestamptz, null: open), $7 how many: one rating's history in version order (the
-- rating_changes_key_version index), with what rebuilds each rating.changed (as `unpublished`).
SELECT r.id, r.payload, r.event_id, r.player_id, r.system, r.category, r.version, r.rating, r.delta,
       r.cause_type, r.cause_source, r.cause_id, r.cause_ref,
       extract(epoch FROM r.changed_at)::float8 AS changed_at,
       r.before_rating, r.before_rd, r.before_volatility, r.after_rating, r.after_rd,
       r.after_volatility, r.provisional, r.floor, r.games, r.cause_time, r.inactive,
       r.parameters
FROM rating_changes AS r
WHERE r.player_id = $1 AND r.system = $2 AND r.category = $3 AND r.version > $4
  AND ($5::timestamptz IS NULL OR r.changed_at >= $5) AND ($6::timestamptz IS NULL OR r.changed_at <= $6)
ORDER BY r.version
LIMIT $7;

-- name: rating_history_desc
-- As rating_history, newest first: the versions before $4.
SELECT r.id, r.payload, r.event_id, r.player_id, r.system, r.category, r.version, r.rating, r.delta,
       r.cause_type, r.cause_source, r.cause_id, r.cause_ref,
       extract(epoch FROM r.changed_at)::float8 AS changed_at,
       r.before_rating, r.before_rd, r.before_volatility, r.after_rating, r.after_rd,
       r.after_volatility, r.provisional, r.floor, r.games, r.cause_time, r.inactive,
       r.parameters
FROM rating_changes AS r
WHERE r.player_id = $1 AND r.system = $2 AND r.category = $3 AND r.version < $4
  AND ($5::timestamptz IS NULL OR r.changed_at >= $5) AND ($6::timestamptz IS NULL OR r.changed_at <= $6)
ORDER BY r.version DESC
LIMIT $7;

-- name: message_records_by_ref
-- $1 source, $2 id, $3 its ref (game, competition or puzzle id): the history rows it caused (index
-- each month's index of causes, migration 0014), with what rebuilds each rating.changed.
SELECT r.id, r.payload, r.event_id, r.player_id, r.system, r.category, r.version, r.rating, r.delta,
       r.cause_type, r.cause_source, r.cause_id, r.cause_ref,
       extract(epoch FROM r.changed_at)::float8 AS changed_at,
       r.before_rating, r.before_rd, r.before_volatility, r.after_rating, r.after_rd,
       r.after_volatility, r.provisional, r.floor, r.games, r.cause_time, r.inactive,
       r.parameters
FROM rating_changes AS r
WHERE r.cause_ref = $3 AND r.cause_source = $1 AND r.cause_id = $2
ORDER BY r.player_id, r.system, r.category, r.version;

-- name: message_records_without_ref
-- $1 source, $2 id: the history rows of a message of a type without a ref (an import, a fair-play
-- closure), as message_changes_without_ref (migration 0015's index), with what rebuilds each rating.changed.
SELECT r.id, r.payload, r.event_id, r.player_id, r.system, r.category, r.version, r.rating, r.delta,
       r.cause_type, r.cause_source, r.cause_id, r.cause_ref,
       extract(epoch FROM r.changed_at)::float8 AS changed_at,
       r.before_rating, r.before_rd, r.before_volatility, r.after_rating, r.after_rd,
       r.after_volatility, r.provisional, r.floor, r.games, r.cause_time, r.inactive,
       r.parameters
FROM rating_changes AS r
WHERE r.cause_source = $1 AND r.cause_id = $2 AND r.cause_ref IS NULL
ORDER BY r.player_id, r.system, r.category, r.version;

-- name: message_records_by_cause
-- $1 source, $2 id: the history rows of a message processed before migration 0005 (no ref kept with its
-- processed id): a scan of the history, as message_changes_by_cause.
SELECT r.id, r.payload, r.event_id, r.player_id, r.system, r.category, r.version, r.rating, r.delta,
       r.cause_type, r.cause_source, r.cause_id, r.cause_ref,
       extract(epoch FROM r.changed_at)::float8 AS changed_at,
       r.before_rating, r.before_rd, r.before_volatility, r.after_rating, r.after_rd,
       r.after_volatility, r.provisional, r.floor, r.games, r.cause_time, r.inactive,
       r.parameters
FROM rating_changes AS r
WHERE r.cause_source = $1 AND r.cause_id = $2
ORDER BY r.player_id, r.system, r.category, r.version;

-- name: messages_with_ref
-- $1 a ref (game, competition or puzzle id): the messages whose rating changes carry it (index
-- each month's index of causes, migration 0014), at most two (one is the answer, two say it is ambiguous).
SELECT DISTINCT cause_source, cause_id FROM rating_changes WHERE cause_ref = $1 LIMIT 2;

-- name: fide_list_applied
-- $1 list month (YYYY-MM): whether its rating.period_closed changed a FIDE rating (index
-- each month's index of causes, migration 0014: a list's records have the month as their cause's ref). A list that changed
-- nobody's rating counts as not applied.
SELECT EXISTS (SELECT 1 FROM rating_changes
               WHERE cause_ref = $1 AND cause_type = 'rating.period_closed' AND system = 'fide');

-- name: fide_states
-- $1 rating type (standard, rapid, blitz): every stored FIDE state of it, by player id (a FIDE list).
SELECT player_id, rating, rd, volatility, games, peak, last_at, version, extra
FROM ratings
WHERE system = 'fide' AND category = $1
ORDER BY player_id;
