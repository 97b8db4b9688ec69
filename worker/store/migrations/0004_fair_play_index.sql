-- 0004_fair_play_index: the accounts closed for fair play, in an index of their own.
--
-- Every batch asks which of its players are closed for fair play before it takes its locks (the plan
-- of engine.plan_batch, `closed_accounts` in sql/queries.sql); under the locks the answer comes with the
-- locked rows. Through the primary key that is one probe of the whole players table per player: with
-- 1,000,000 players and 10,000 of them in a batch, 27 ms. This partial index holds only the closed
-- accounts (a few), so the same probes stay in a page or two: 7 ms (measured with 900 closed). It is
-- written only when an account is closed.
CREATE INDEX players_fair_play ON players (player_id) WHERE closed_reason = 'fair_play';
