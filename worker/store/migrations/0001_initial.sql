-- 0001_initial: players, ratings, history/outbox, processed message ids.
--
-- Applied by worker/store/migrate.py in one transaction, under an advisory lock; never edit a
-- migration once it has shipped (its checksum is recorded): add 0002_... instead.
--
-- Identifiers use COLLATE "C": byte order is Python's sorted() order (the order players are locked
-- in), comparisons are memcmp instead of locale-aware, and the results do not depend on the
-- database's default locale.
--
-- No foreign keys on purpose: every player_id written goes through `lock_players` first (which
-- creates the players row), and a foreign key check costs a lookup plus a row lock per written row
-- (2,000+ per batch of 500 games).

-- Also created by the migrator before it reads it (it has to exist to know what to apply);
-- declared here too so that this file alone gives the whole schema.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    checksum   text NOT NULL
);

-- One row per player ever seen: the per-player lock anchor (SELECT ... FOR UPDATE, in sorted
-- order) and the fair-play closure.
CREATE TABLE players (
    player_id     text COLLATE "C" PRIMARY KEY,
    closed_at     timestamptz NULL,
    closed_reason text NULL
);

-- The current state of every rating: one row per (player, system, category). A batch of 1,000 games
-- updates ~2,000 of them, and those updates are HOT (heap-only: no new index entry, and the page's
-- old versions are pruned in place) as long as no index covers a column they change and the new
-- version fits on the same page:
-- * no leaderboard index (system, category, rating) yet: `rating` changes on every update, so it
--   made every update a non-HOT one, with an entry in it and in the primary key (measured: ~20 ms
--   more per batch). Serve leaderboards from elsewhere (a periodic snapshot, a read replica) or
--   measure again before adding one.
-- * fillfactor 90: 10% of each page left free for new versions (measured: 99-100% of updates HOT,
--   against ~88% at 100).
CREATE TABLE ratings (
    player_id  text COLLATE "C" NOT NULL,
    system     text COLLATE "C" NOT NULL,
    category   text COLLATE "C" NOT NULL,
    rating     double precision NOT NULL,
    rd         double precision NULL,
    volatility double precision NULL,
    games      integer NOT NULL DEFAULT 0 CHECK (games >= 0),
    peak       double precision NULL,
    last_at    double precision NULL,          -- epoch seconds, from the messages
    version    integer NOT NULL CHECK (version >= 0),
    extra      jsonb NULL,                     -- system-specific counters
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (player_id, system, category)
) WITH (fillfactor = 90);

-- Every change of every rating: the history. Written once, never updated: publication is tracked
-- in `outbox`, so that marking rows published does not rewrite these wide rows and all their index
-- entries (it used to be an UPDATE of a published_at column: ~65 ms and 2.6 MB of WAL per 2,000
-- rows; deleting 2,000 outbox rows takes ~5 ms and 110 kB). Every index here costs a random insert
-- per row: keep them to those needed (event_id: consumers deduplicate on it, and it guards against
-- applying a cause twice; the version key; cause_ref for fair play).
CREATE TABLE rating_changes (
    id           bigserial PRIMARY KEY,
    event_id     text COLLATE "C" NOT NULL UNIQUE,  -- the rating.changed CloudEvent id
    player_id    text COLLATE "C" NOT NULL,
    system       text COLLATE "C" NOT NULL,
    category     text COLLATE "C" NOT NULL,
    version      integer NOT NULL,
    rating       double precision NULL,             -- null: a FIDE rating that became unlisted
    delta        double precision NOT NULL,
    cause_type   text COLLATE "C" NOT NULL,
    cause_source text COLLATE "C" NOT NULL,
    cause_id     text COLLATE "C" NOT NULL,
    cause_ref    text COLLATE "C" NULL,             -- game id, competition id, puzzle id, ...
    changed_at   timestamptz NOT NULL,              -- the time of the cause, not the wall clock
    payload      bytea NOT NULL,                    -- the encoded CloudEvent, published as is
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- Versions count from 1 with no gaps per rating; this is also the per-player history index.
    CONSTRAINT rating_changes_key_version UNIQUE (player_id, system, category, version)
);

-- Fair-play corrections: the other side of the games an account played. Costs ~6% of a batch's WAL
-- (~235 kB of ~3.8 MB per 1,000 games) and no time measurable above the noise (< 5 ms).
CREATE INDEX rating_changes_cause_ref ON rating_changes (cause_ref) WHERE cause_ref IS NOT NULL;

-- The outbox: one narrow row per history row whose rating.changed the broker has not acknowledged
-- yet. Written by the same statement as the history rows; deleted once published. Small (the
-- changes in flight, plus whatever a crash left behind for the relay), but with a high churn: its
-- dead rows wait for autovacuum (about once a minute), which keeps its size bounded.
CREATE TABLE outbox (
    change_id  bigint PRIMARY KEY,                  -- rating_changes.id
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Every message consumed (rated or not), so that none is applied twice.
CREATE TABLE processed_messages (
    source       text COLLATE "C" NOT NULL,
    id           text COLLATE "C" NOT NULL,
    type         text COLLATE "C" NOT NULL,
    outcome      text COLLATE "C" NOT NULL,        -- applied | unrated
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, id)
);
