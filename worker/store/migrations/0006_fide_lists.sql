-- 0006_fide_lists: FIDE's monthly lists (`rating.period_closed`): the `inactive` mark of FIDE records,
-- and leaderboards without inactive players.
--
-- A FIDE rating.changed carries `inactive` (marked at a list when the player had no rated game in the
-- 12 months before it; his next rated game clears it). The history keeps it as a column, like every
-- other field the outbox relay rebuilds the bytes from; null for the other systems (no such field).
ALTER TABLE rating_changes ADD COLUMN inactive boolean;

-- The leaderboards leave inactive FIDE players out (RULES.md FIDE): the view and its partial index
-- take the same predicate, so that the planner still reads n index entries for a top n.
DROP VIEW leaderboard;
DROP INDEX ratings_leaderboard;

CREATE VIEW leaderboard AS
SELECT r.system, r.category, r.player_id, r.rating, r.rd, r.games, r.peak, r.version
FROM ratings AS r
WHERE (CASE
         WHEN r.system IN ('csr', 'tsr', 'chesstempo') THEN r.rd <= 110
         WHEN r.system = 'uscf' THEN r.games > 25
         WHEN r.system = 'fide' THEN coalesce(r.extra -> 'published', '0') <> 'null'
                                     AND coalesce(r.extra -> 'inactive', 'false') <> 'true'
         WHEN r.system = 'chesskite' THEN true
         ELSE false
       END)
  AND NOT EXISTS (
      SELECT 1 FROM players AS p
      WHERE p.player_id = r.player_id AND p.closed_reason = 'fair_play'
  );

CREATE INDEX ratings_leaderboard ON ratings (system, category, rating DESC, player_id)
WHERE (CASE
         WHEN system IN ('csr', 'tsr', 'chesstempo') THEN rd <= 110
         WHEN system = 'uscf' THEN games > 25
         WHEN system = 'fide' THEN coalesce(extra -> 'published', '0') <> 'null'
                                   AND coalesce(extra -> 'inactive', 'false') <> 'true'
         WHEN system = 'chesskite' THEN true
         ELSE false
       END);
