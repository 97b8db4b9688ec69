"""What the operator's commands show is what was published (issue 37, item 3): `player --history` and
`message` show rating.changed's before, after and delta (null where the topic says null: a first US Chess
rating had no rating before it, a FIDE newcomer still pooling has none after), `player` lists ratings and
never a system's internal records, and `leaderboard` refuses a system or category it has no board for.
Every message type through `replay` into a real PostgreSQL, the commands run as a user runs them."""

from __future__ import annotations

import io

import orjson
import pytest

from tests.integration.test_fairplay_admin import cli
from worker.commands.replay import replay
from worker.dev.streams import every_type
from worker.ratings.registry import RATINGS
from worker.store.postgres import PostgresStore


@pytest.fixture
async def published(database_url) -> list[dict]:
    store = await PostgresStore.connect(database_url)
    out = io.BytesIO()
    try:
        await replay(every_type(), out, store=store, errors=io.StringIO())
    finally:
        await store.close()
    return [orjson.loads(line)["data"] for line in out.getvalue().splitlines()]


def shown(record: dict) -> tuple:
    return record["before"]["rating"], record["after"]["rating"], record["delta"]


def first_of(published: list[dict], system: str, test) -> dict:
    return next(r for r in published if r["system"] == system and test(r))


async def test_player_history_shows_before_after_and_delta_as_published(published, database_url):
    env = {"DATABASE_URL": database_url}
    uscf = first_of(published, "uscf", lambda r: r["before"]["rating"] is None)  # a first US Chess rating
    pooling = first_of(published, "fide", lambda r: r["after"]["rating"] is None)  # a FIDE newcomer pooling
    for record in (uscf, pooling):
        result = cli("player", record["player_id"], "--history", "1000", "--system", record["system"],
                     "--category", record["category"], "--json", env=env)
        assert result.returncode == 0, result.stderr
        history = {h["version"]: h for h in orjson.loads(result.stdout)["history"]}
        mine = [r for r in published if (r["player_id"], r["system"], r["category"]) ==
                (record["player_id"], record["system"], record["category"])]
        assert len(history) == len(mine)
        for r in mine:
            h = history[r["version"]]
            assert (h["before"], h["rating"], h["delta"]) == shown(r), r
    assert shown(uscf)[0] is None and shown(uscf)[2] is None  # not "+1500.0"
    assert shown(pooling)[1] is None and shown(pooling)[2] is None  # not "0.0 / +0.0"
    text = cli("player", uscf["player_id"], "--history", "5", "--system", "uscf", env=env).stdout
    assert f"+{uscf['after']['rating']:.1f}" not in text


async def test_message_shows_its_changes_as_published(published, database_url):
    env = {"DATABASE_URL": database_url}
    for record in (first_of(published, "uscf", lambda r: r["before"]["rating"] is None),
                   first_of(published, "fide", lambda r: r["after"]["rating"] is None)):
        cause = record["cause"]
        result = cli("message", cause["source"], cause["id"], "--json", env=env)
        assert result.returncode == 0, result.stderr
        changes = {(c["player_id"], c["system"], c["category"], c["version"]): c
                   for c in orjson.loads(result.stdout)["changes"]}
        caused = [r for r in published if r["cause"]["source"] == cause["source"] and r["cause"]["id"] == cause["id"]]
        assert len(changes) == len(caused)
        for r in caused:
            c = changes[(r["player_id"], r["system"], r["category"], r["version"])]
            assert (c["before_rating"], c["rating"], c["delta"]) == shown(r), r


async def test_player_lists_ratings_never_internal_records(published, database_url):
    env = {"DATABASE_URL": database_url}
    user = first_of(published, "chesstempo", lambda r: r["version"] > 1)["player_id"]
    data = orjson.loads(cli("player", user, "--json", env=env).stdout)
    assert data["ratings"] and all(r["category"] in RATINGS.get(r["system"], ()) for r in data["ratings"])
    text = cli("player", user, env=env).stdout
    assert "chesstempo-seen" not in text and "unlisted" not in text


@pytest.mark.parametrize(("system", "category", "named"), [
    ("nope", "blitz", "one of " + ", ".join(RATINGS)),
    ("csr", "puzzle", "csr has no category 'puzzle': one of " + ", ".join(RATINGS["csr"])),
])
async def test_leaderboard_of_an_unknown_board_is_an_error_naming_the_valid_ones(database_url, system, category,
                                                                                 named):
    result = cli("leaderboard", system, category, env={"DATABASE_URL": database_url})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [f"rating-worker leaderboard: {named}" if system == "csr" else
                                                  f"rating-worker leaderboard: no system 'nope': {named}"]
