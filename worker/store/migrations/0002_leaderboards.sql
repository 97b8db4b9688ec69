-- 0002_leaderboards: leaderboards per system and category, and the index that keeps them fast.
--
-- A rating is on a leaderboard once it is established, by its system's rule:
--   csr, tsr, chesstempo   RD <= 110 (the provisional mark goes at RD > 110)
--   uscf                   more than 25 games (RULES.md: provisional while N <= 25)
--   fide                   a listed rating: not extra.published = null (the mark of an unlisted
--                          one; an imported list rating has no such key)
--   chesskite              always (Elo without a provisional period)
-- and its account is not closed for fair play.
--
-- The index is partial, on exactly the view's predicate, so that the planner answers
-- `WHERE system = $1 AND category = $2 ORDER BY rating DESC LIMIT n` by reading n index entries
-- (measured with EXPLAIN on 1,000,000 players: bench/leaderboard.py). Its price: an update that
-- changes the rating of an established player is no longer HOT (a new index entry per update);
-- `./dev bench throughput` measures it (README, Performance).
CREATE VIEW leaderboard AS
SELECT r.system, r.category, r.player_id, r.rating, r.rd, r.games, r.peak, r.version
FROM ratings AS r
WHERE (CASE
         WHEN r.system IN ('csr', 'tsr', 'chesstempo') THEN r.rd <= 110
         WHEN r.system = 'uscf' THEN r.games > 25
         WHEN r.system = 'fide' THEN coalesce(r.extra -> 'published', '0') <> 'null'
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
         WHEN system = 'chesskite' THEN true
         ELSE false
       END);
