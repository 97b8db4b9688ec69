-- 0007_leaderboard_activity: the leaderboard view also gives when each rating last changed by a game
-- (`last_at`, epoch seconds of the message's own time), so that a leaderboard can leave out players
-- inactive for more than N days (`rating-worker leaderboard --active-days N`, the demo).
--
-- CREATE OR REPLACE keeps the view's columns and adds one at the end; the predicate and the partial
-- index ratings_leaderboard are unchanged, so a top n still reads the index in order, skipping the
-- inactive entries it meets (tests/integration/test_leaderboard_plan.py).
CREATE OR REPLACE VIEW leaderboard AS
SELECT r.system, r.category, r.player_id, r.rating, r.rd, r.games, r.peak, r.version, r.last_at
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
