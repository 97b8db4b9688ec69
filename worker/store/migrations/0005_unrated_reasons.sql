-- 0005_unrated_reasons: why a valid message changed no rating, kept with its processed id.
--
-- Until now the reason an unrated message changed nothing (a casual game, a guest, fewer than 10 votes,
-- the 600-point rapid/blitz rule, a closed account, ...) reached only a metric label and a log line, so
-- support could not answer "why did my rating not change?". `processed_messages.reason` holds the
-- message's reason (null when it was applied); `unrated_players` holds, per player it left unchanged,
-- why: every player of an unrated message, and the participants a rated message left out (a TSR
-- player with fewer than 10 votes, a FIDE player none of whose games counted). `rating-worker player
-- ID --history` and `rating-worker message SOURCE ID` read them.
--
-- `processed_messages.duplicates` counts the deliveries of a message after the first (ignored: nothing
-- is applied twice), and `processed_messages.ref` keeps its game, competition or puzzle id (`cause.ref`):
-- `rating-worker message` finds the changes a message caused through the history's cause_ref index.
--
-- A nullable column, or one with a constant default, is a catalogue change only (no table rewrite,
-- PostgreSQL 11 and later). The new table is written only for the messages that leave somebody
-- unchanged, in the batch's transaction: one row per player of every unrated message (casual, guest and
-- variant games: two rows each), kept like the history, with no retention of its own.
ALTER TABLE processed_messages
    ADD COLUMN reason text COLLATE "C",
    ADD COLUMN ref text COLLATE "C",
    ADD COLUMN duplicates integer NOT NULL DEFAULT 0;

CREATE TABLE unrated_players (
    player_id  text COLLATE "C" NOT NULL,
    source     text COLLATE "C" NOT NULL,
    id         text COLLATE "C" NOT NULL,
    system     text COLLATE "C" NOT NULL,          -- csr, fide, ... (fairplay for an account.closed)
    reason     text COLLATE "C" NOT NULL,
    message_at timestamptz,                       -- the message's own time (finished_at, ...)
    PRIMARY KEY (player_id, source, id)  -- also `rating-worker player ID --history`'s index
);

-- `rating-worker message SOURCE ID`: whom one message left unchanged.
CREATE INDEX unrated_players_message ON unrated_players (source, id);
