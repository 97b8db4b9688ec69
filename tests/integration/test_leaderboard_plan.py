"""The leaderboard and history queries stay index-backed as the player base grows (EXPLAIN, not timing)."""

from __future__ import annotations

import asyncpg
import orjson

from worker.store.queries import QUERIES

PLAYERS = 200_000


def nodes(plan: dict) -> list[dict]:
    out = [plan]
    for child in plan.get("Plans", ()):
        out += nodes(child)
    return out


async def fill(conn: asyncpg.Connection, players: int) -> None:
    """`players` CSR blitz ratings, a third of them established, plus US Chess ones."""
    await conn.execute(f"""
        INSERT INTO players (player_id) SELECT 'p' || g FROM generate_series(1, {players}) AS g;
        INSERT INTO ratings (player_id, system, category, rating, rd, volatility, games, version)
        SELECT 'p' || g, 'csr', 'blitz', 800 + (g::int8 * 7919 % 2000), CASE WHEN g % 3 = 0 THEN 80 ELSE 200 END,
               0.06, 10, 1
        FROM generate_series(1, {players}) AS g;
        INSERT INTO ratings (player_id, system, category, rating, games, version)
        SELECT 'p' || g, 'uscf', 'regular', 800 + (g::int8 * 104729 % 1800), g % 50, 1
        FROM generate_series(1, {players}, 4) AS g;
        ANALYZE players; ANALYZE ratings;
    """)


async def plan_of(conn: asyncpg.Connection, sql: str, *args) -> list[dict]:
    raw = await conn.fetchval("EXPLAIN (FORMAT JSON) " + sql, *args)
    return nodes((orjson.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"])


async def test_leaderboard_reads_the_partial_index_in_order_without_sorting(database_url):
    conn = await asyncpg.connect(database_url)
    try:
        await fill(conn, PLAYERS)
        for system, category in (("csr", "blitz"), ("uscf", "regular")):
            plan = await plan_of(conn, QUERIES["leaderboard"], system, category, 10)
            types = [n["Node Type"] for n in plan]
            assert "Sort" not in types and "Seq Scan" not in [t for n, t in zip(plan, types, strict=True)
                                                               if n.get("Relation Name") == "ratings"], types
            assert any(n.get("Index Name") == "ratings_leaderboard" for n in plan), types
            rows = await conn.fetch(QUERIES["leaderboard"], system, category, 10)
            expected = await conn.fetch(
                "SELECT player_id FROM ratings WHERE system = $1 AND category = $2 AND "
                "(CASE WHEN system = 'uscf' THEN games > 25 ELSE rd <= 110 END) ORDER BY rating DESC, player_id LIMIT 10",
                system, category)
            assert [r["player_id"] for r in rows] == [r["player_id"] for r in expected]
    finally:
        await conn.close()


async def test_a_players_history_uses_the_version_key(database_url):
    conn = await asyncpg.connect(database_url)
    try:
        await fill(conn, 20_000)
        await conn.execute("""
            INSERT INTO rating_changes (event_id, player_id, system, category, version, rating, delta, cause_type,
                                        cause_source, cause_id, cause_ref, changed_at, payload)
            SELECT 'e' || g, 'p' || (g % 20000), 'csr', 'blitz', g / 20000 + 1, 1500, 1, 'game.finished', '/s',
                   'g' || g, 'g' || g, now(), '\\x00'::bytea
            FROM generate_series(1, 200000) AS g;
            ANALYZE rating_changes;
        """)
        # The history is partitioned by month (migration 0012): a scan names the month, and an empty month
        # (next month's, created ahead) is read by a seq scan of its no page, which costs nothing.
        full = {r[0] for r in await conn.fetch("SELECT DISTINCT tableoid::regclass::text FROM rating_changes")}
        assert full

        def seq_scans(plan: list[dict]) -> list[str]:
            return [n.get("Relation Name", "") for n in plan if n["Node Type"] == "Seq Scan"
                    and not (n.get("Relation Name", "").startswith("rating_changes_") and n["Relation Name"] not in full)]

        assert seq_scans(await plan_of(conn, QUERIES["player_history"], "p17", 10, None, None)) == []
        assert seq_scans(await plan_of(conn, QUERIES["player_series"], "p17", None, None, 1000)) == []
        assert seq_scans(await plan_of(conn, QUERIES["games_with"], "p17", "csr", "game.finished", 0.0, 2e9)) == []
    finally:
        await conn.close()


async def test_listed_fide_ratings_are_on_the_leaderboard_unlisted_ones_are_not(database_url):
    """An imported list rating has no `published` key; an unlisted one has `published: null`."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("""
            INSERT INTO players (player_id) VALUES ('imported'), ('listed'), ('unlisted'), ('closed');
            UPDATE players SET closed_reason = 'fair_play', closed_at = now() WHERE player_id = 'closed';
            INSERT INTO ratings (player_id, system, category, rating, games, version, extra) VALUES
              ('imported', 'fide', 'standard', 2012, 57, 1, '{"birth_year": 2009}'),
              ('listed', 'fide', 'standard', 1950, 40, 3, '{"published": 1950}'),
              ('unlisted', 'fide', 'standard', 1390, 40, 3, '{"published": null}'),
              ('closed', 'fide', 'standard', 2600, 90, 3, NULL);
        """)
        rows = await conn.fetch(QUERIES["leaderboard"], "fide", "standard", 10)
    finally:
        await conn.close()
    assert [r["player_id"] for r in rows] == ["imported", "listed"]


async def test_leaving_out_inactive_players_still_reads_the_index_in_order(database_url):
    """Issue 23: `leaderboard --active-days N`: players whose last game is older than N days are left out;
    the command ranks the others (equal ratings share a rank) and says when each last played."""
    import os
    import subprocess
    import sys
    import time

    now = time.time()
    conn = await asyncpg.connect(database_url)
    try:
        await fill(conn, 20_000)
        # p<g> last played g % 60 days (and a minute) ago: the 30-day cut leaves out half of them
        await conn.execute("UPDATE ratings SET last_at = $1 - (substr(player_id, 2)::int % 60) * 86400.0 - 60",
                           now)
        await conn.execute("ANALYZE ratings")
        plan = await plan_of(conn, QUERIES["leaderboard_active"], "csr", "blitz", 10, now - 30 * 86400)
        types = [n["Node Type"] for n in plan]
        assert "Sort" not in types and any(n.get("Index Name") == "ratings_leaderboard" for n in plan), types
        expected = await conn.fetch(
            "SELECT player_id, rating FROM ratings WHERE system = 'csr' AND category = 'blitz' AND rd <= 110 "
            "AND last_at >= $1 ORDER BY rating DESC, player_id LIMIT 10", now - 30 * 86400)
        everyone = await conn.fetch(QUERIES["leaderboard"], "csr", "blitz", 10)
    finally:
        await conn.close()
    run = subprocess.run([sys.executable, "-m", "worker", "leaderboard", "csr", "blitz", "--active-days", "30",
                          "--json"], env={**os.environ, "DATABASE_URL": database_url}, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    got = orjson.loads(run.stdout)
    assert got["active_days"] == 30
    assert [e["player_id"] for e in got["entries"]] == [r["player_id"] for r in expected]
    assert [r["player_id"] for r in everyone] != [r["player_id"] for r in expected]  # someone was left out
    ratings = [r["rating"] for r in expected]
    assert [e["rank"] for e in got["entries"]] == [1 + sum(x > r for x in ratings) for r in ratings]
    text = subprocess.run([sys.executable, "-m", "worker", "leaderboard", "csr", "blitz", "--active-days", "30"],
                          env={**os.environ, "DATABASE_URL": database_url, "COLUMNS": "50"}, capture_output=True,
                          text=True, timeout=120).stdout
    assert "active in the last 30 days" in text and "last played" in text
    assert max(len(line) for line in text.splitlines()) <= 50  # the table fits COLUMNS (wraps, loses nothing)
    assert all(e["player_id"] in text for e in got["entries"])
