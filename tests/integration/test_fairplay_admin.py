"""Fair play through the worker, and the operator's commands run as a user runs them (subprocess,
real PostgreSQL and broker)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from datetime import timedelta

import asyncpg
import orjson
import pytest

from tests.integration.harness import produce, read_topic, wait_processed, worker_config
from tests.integration.test_worker_end_to_end import running_worker, stored_ratings
from tests.unit.test_fairplay import CLOSED_AT, T0, closure, game, imported
from worker.commands.replay import replay


def stream() -> list[bytes]:
    """The cheater x beats a, b and c, draws d, loses to e; closed; then x plays again (unrated)."""
    lines = [imported("a", 1600), imported("b", 1650), imported("c", 1700), imported("d", 1900),
             imported("e", 1550)]
    lines += [game(1, "x", "a", "1-0", T0), game(2, "b", "x", "0-1", T0 + timedelta(days=1)),
              game(3, "x", "c", "1-0", T0 + timedelta(days=2)), game(4, "d", "x", "1/2-1/2", T0 + timedelta(days=3)),
              game(5, "x", "e", "0-1", T0 + timedelta(days=4))]
    # Half a dozen established players so that the leaderboard has something to rank.
    lines += [imported(f"m{i}", 1400 + 37 * i) for i in range(6)]
    lines += [closure("x", CLOSED_AT), closure("x", CLOSED_AT),  # the same closure twice
              game(6, "x", "a", "1-0", CLOSED_AT + timedelta(days=1))]
    return lines


BAD = (b'{"specversion": "1.0", "id": "broken", "source": "/review", "type": "account.closed", '
       b'"time": "2026-11-12T00:00:00Z", "data": {"player_id": "x", "reason": "fair_play"}}')


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "worker", *args], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
async def rated(database_url, broker, topics):
    """The stream through a worker (one message per batch, so that refunds read the stored history)."""
    lines = stream()
    await produce(broker.bootstrap_servers, topics.input, lines + [BAD])
    async with running_worker(worker_config(database_url, broker, topics, batch_size=1)):
        assert await wait_processed(database_url, len(lines) - 1) == len(lines) - 1  # one duplicate
        await read_topic(broker.bootstrap_servers, topics.dlq, at_least=1)
    return lines


async def test_refunds_through_the_worker_equal_replay_and_are_published(rated, database_url, broker, topics):
    out = io.BytesIO()
    memory = await replay(rated, out)
    stored = await stored_ratings(database_url)
    assert len(stored) == len(memory.states)
    for key, st in memory.states.items():
        row = stored[tuple(key)]
        assert (row["rating"], row["version"]) == (pytest.approx(st.rating, abs=1e-9), st.version)
    expected = [orjson.loads(x)["data"] for x in out.getvalue().splitlines()]
    refunds = [c for c in expected if c["cause"]["type"] == "account.closed"]
    assert sorted(c["player_id"] for c in refunds) == ["a", "b", "c", "d"]
    published = await read_topic(broker.bootstrap_servers, topics.output, at_least=len(expected))
    got = [orjson.loads(r.value)["data"] for r in published if orjson.loads(r.value)["data"]["cause"]["type"] == "account.closed"]
    assert sorted(c["player_id"] for c in got) == ["a", "b", "c", "d"]
    conn = await asyncpg.connect(database_url)
    try:
        closed = await conn.fetchrow("SELECT closed_reason FROM players WHERE player_id = 'x'")
        outcome = await conn.fetchval("SELECT outcome FROM processed_messages WHERE id = 'game-6'")
    finally:
        await conn.close()
    assert closed["closed_reason"] == "fair_play" and outcome == "unrated"


async def test_player_command_shows_ratings_and_history(rated, database_url):
    env = {"DATABASE_URL": database_url}
    shown = cli("player", "a", "--history", "5", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "csr" in shown.stdout and "blitz" in shown.stdout and "account.closed" in shown.stdout
    data = orjson.loads(cli("player", "a", "--history", "5", "--json", env=env).stdout)
    (blitz,) = data["ratings"]
    assert blitz["version"] == 3 and blitz["provisional"] is False and blitz["floor"] is not None
    changes = [h for h in data["history"] if "unchanged" not in h]  # the unrated game-6: the next test
    assert [h["cause_type"] for h in changes] == ["account.closed", "game.finished", "rating.imported"]
    assert [h["version"] for h in changes] == [3, 2, 1]
    cheater = orjson.loads(cli("player", "x", "--json", env=env).stdout)
    assert cheater["closed"]["reason"] == "fair_play" and cheater["ratings"][0]["provisional"] is True
    missing = cli("player", "nobody", env=env)
    assert missing.returncode == 1 and "no player 'nobody'" in missing.stderr


async def test_player_history_says_why_a_message_changed_nothing(rated, database_url):
    """Issue 20, item 2: the game x played after his closure changed nobody's rating; a's history says so."""
    env = {"DATABASE_URL": database_url}
    data = orjson.loads(cli("player", "a", "--history", "5", "--json", env=env).stdout)
    newest = data["history"][0]
    assert (newest["cause_id"], newest["unchanged"], newest["system"]) == ("game-6", "closed_account", "csr")
    assert "closed for fair play" in newest["explained"]
    assert [h.get("version") for h in data["history"][1:]] == [3, 2, 1]
    shown = cli("player", "a", "--history", "5", env=env).stdout
    assert "unchanged" in shown and "closed_account" in shown
    only_csr_blitz = orjson.loads(cli("player", "a", "--history", "5", "--category", "blitz", "--json",
                                      env=env).stdout)
    assert all("unchanged" not in h for h in only_csr_blitz["history"])


async def test_player_command_charts_each_rating_in_the_terminals_width_and_plots_it(rated, database_url, tmp_path):
    """Issue 23, item 3: a sparkline per rating fitting COLUMNS, and --plot draws the stored history."""
    env = {"DATABASE_URL": database_url, "COLUMNS": "80"}
    shown = cli("player", "a", "--history", "5", env=env)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, [line for line in lines if len(line) > 80]
    (head,) = [line for line in lines if line.startswith("csr blitz: ")]
    assert "peak" in head and "floor" in head and head.endswith("3 changes")
    chart = lines[lines.index(head) + 1]
    assert len([c for c in chart if c in "▁▂▃▄▅▆▇█"]) == 3  # one block a change: imported, game, refund
    assert "▲" in lines[lines.index(head) + 2]
    picture = tmp_path / "a.png"
    drawn = cli("player", "a", "--plot", str(picture), env=env)
    assert drawn.returncode == 0, drawn.stderr
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {picture}" in drawn.stderr
    # The picture's data is the stored history (the figure's data, not its pixels).
    import asyncpg as pg

    from worker.store.queries import QUERIES
    from worker.terminal import chart, plot

    conn = await pg.connect(database_url)
    try:
        rows = await conn.fetch(QUERIES["player_series"], "a", None, None, 1000)
        last_two = await conn.fetch(QUERIES["player_series"], "a", None, None, 2)
        stored = await conn.fetch("SELECT after_rating FROM rating_changes WHERE player_id = 'a' ORDER BY version")
    finally:
        await conn.close()
    (line,) = plot.figure("a", chart.series_from_rows(rows)).axes[0].get_lines()
    assert list(line.get_ydata()) == [r["after_rating"] for r in stored]
    (short,) = chart.series_from_rows(last_two)  # only the latest changes read: said so
    assert [p.rating for p in short.points] == [r["after_rating"] for r in stored][-2:]
    assert chart.render(short, 80)[0].endswith("last 2 of 3 changes")
    nothing = cli("player", "nobody-at-all", "--plot", str(tmp_path / "n.png"), env=env)
    assert nothing.returncode == 1 and not (tmp_path / "n.png").exists()


async def test_message_command_tells_what_became_of_each_message(rated, database_url, broker, topics):
    """Issue 20, item 2: applied (with its changes), unrated and why, delivered again, dead-lettered, never seen."""
    env = {"DATABASE_URL": database_url}
    applied = orjson.loads(cli("message", "/test/games", "game-2", "--json", env=env).stdout)
    assert (applied["status"], applied["ref"], applied["unchanged"]) == ("applied", "g-2", [])
    assert sorted(c["player_id"] for c in applied["changes"]) == ["b", "x"]
    unrated = cli("message", "/test/games", "game-6", "--json", env=env)
    assert unrated.returncode == 0, unrated.stderr
    unrated = orjson.loads(unrated.stdout)
    assert (unrated["status"], unrated["reason"], unrated["changes"]) == ("unrated", "closed_account", [])
    assert sorted((u["player_id"], u["reason"]) for u in unrated["unchanged"]) == [
        ("a", "closed_account"), ("x", "closed_account")]
    closure = orjson.loads(cli("message", "/review", "close-x", "--json", env=env).stdout)
    assert closure["duplicates"] == 1  # the same closure delivered twice: applied once
    assert sorted(c["player_id"] for c in closure["changes"]) == ["a", "b", "c", "d"]
    text = cli("message", "/review", "close-x", env=env).stdout
    assert "delivered 1 more time(s) and ignored" in text and "4 rating change(s)" in text
    without_broker = cli("message", "/review", "broken", env=env)
    assert without_broker.returncode == 1 and "not processed" in without_broker.stdout
    assert "KAFKA_BOOTSTRAP_SERVERS" in without_broker.stdout
    env.update(KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap_servers, KAFKA_DLQ_TOPIC=topics.dlq)
    dead = cli("message", "/review", "broken", "--json", env=env)
    assert dead.returncode == 0, dead.stderr
    dead = orjson.loads(dead.stdout)
    assert dead["status"] == "dead_lettered" and dead["dead_letters"][0]["error_class"] == "invalid_data"
    assert "closed_at" in dead["dead_letters"][0]["error_message"]
    never = cli("message", "/review", "no-such-id", env=env)
    assert never.returncode == 1 and "never seen" in never.stdout


async def test_leaderboard_lists_established_ratings_in_order(rated, database_url):
    env = {"DATABASE_URL": database_url}
    result = cli("leaderboard", "csr", "blitz", "--top", "4", "--json", env=env)
    assert result.returncode == 0, result.stderr
    entries = orjson.loads(result.stdout)["entries"]
    conn = await asyncpg.connect(database_url)
    try:
        expected = await conn.fetch(
            "SELECT player_id FROM ratings WHERE system = 'csr' AND category = 'blitz' AND rd <= 110 "
            "AND player_id <> 'x' ORDER BY rating DESC LIMIT 4")
    finally:
        await conn.close()
    assert [e["player_id"] for e in entries] == [r["player_id"] for r in expected]
    assert [e["rank"] for e in entries] == [1, 2, 3, 4]
    assert all(e["rd"] <= 110 for e in entries)
    text = cli("leaderboard", "csr", "blitz", env=env).stdout
    assert "csr blitz: top 10" in text and "x " not in text  # the closed account is left out
    bad = cli("leaderboard", "csr", "blitz", "--top", "0", env=env)
    assert bad.returncode == 2 and "--top" in bad.stderr


async def test_outbox_and_dlq_commands(rated, database_url, broker, topics):
    env = {"DATABASE_URL": database_url, "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
           "KAFKA_DLQ_TOPIC": topics.dlq}
    box = orjson.loads(cli("outbox", "--json", env=env).stdout)
    assert set(box) == {"backlog", "oldest"} and box["backlog"] >= 0
    listed = cli("dlq", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    letters = orjson.loads(listed.stdout)
    assert [(x["error_class"], x["source_topic"]) for x in letters] == [("invalid_data", topics.input)]
    assert "closed_at" in letters[0]["error_message"]
    table = cli("dlq", env=env).stdout
    assert "1 dead letter(s)" in table and "invalid_data" in table
    none_chosen = cli("dlq", "replay", env=env)
    assert none_chosen.returncode == 2 and "choose what to re-submit" in none_chosen.stderr
    # Re-submitted to the input topic, the (still bad) message comes back to the DLQ: it went round.
    resubmit = cli("dlq", "replay", "--offset", f"{letters[0]['partition']}:{letters[0]['offset']}", env=env)
    assert resubmit.returncode == 0, resubmit.stderr
    async with running_worker(worker_config(database_url, broker, topics)):
        again = await read_topic(broker.bootstrap_servers, topics.dlq, at_least=2)
    assert [r.value for r in again] == [BAD, BAD]


def test_commands_without_a_database_url_say_so():
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    result = subprocess.run([sys.executable, "-m", "worker", "player", "a"], env=env, capture_output=True, text=True)
    assert result.returncode == 2 and "DATABASE_URL is not set" in result.stderr
