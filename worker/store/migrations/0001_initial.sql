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

-- The current state of every rating: one row per (player, system, category).
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
);

-- Leaderboards: established ratings (no RD, or a small one) by system and category.
CREATE INDEX ratings_leaderboard
    ON ratings (system, category, rating DESC)
    WHERE rd IS NULL OR rd <= 110;

-- Every change of every rating: the history, and the outbox of rating.changed messages
-- (published_at NULL until the broker acknowledged it).
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
    published_at timestamptz NULL,
    -- Versions count from 1 with no gaps per rating; this is also the per-player history index.
    CONSTRAINT rating_changes_key_version UNIQUE (player_id, system, category, version)
);

-- The outbox relay: unpublished rows, oldest first. Stays small (rows leave it once published).
CREATE INDEX rating_changes_unpublished ON rating_changes (id) WHERE published_at IS NULL;

-- Fair-play corrections: the other side of the games an account played.
CREATE INDEX rating_changes_cause_ref ON rating_changes (cause_ref) WHERE cause_ref IS NOT NULL;

-- Every message consumed (rated or not), so that none is applied twice.
CREATE TABLE processed_messages (
    source       text COLLATE "C" NOT NULL,
    id           text COLLATE "C" NOT NULL,
    type         text COLLATE "C" NOT NULL,
    outcome      text COLLATE "C" NOT NULL,        -- applied | unrated
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, id)
);
