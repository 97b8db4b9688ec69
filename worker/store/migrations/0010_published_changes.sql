-- 0010_published_changes: the history as rating.changed published it, for the reads of people.
--
-- A history row keeps the stored ratings' difference in `delta` (the fair-play refunds add them up) and
-- the published ratings in before_rating / after_rating; rows written before migration 0003 keep the
-- published values in their payload only. The operator's commands showed the stored difference: a
-- first US Chess rating (before null on the topic) as "+1500", a FIDE newcomer still pooling (after null)
-- as "0.0 / +0.0". This view says what the topic says: before and after as published, and delta null
-- exactly when either is (docs/rules.md#common-to-all-systems). The predicates of a query on it reach rating_changes'
-- indexes: the lateral subquery has no FROM and is pulled up.
CREATE VIEW published_changes AS
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
