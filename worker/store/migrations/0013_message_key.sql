-- 0013_message_key: processed ids are unique by a 16-byte digest of (source, id), not by the two texts
-- (issue 42, point 3; docs/performance.md "A grown database").
--
-- Why: the primary key (source, id) held both texts, ~70 bytes an entry with a platform's UUID ids, so the
-- index of a dedupe window of ids was 2-3 times the size of the rows' digests, and every id of a batch is
-- looked up in it and inserted into it at a random place. On a grown database (20 million ids) it was
-- larger than the buffers, and after each checkpoint the first insert into each of its leaves logged the
-- whole page: 0.92 of the 3.27 full pages a game that ./dev bench lifecycle measured. The digest's index is
-- 2.4 times smaller (24 bytes an entry; 617 against 1,478 MB for 20.5 million ids), so it stays in the
-- buffers and its leaves are logged whole once in fewer games.
--
-- message_key(source, id): the first 16 bytes of SHA-256 over the two texts' bytes with a zero byte
-- between them (text holds no zero byte, so the pair is read back unambiguously), as a uuid. decode(...,
-- 'escape') is the immutable way to a text's bytes (convert_to is only stable): it reads a backslash as
-- the start of an escape, so each is doubled first. A random 128-bit digest collides by chance with
-- probability ~n^2/2^129: never, for any number of ids a database holds. The index is unique on the
-- digest, so two different pairs with one digest would be refused at insert (the batch would fail, never
-- skip a message); SHA-256 has no known way to make such a pair on purpose.
--
-- The function is plain SQL with an immutable body, so the planner inlines it in the statements and in
-- the index's expression alike: every statement that finds a processed id by (source, id) compares
-- message_key of both sides (queries.sql), which is what the index answers, and the texts as well.
--
-- The table has no primary key after this (a key can not be an expression). Logical replication of
-- processed_messages (its UPDATEs and DELETEs) then needs REPLICA IDENTITY FULL (docs/operations.md).
--
-- Building the index takes a SHARE lock: the batches' writes wait until it is built, about 1.3 s per
-- million ids (measured: 25.7 s for the 20.5 million ids of ./dev bench lifecycle's grown database, 2 cores,
-- maintenance_work_mem 64 MB). To wait for none of it, build the index beforehand while the workers run
-- (docs/operations.md "Migrating (0013)"): the function and the index are made only if missing, and an index
-- of that name that is not valid and unique (a CONCURRENTLY build that failed) stops the migration before the
-- primary key is dropped, so that processed ids are never left without a unique index.
CREATE OR REPLACE FUNCTION message_key(source text, id text) RETURNS uuid
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN encode(substring(sha256(decode(replace(source, '\', '\\'), 'escape') || '\x00'::bytea
                                   || decode(replace(id, '\', '\\'), 'escape')) FROM 1 FOR 16), 'hex')::uuid;

CREATE UNIQUE INDEX IF NOT EXISTS processed_messages_key ON processed_messages (message_key(source, id));
DO $$
BEGIN
    IF NOT (SELECT i.indisvalid AND i.indisunique AND i.indrelid = 'processed_messages'::regclass
            FROM pg_index AS i WHERE i.indexrelid = 'processed_messages_key'::regclass) THEN
        RAISE EXCEPTION 'processed_messages_key is not a valid unique index (a failed CONCURRENTLY build?): %',
            'DROP INDEX processed_messages_key, then migrate';
    END IF;
END $$;
ALTER TABLE processed_messages DROP CONSTRAINT processed_messages_pkey;
