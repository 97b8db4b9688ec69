"""The read API never disagrees with the topic (issue 40, item 3): a stream of every message type through a
real worker (real PostgreSQL, real broker), then every rating read through `rating-worker serve` over HTTP.

- a player's ratings: each equal to the newest rating.changed of that rating (as published); CSR's five
  speeds for every player, a speed not played as the start the engine gives its first game;
- a history: the records, parsed, equal to the published ones, in version order, paged by cursor;
- a leaderboard: the same order and ranks as `rating-worker leaderboard`;
- a message: its changes as published, and whom it left out, with the worker's reasons.
"""

from __future__ import annotations

import contextlib
import csv
import io
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from datetime import UTC, datetime

import asyncpg
import orjson
import pytest

from tests.integration.harness import (
    make_topics,
    new_database,
    produce,
    read_topic,
    wait_processed,
    worker_config,
)
from tests.integration.test_fairplay_admin import cli
from tests.integration.test_worker_end_to_end import running_worker
from worker.contract.decode import decode, decode_rateable
from worker.contract.reasons import BadMessage
from worker.dev.api import ApiServer
from worker.dev.streams import TCS, every_type, game_event
from worker.engine.compute import compute
from worker.engine.reads import load, needs_of
from worker.ratings import csr
from worker.ratings.inputs import TimeControl
from worker.ratings.reasons import explain
from worker.ratings.registry import RATINGS
from worker.store.postgres import PostgresStore

TOKEN = "s3cret-support-token"
SLASHED = ("club/anna", "club/ben")
# ids that end like a route of the API or the pages, or hold a "%": each is its own player (worker.api.paths)
AWKWARD = ("club/unrated", "50%/history/csr/blitz")
pytestmark = pytest.mark.timeout(300)


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def get_json(url: str, headers: dict[str, str] | None = None):
    status, _, body = get(url, headers)
    assert status == 200, (url, status, body[:500])
    return orjson.loads(body)


def every_page(url: str) -> list[dict]:
    """The items of every page, following `next` until it is null."""
    items, cursor = [], None
    while True:
        page = get_json(url + (f"&cursor={cursor}" if cursor else ""))
        items += page["items"]
        if (cursor := page["next"]) is None:
            return items


def q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def slashed_games(pair: tuple[str, str] = SLASHED, source: str = "/slashed") -> list[bytes]:
    """Three games between players whose ids hold a "/" (the contract allows it; a path carries it as %2F),
    each taking White in turn."""
    return [orjson.dumps(game_event(i, *(pair if i % 2 == 0 else pair[::-1]), "1-0",
                                    datetime(2027, 4, 1, 12, i, tzinfo=UTC), source=source)) for i in range(3)]


@pytest.fixture(scope="module")
async def fed(postgres, template_db, broker):
    """Every message type through the worker: the database, and every published record's data in order."""
    url = await new_database(postgres, template_db)
    topics = await make_topics(broker)
    lines = every_type() + slashed_games() + slashed_games(AWKWARD, "/awkward")
    await produce(broker.bootstrap_servers, topics.input, lines)
    valid = set()
    for line in lines:
        with contextlib.suppress(BadMessage):
            message = decode(line)
            valid.add((message.source, message.id))
    async with running_worker(worker_config(url, broker, topics)):
        assert await wait_processed(url, len(valid)) == len(valid)
        conn = await asyncpg.connect(url)
        try:
            changes = await conn.fetchval("SELECT count(*) FROM rating_changes")
        finally:
            await conn.close()
        records = await read_topic(broker.bootstrap_servers, topics.output, at_least=changes)
    published = [orjson.loads(r.value)["data"] for r in records]
    return url, published


@pytest.fixture(scope="module")
def api(fed, tmp_path_factory):
    url, _ = fed
    with ApiServer(url, tmp_path_factory.mktemp("api") / "serve.log", {"SUPPORT_TOKEN": TOKEN}) as server:
        yield server.url


def newest(published: list[dict]) -> dict[tuple[str, str, str], dict]:
    out: dict[tuple[str, str, str], dict] = {}
    for r in published:
        key = (r["player_id"], r["system"], r["category"])
        if key not in out or r["version"] > out[key]["version"]:
            out[key] = r
    return out


def test_every_rating_is_its_newest_record(fed, api):
    _, published = fed
    latest = newest(published)
    players = sorted({p for p, s, _ in latest if s in RATINGS})
    assert len(players) > 50
    for player in players:
        body = get_json(f"{api}/v1/players/{q(player)}")
        assert body["player_id"] == player
        shown = {(r["system"], r["category"]): r for r in body["ratings"]}
        mine = {(s, c): r for (p, s, c), r in latest.items() if p == player and s in RATINGS}
        for (system, category), record in mine.items():
            entry = shown.pop((system, category))
            assert (entry["rating"], entry["rd"], entry["volatility"]) == tuple(
                record["after"][k] for k in ("rating", "rd", "volatility")), (player, system, category)
            assert (entry["provisional"], entry["floor"], entry["games"], entry["version"]) == (
                record["provisional"], record["floor"], record["games"], record["version"])
            assert entry["inactive"] == record.get("inactive")
            assert entry["start"] is False
        # what is left: CSR's speeds he has not played, as starts; nothing else
        assert {s for s, _ in shown} <= {"csr"}, (player, shown.keys())
        assert {c for _, c in shown} | {c for s, c in mine if s == "csr"} == set(RATINGS["csr"])
        for entry in shown.values():
            assert entry["start"] is True and entry["games"] == 0 and entry["version"] == 0


async def first_game_start(url: str, player: str, tc: dict) -> tuple:
    """What the engine rates his first game of that speed from, now: a game against a newcomer through
    the worker's own functions on the stored states (decode, needs, load, compute), written nowhere."""
    message, system = decode_rateable(orjson.dumps(game_event(1, player, "nobody-new", "1-0", datetime.now(UTC),
                                                              tc, source="/api-test")))
    store = await PostgresStore.connect(url)
    try:
        async with store.reader() as reader:
            needs = needs_of([message], [system])
            states, asked = await load(reader, [message], needs)
    finally:
        await store.close()
    computed = compute([message], [system], dict(states), set(), {}, asked, set(needs.players))
    (record,) = [r for r in computed.result.records if r.key.player_id == player]
    return record.key.category, record.before


async def test_a_start_is_what_the_first_game_then_starts_from(fed, api):
    url, published = fed
    speeds = {csr.category(TimeControl(**tc)): tc for tc in TCS}
    starts = []
    for player in sorted({r["player_id"] for r in published if r["system"] == "csr"}):
        for entry in get_json(f"{api}/v1/players/{q(player)}")["ratings"]:
            if not entry["start"]:
                continue
            category, before = await first_game_start(url, player, speeds[entry["category"]])
            assert category == entry["category"]
            assert (entry["rating"], entry["rd"], entry["volatility"]) == before, (player, category)
            starts.append(entry)
    assert len(starts) >= 4
    # from the other speeds (RD 250), not only the newcomer's 1500 / 350
    assert any(s["rd"] != 350 for s in starts) and any(s["rating"] != 1500 for s in starts)


def test_history_is_the_records_as_published(fed, api):
    _, published = fed
    by_rating: dict[tuple, list[dict]] = defaultdict(list)
    for r in published:
        by_rating[(r["player_id"], r["system"], r["category"])].append(r)
    longest = sorted(by_rating, key=lambda k: -len(by_rating[k]))[:12]
    for player, system, category in longest:
        if system not in RATINGS:
            continue
        records = sorted(by_rating[(player, system, category)], key=lambda r: r["version"])
        assert every_page(f"{api}/v1/players/{q(player)}/history/{system}/{category}?limit=7") == records
        newest_first = get_json(f"{api}/v1/players/{q(player)}/history/{system}/{category}?order=desc&limit=1000")
        assert newest_first["items"] == records[::-1]
        # the rating on a date: the newest change at or before it
        middle = records[len(records) // 2]
        on_date = get_json(f"{api}/v1/players/{q(player)}/history/{system}/{category}?order=desc&limit=1"
                           f"&to={q(middle['changed_at'])}")["items"][0]
        assert on_date["changed_at"] <= middle["changed_at"] and on_date["version"] >= middle["version"]


def test_leaderboards_are_the_commands(fed, api):
    url, _ = fed
    env = {"DATABASE_URL": url}
    for system, categories in RATINGS.items():
        for category in categories:
            command = orjson.loads(cli("leaderboard", system, category, "--top", "1000", "--json", env=env).stdout)
            items = every_page(f"{api}/v1/leaderboards/{system}/{category}?limit=3")
            assert [(i["rank"], i["player_id"], i["rating"]) for i in items] == [
                (e["rank"], e["player_id"], e["rating"]) for e in command["entries"]], (system, category)


def test_a_message_shows_its_changes_and_who_it_left_out(fed, api):
    _, published = fed
    auth = {"Authorization": f"Bearer {TOKEN}"}
    cause = published[len(published) // 2]["cause"]
    body = get_json(f"{api}/v1/messages?source={q(cause['source'])}&id={q(cause['id'])}", auth)
    assert body["status"] == "applied"
    assert body["changes"] == [r for r in sorted(published, key=lambda r: (r["player_id"], r["system"],
                                                                             r["category"], r["version"]))
                               if r["cause"]["source"] == cause["source"] and r["cause"]["id"] == cause["id"]]
    status, headers, problem = get(f"{api}/v1/messages?source={q(cause['source'])}&id={q(cause['id'])}")
    assert status == 401 and headers["content-type"] == "application/problem+json"
    assert headers["www-authenticate"].startswith("Bearer")
    assert orjson.loads(problem)["parameter"] == "authorization"
    unknown = get_json(f"{api}/v1/messages?source=%2Fnobody&id=none", auth)
    assert unknown["status"] == "unknown"


async def test_why_a_message_changed_nobody_or_left_someone_out(fed, api):
    """The worker's stored reasons, each with its sentence: a whole message unrated (a casual game, ...),
    and the players a rated message left out (TSR's too few votes, FIDE's unrated opponents)."""
    url, _ = fed
    auth = {"Authorization": f"Bearer {TOKEN}"}
    conn = await asyncpg.connect(url)
    try:
        unrated = await conn.fetch("SELECT source, id, reason FROM processed_messages WHERE outcome = 'unrated'")
        left = await conn.fetch("SELECT u.source, u.id, array_agg(u.player_id || ':' || u.reason ORDER BY u.player_id) "
                                "AS who FROM unrated_players AS u JOIN processed_messages AS m USING (source, id) "
                                "WHERE m.outcome = 'applied' GROUP BY u.source, u.id")
    finally:
        await conn.close()
    assert unrated and left
    for row in unrated[:20]:
        body = get_json(f"{api}/v1/messages?source={q(row['source'])}&id={q(row['id'])}", auth)
        assert (body["status"], body["reason"], body["explanation"], body["changes"]) == (
            "unrated", row["reason"], explain(row["reason"]), [])
    for row in left[:20]:
        body = get_json(f"{api}/v1/messages?source={q(row['source'])}&id={q(row['id'])}", auth)
        assert body["status"] == "applied" and body["reason"] is None and body["changes"]
        assert [f"{x['player_id']}:{x['reason']}" for x in body["left_out"]] == row["who"]
        assert all(x["explanation"] == explain(x["reason"]) for x in body["left_out"])


def test_fide_list_is_the_newest_list_as_published(fed, api):
    """The stream's one list (2027-03) as CSV: every FIDE standard rating its close published as listed is a
    line with that rating; a month not applied is a 404 problem."""
    _, published = fed
    status, headers, body = get(f"{api}/v1/fide/lists/2027-03")
    assert status == 200 and headers["content-type"].startswith("text/csv"), body[:300]
    rows = list(csv.DictReader(io.StringIO(body.decode())))
    assert rows and list(rows[0]) == ["player_id", "rating", "games", "k", "inactive", "birth_year"]
    listed = {}
    for r in published:  # in order: the newest record of each FIDE standard rating up to the list
        if r["system"] == "fide" and r["category"] == "standard" and r["changed_at"] <= "2027-03-01T00:00:00Z":
            listed[r["player_id"]] = r
    expected = {p: r for p, r in listed.items() if r["after"]["rating"] is not None}
    assert {row["player_id"]: int(row["rating"]) for row in rows} == {
        p: round(r["after"]["rating"]) for p, r in expected.items()}
    assert all(row["inactive"] == ("true" if expected[row["player_id"]].get("inactive") else "false")
               for row in rows)
    status, headers, body = get(f"{api}/v1/fide/lists/2099-01")
    assert status == 404 and headers["content-type"] == "application/problem+json"


def test_a_message_by_its_game_id(fed, api):
    """A game id alone finds the message that rated it (through the history's cause_ref index); one no
    rating change carries is a 404 problem naming ref."""
    _, published = fed
    auth = {"Authorization": f"Bearer {TOKEN}"}
    causes: dict[str, set] = defaultdict(set)
    for r in published:
        if r["cause"]["ref"] is not None:
            causes[r["cause"]["ref"]].add((r["cause"]["source"], r["cause"]["id"]))
    ref, ((source, message_id),) = next((ref, c) for ref, c in causes.items() if len(c) == 1 and ref.startswith("g"))
    by_ref = get_json(f"{api}/v1/messages?ref={q(ref)}", auth)
    assert by_ref == get_json(f"{api}/v1/messages?source={q(source)}&id={q(message_id)}", auth)
    assert by_ref["changes"] and all(c["cause"]["ref"] == ref for c in by_ref["changes"])
    status, headers, body = get(f"{api}/v1/messages?ref=no-such-game", auth)
    assert status == 404 and orjson.loads(body)["parameter"] == "ref"


def test_a_player_id_with_a_slash(fed, api):
    _, published = fed
    mine = [r for r in published if r["player_id"] == SLASHED[0]]
    assert mine
    player = get_json(f"{api}/v1/players/{q(SLASHED[0])}")
    assert player["player_id"] == SLASHED[0]
    assert get_json(f"{api}/v1/players/{SLASHED[0]}") == player  # a bare "/" where it is not ambiguous
    rated = {(r["system"], r["category"]) for r in mine}
    assert {(e["system"], e["category"]) for e in player["ratings"] if not e["start"]} == rated
    system, category = next(iter(rated))
    history = get_json(f"{api}/v1/players/{q(SLASHED[0])}/history/{system}/{category}")
    assert history["items"] == sorted((r for r in mine if (r["system"], r["category"]) == (system, category)),
                                      key=lambda r: r["version"])
    assert get_json(f"{api}/v1/players/{q(SLASHED[0])}/unrated")["items"] == []


def test_an_id_that_ends_like_a_route_is_its_own_player(fed, api):
    """An id sent escaped is that player's, whatever it ends with: `club%2Funrated` is the player
    "club/unrated", not the unrated messages of "club" (the server decodes %2F before routing); the same for
    his history and his page."""
    _, published = fed
    for player_id in AWKWARD:
        mine = sorted((r for r in published if r["player_id"] == player_id), key=lambda r: r["version"])
        assert mine, player_id
        assert get_json(f"{api}/v1/players/{q(player_id)}")["player_id"] == player_id
        system, category = mine[0]["system"], mine[0]["category"]
        history = get_json(f"{api}/v1/players/{q(player_id)}/history/{system}/{category}")
        assert history["items"] == [r for r in mine if (r["system"], r["category"]) == (system, category)]
        assert get_json(f"{api}/v1/players/{q(player_id)}/unrated")["items"] == []
        status, headers, _ = get(f"{api}/players/{q(player_id)}")
        assert status == 200 and headers["content-type"].startswith("text/html"), (player_id, status)


def test_a_players_rank_and_percentile_are_his_place_on_the_board(fed, api):
    """Each rating on a board: the player route gives the board's rank, and the share (in %) of the board
    rated lower; a rating not on a board has neither."""
    on_board = set()
    for system, categories in RATINGS.items():
        for category in categories:
            board = every_page(f"{api}/v1/leaderboards/{system}/{category}?limit=1000")
            ratings = [e["rating"] for e in board]
            for entry in board[:: max(1, len(board) // 15)]:
                shown = next(r for r in get_json(f"{api}/v1/players/{q(entry['player_id'])}")["ratings"]
                             if (r["system"], r["category"]) == (system, category))
                lower = sum(1 for r in ratings if r < entry["rating"])
                assert (shown["rank"], shown["percentile"]) == (entry["rank"], round(100 * lower / len(ratings), 2))
                on_board.add((entry["player_id"], system, category))
    assert len(on_board) > 20
    player = get_json(f"{api}/v1/players/{q(SLASHED[0])}")  # three games: provisional, on no board
    assert all(r["rank"] is None and r["percentile"] is None for r in player["ratings"])
