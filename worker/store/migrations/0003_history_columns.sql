-- 0003_history_columns: keep a change's values as columns; the rating.changed bytes are rebuilt.
--
-- A history row used to carry its encoded CloudEvent (~700 bytes of JSON): two thirds of the WAL a
-- batch wrote, in the locked section that every batch waits on. The values it was made of are now
-- columns (~150 bytes), and the bytes are rebuilt from them, by worker.changes.encode_change, when
-- the outbox relay has to publish a row again. Rows written before this migration keep their
-- payload and are published from it; new rows have payload NULL.
ALTER TABLE rating_changes
    ALTER COLUMN payload DROP NOT NULL,
    ADD COLUMN before_rating     double precision NULL,  -- as published (FIDE: the listed rating)
    ADD COLUMN before_rd         double precision NULL,
    ADD COLUMN before_volatility double precision NULL,
    ADD COLUMN after_rating      double precision NULL,  -- as published; `rating` is the stored one
    ADD COLUMN after_rd          double precision NULL,
    ADD COLUMN after_volatility  double precision NULL,
    ADD COLUMN provisional       boolean NULL,
    ADD COLUMN floor             double precision NULL,
    ADD COLUMN games             integer NULL,
    ADD COLUMN cause_time        text COLLATE "C" NULL;  -- the cause's time as the message wrote it

-- The unique index on event_id goes: it was redundant (the id is derived from the player, system,
-- category and version, which the version key already keeps unique) and it was the costliest index
-- of the table: a random insert into a uuid B-tree per row (~12% of a batch's WAL, and, as the
-- history grows past memory, a page read per row). Look a change up by its rating and version.
ALTER TABLE rating_changes DROP CONSTRAINT rating_changes_event_id_key;
