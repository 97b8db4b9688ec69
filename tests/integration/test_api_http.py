"""The read API's HTTP behaviour as clients this project did not write see it (issue 40, items 1, 4 and 5):
`rating-worker serve` over TCP on a real PostgreSQL fed with every message type (replayed, not through a
worker: the values are tests/integration/test_api.py's concern, the answers' shape is this module's).

- schemathesis fuzzes every route from the served /openapi.json: no 5xx, and every answer as documented
  (status code, content type, body schema, headers);
- bad input is an RFC 9457 problem naming the parameter, never a traceback or SQL;
- a database outage is a 503 with Retry-After (and /readyz says why), mended without a restart, and serve
  starts while PostgreSQL is away;
- ETag and 304, Cache-Control, gzip, CORS, and cursors that hold while ratings change;
- a role that may only SELECT serves every route, and the API takes no row lock a worker waits on.

`requests` is the HTTP client (it came with schemathesis). One fed database and one serve per configuration.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import io
import itertools
import os
import time
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import orjson
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.harness import new_database
from worker.api.responses import BOARD as BOARD_CACHE
from worker.api.responses import FRESH, NEVER, PRIVATE, STATIC
from worker.commands.replay import replay
from worker.dev.api import ApiServer
from worker.dev.proxy import TcpProxy
from worker.dev.streams import TCS, every_type, game_event
from worker.engine.preview import PREVIEWS
from worker.ratings import csr
from worker.ratings.inputs import TimeControl
from worker.ratings.registry import RATINGS
from worker.store.postgres import PostgresStore
from worker.store.reads import ranks

TOKEN = "http-tests-support-token"
ORIGIN = "https://example.org"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TIMEOUT_S = 10
pytestmark = pytest.mark.timeout(300)


@dataclass
class Fed:
    url: str
    published: list[dict]


async def replay_into(url: str, lines: list[bytes]) -> list[dict]:
    """Rate `lines` into the database at `url` (the worker's engine and store, no broker): the records."""
    store = await PostgresStore.connect(url)
    out = io.BytesIO()
    try:
        await replay(lines, out, store=store, errors=io.StringIO())
    finally:
        await store.close()
    return [orjson.loads(line)["data"] for line in out.getvalue().splitlines()]


@pytest.fixture(scope="module")
async def fed(postgres, template_db) -> Fed:
    url = await new_database(postgres, template_db)
    return Fed(url, await replay_into(url, every_type()))


@pytest.fixture(scope="module")
def api(fed, tmp_path_factory):
    log = tmp_path_factory.mktemp("api") / "serve.log"
    # Ranks placed on the board as it is at each request (API_RANKS_MAX_AGE_S=0): the tests change ratings and
    # compare answers of two servers, which boards held for seconds would make differ.
    with ApiServer(fed.url, log, {"SUPPORT_TOKEN": TOKEN, "API_CORS_ORIGINS": ORIGIN,
                                  "API_RANKS_MAX_AGE_S": "0"}) as server:
        yield server


def get(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> requests.Response:
    return requests.request(method, url, headers=headers, timeout=TIMEOUT_S, allow_redirects=False)


# -- 1. schemathesis: every route fuzzed from the served document -------------------------------------------

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance]
# per operation and mode: about 700 requests in all (API_FUZZ_EXAMPLES=400 fuzzes longer, locally)
EXAMPLES = int(os.environ.get("API_FUZZ_EXAMPLES", "60"))


def known_values(fed: Fed) -> dict[str, list[tuple[dict, dict]]]:
    """Per path, values that reach the data (path parameters, query parameters): pure fuzzing picks ids
    and categories nobody has, and would only ever see 404s."""
    ratings = sorted({(r["player_id"], r["system"], r["category"]) for r in fed.published})[::37]
    causes = sorted({(r["cause"]["source"], r["cause"]["id"]) for r in fed.published})[::97]
    players = sorted({p for p, _, _ in ratings})
    pairs = list(zip(players, players[1:], strict=False))[:2]
    return {
        "/v1/players/{player_id}": [({"player_id": p}, {}) for p in players],
        "/v1/players/{player_id}/history/{system}/{category}": [
            ({"player_id": p, "system": s, "category": c}, {}) for p, s, c in ratings],
        "/v1/leaderboards/{system}/{category}": [
            ({"system": s, "category": c}, {}) for s, cs in RATINGS.items() for c in cs],
        "/v1/messages": [({}, {"source": s, "id": i}) for s, i in causes],
        "/v1/preview/{system}/{category}": [
            ({"system": s, "category": c}, {"white": w, "black": b}) for s, cs in PREVIEWS.items() for c in cs
            for w, b in pairs],
        "/v1/fide/lists/{month}": [({"month": m}, {"rating_type": t}) for m in ("2027-03", "2026-01")
                                   for t in ("standard", "rapid", "blitz")],
    }


def cases(operation, mode, known: list[tuple[dict, dict]]):
    """Schemathesis' own cases of `operation`, and cases built on known values: positive ones with the
    known path and query parameters (the others generated), negative ones with the known path parameters
    and the query generated to break the document (so that they reach the query's checks, not a 404)."""
    generated = operation.as_strategy(mode)
    if not known:
        return generated
    if mode == schemathesis.GenerationMode.POSITIVE:
        return generated | st.sampled_from(known).flatmap(
            lambda k: operation.as_strategy(mode, path_parameters=k[0], query=k[1]))
    if not operation.query or not operation.path_parameters:
        return generated
    return generated | st.sampled_from(known).flatmap(
        lambda k: operation.as_strategy(mode, path_parameters=k[0]))


def fuzz(operation, mode, known: list[tuple[dict, dict]], base_url: str, session: requests.Session) -> set[int]:
    """Run the cases of one operation and mode through every check; the statuses seen (a failure raises)."""
    statuses: set[int] = set()

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=cases(operation, mode, known))
    def run(case):
        response = case.call_and_validate(base_url=base_url, session=session, headers=AUTH, checks=CHECKS,
                                          timeout=TIMEOUT_S)
        statuses.add(response.status_code)

    run()
    return statuses


def test_fuzzed_requests_get_documented_answers(api, fed):
    """Positive and negative cases of every operation of the served document: no 5xx, every status code,
    content type, body and header as documented. Derandomized, so that CI sees the same cases each run;
    the statuses seen are checked too, so that the fuzzing is known to reach the data (200s) and the
    checks of bad input (400s), not only 404s."""
    schema = schemathesis.openapi.from_url(f"{api.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    known = known_values(fed)
    assert {o.path for o in operations} >= set(known)  # a route added later is fuzzed from the document alone
    failures, seen = {}, {}
    session = requests.Session()
    for operation in operations:
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            try:
                seen.setdefault(operation.path, set()).update(
                    fuzz(operation, mode, known.get(operation.path, []), api.url, session))
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - all operations' failures, together
                failures[f"{operation.label} ({mode})"] = str(exc)[:2000]
    assert not failures, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
    assert all({200, 400} <= seen[path] for path in known), seen
    log = api.log_path.read_text()
    assert "Traceback" not in log and "a bug" not in log, log[-3000:]


# -- 2. bad input: a problem naming the parameter --------------------------------------------------------------

LEAKS = ("Traceback", "asyncpg", "SELECT", "postgres", "File \"", "Error:")


def problem(response: requests.Response, status: int, parameter: str | None) -> dict:
    """The response is an RFC 9457 problem of that status naming `parameter`, and leaks nothing."""
    assert response.status_code == status, (response.url, response.status_code, response.text[:500])
    assert response.headers["content-type"] == "application/problem+json", response.headers
    body = response.json()
    assert body["status"] == status and body["title"] and body["detail"] and body["type"] == "about:blank"
    assert body.get("parameter") == parameter, body
    assert not any(leak in response.text for leak in LEAKS), response.text
    return body


def cursor_of(kind: str, *position) -> str:
    """A cursor as the API builds one (base64url of a JSON array, unpadded): to tamper with."""
    return base64.urlsafe_b64encode(orjson.dumps([kind, *position])).decode().rstrip("=")


HISTORY = "/v1/players/p005/history/csr/blitz"
BOARD = "/v1/leaderboards/csr/blitz"
PREVIEW = "/v1/preview/csr/blitz"
BAD = [
    # unknown system or category
    ("/v1/leaderboards/nope/blitz", 404, "system"),
    ("/v1/leaderboards/csr/nope", 404, "category"),
    ("/v1/players/p005/history/nope/blitz", 404, "system"),
    ("/v1/players/p005/history/csr/puzzle", 404, "category"),
    ("/v1/preview/csr/nope?white=p005&black=p006", 404, "category"),
    # ids: too long, NUL, not UTF-8, never seen
    ("/v1/players/" + "x" * 129, 400, "player_id"),
    ("/v1/players/a%00b", 400, "player_id"),
    ("/v1/players/%FF", 400, "player_id"),
    ("/v1/players/%C0%80", 400, "player_id"),  # an overlong NUL: not UTF-8 either
    ("/v1/players/nobody-ever", 404, "player_id"),
    (f"/v1/players/{'x' * 129}/history/csr/blitz", 400, "player_id"),
    ("/v1/players/a%FFb/history/csr/blitz", 400, "player_id"),
    ("/v1/messages?source=%2Ffixed&id=%FF", 400, "id"),
    ("/v1/messages?source=a%00&id=x", 400, "source"),
    (f"{PREVIEW}?white=%FF&black=p006", 400, "white"),
    (f"{PREVIEW}?white=p005&black={'y' * 129}", 400, "black"),
    # limits
    *[(f"{path}?limit={limit}", 400, "limit") for path in (HISTORY, BOARD) for limit in ("0", "-1", "1001", "abc",
                                                                                          "1.5", "", "1%00")],
    # cursors: garbage, another route's, tampered
    *[(f"{path}?cursor={cursor}", 400, "cursor") for path in (HISTORY, BOARD) for cursor in (
        "garbage", "%FF", "", "W10", cursor_of("board", 1500.0), cursor_of("board", "p005", 1500.0),
        cursor_of("board", 1500.0, "x" * 129), cursor_of("board", 1500.0, "p\x00"), cursor_of("board", True, "p"),
        cursor_of("history-desc", 5), cursor_of("history-asc", "5"), cursor_of("history-asc", 2**40),
        cursor_of("history-asc", 5)[:-2] + "!!")],
    (f"{BOARD}?cursor={cursor_of('history-asc', 5)}", 400, "cursor"),
    (f"{HISTORY}?cursor={cursor_of('board', 1500.0, 'p005')}", 400, "cursor"),
    (f"{HISTORY}?order=desc&cursor={cursor_of('history-asc', 5)}", 400, "cursor"),
    # times and order
    *[(f"{HISTORY}?{name}={value}", 400, name) for name in ("from", "to") for value in (
        "yesterday", "2026-13-01T00:00:00Z", "2026-01-01T00:00:00", "2026-01-01T25:00:00Z", "1767225600")],
    (f"{HISTORY}?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z", 400, "from"),
    (f"{HISTORY}?order=sideways", 400, "order"),
    (f"{PREVIEW}?white=p005&black=p006&at=tomorrow", 400, "at"),
    # active days
    *[(f"{BOARD}?active_days={days}", 400, "active_days") for days in ("0", "-1", "nan", "inf", "-inf", "abc",
                                                                      "1e6")],
    # required parameters
    ("/v1/messages?source=%2Ffixed", 400, "id"),
    ("/v1/messages?id=x-1", 400, "source"),
    ("/v1/messages?source=&id=x-1", 400, "source"),
    (f"{PREVIEW}?white=p005", 400, "black"),
    (f"{PREVIEW}?black=p005", 400, "white"),
    # a preview: a system without one, the same player on both sides
    ("/v1/preview/chesstempo/blitz?white=p005&black=p006", 404, "system"),
    ("/v1/preview/tsr/turbo?white=p005&black=p006", 404, "system"),
    (f"{PREVIEW}?white=p005&black=p005", 400, "black"),
    # FIDE's lists: a month that is not one, a list not applied
    ("/v1/fide/lists/2027-13", 400, "month"),
    ("/v1/fide/lists/march", 400, "month"),
    ("/v1/fide/lists/2027-03?rating_type=bullet", 400, "rating_type"),
    ("/v1/fide/lists/1999-01", 404, "month"),
]


@pytest.mark.parametrize(("path", "status", "parameter"), BAD, ids=[b[0][:70] for b in BAD])
def test_bad_input_is_a_problem_naming_the_parameter(api, path, status, parameter):
    problem(get(api.url + path, AUTH), status, parameter)


EDGES = [  # times at the ends of what a datetime holds, and of the years a preview takes: 200 or 400
    *[(f"{HISTORY}?{name}={urllib.parse.quote(t)}", status, name) for name in ("from", "to") for t, status in (
        ("0001-01-01T00:00:00Z", 200), ("9999-12-31T23:59:59Z", 200), ("0001-01-01T00:00:00+14:00", 400),
        ("9999-12-31T23:59:59-14:00", 400))],
    *[(f"/v1/preview/{system}/{category}?white=p005&black=p006&at={urllib.parse.quote(t)}", status, "at")
      for system, category in (("csr", "blitz"), ("fide", "standard"), ("uscf", "regular")) for t, status in (
          ("1900-01-01T00:00:00Z", 200), ("2999-12-31T23:59:59Z", 200), ("1899-12-31T23:59:59Z", 400),
          ("2999-12-31T23:59:59-01:00", 400), ("9999-12-31T23:59:59Z", 400), ("0001-01-01T00:00:00+14:00", 400))],
]


@pytest.mark.parametrize(("path", "status", "parameter"), EDGES, ids=[e[0][-60:] for e in EDGES])
def test_a_time_at_the_edge_of_the_calendar_is_never_a_500(api, path, status, parameter):
    response = get(api.url + path)
    if status == 400:
        problem(response, 400, parameter)
    else:
        assert response.status_code == 200, (path, response.text[:300])


def test_a_path_or_method_that_is_not_served_is_a_problem(api):
    assert problem(get(f"{api.url}/v2/players/p005"), 404, None)["instance"] == "/v2/players/p005"
    problem(get(f"{api.url}/v1/players"), 404, None)
    response = get(f"{api.url}/v1/players/p005", method="POST")
    problem(response, 405, None)
    assert "GET" in response.headers["allow"]
    problem(get(f"{api.url}/v1/leaderboards/csr/blitz", method="DELETE"), 405, None)


def test_the_support_route_needs_the_token(api):
    """Missing, wrong, or in another scheme: 401 with the challenge (RFC 6750), and nothing about the message."""
    path = f"{api.url}/v1/messages?source=%2Ffixed&id=x-1"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
                    {"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": "Bearer"}):
        response = get(path, headers)
        problem(response, 401, "authorization")
        assert response.headers["www-authenticate"].startswith("Bearer "), headers
        assert "x-1" not in response.json()["detail"]
    assert get(path, AUTH).json()["status"] == "applied"
    assert get(path, {"Authorization": f"bearer {TOKEN}"}).status_code == 200  # the scheme is case-insensitive


# -- 3. a database outage ---------------------------------------------------------------------------------------

ROUTES = ["/v1/players/p005", "/v1/players/p005/history/csr/blitz", "/v1/leaderboards/csr/blitz",
          "/v1/messages?source=%2Ffixed&id=x-1", "/v1/preview/csr/blitz?white=p005&black=p006",
          "/v1/fide/lists/2027-03"]


def through(url: str, proxy: TcpProxy) -> str:
    """The database URL with the proxy in place of the server."""
    parts = urllib.parse.urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))


async def aget(url: str, headers: dict[str, str] | None = None) -> requests.Response:
    """`get` off the event loop, which the proxy runs on."""
    return await asyncio.to_thread(get, url, headers)


async def answers(base: str) -> dict[str, requests.Response]:
    return {path: await aget(base + path, AUTH) for path in ROUTES}


async def mended(base: str, within_s: float = 20.0) -> dict[str, int]:
    """Each route's status once all of them answer 200; until then, each answer is a 200 or a 503."""
    deadline = time.monotonic() + within_s
    while True:
        statuses = {path: r.status_code for path, r in (await answers(base)).items()}
        assert set(statuses.values()) <= {200, 503}, statuses
        if set(statuses.values()) == {200} or time.monotonic() > deadline:
            return statuses
        await asyncio.sleep(0.2)


async def test_an_outage_is_a_503_and_serve_mends_without_a_restart(fed, tmp_path):
    """serve started while PostgreSQL can not be reached starts, answers 503 (with Retry-After) and says why on
    /readyz, and answers 200 once it can; a later outage of the same process is a 503 again, mended again;
    so is a database too slow to answer within API_DB_TIMEOUT_S. The fault: worker/dev/proxy.py between
    serve and PostgreSQL, cut (every connection reset, new ones refused), slowed, and restored."""
    target = urllib.parse.urlsplit(fed.url)
    proxy = await TcpProxy(target.hostname, target.port).start()
    proxy.cut()
    server = ApiServer(through(fed.url, proxy), tmp_path / "serve.log",
                       {"SUPPORT_TOKEN": TOKEN, "API_DB_TIMEOUT_S": "1"})
    await asyncio.to_thread(server.start)
    try:
        for phase in ("started while away", "lost while serving"):
            proxy.cut()
            for path, response in (await answers(server.url)).items():
                body = problem(response, 503, None)
                assert response.headers["retry-after"].isdigit(), (phase, path)
                assert body["detail"].startswith("database: "), (phase, body)
            ready = await aget(f"{server.url}/readyz")
            assert ready.status_code == 503 and ready.headers["retry-after"].isdigit(), phase
            reason = ready.json()["reason"]
            assert reason.startswith("database: the server is unreachable: "), reason
            assert (await aget(f"{server.url}/healthz")).status_code == 200  # alive: not to be restarted
            assert proxy.refused > 0
            proxy.restore()
            assert await mended(server.url) == dict.fromkeys(ROUTES, 200), phase
            assert (await aget(f"{server.url}/readyz")).json() == {"status": "ready"}
        proxy.upstream_delay = 2.5  # each query held longer than the API waits (1 s, then 1 s more)
        slow = await aget(server.url + ROUTES[0])
        assert problem(slow, 503, None)["detail"].startswith("database: ") and slow.headers["retry-after"].isdigit()
        assert proxy.delayed_chunks > 0
        proxy.upstream_delay = 0
        assert await mended(server.url) == dict.fromkeys(ROUTES, 200)
        assert server.proc.poll() is None  # the same process throughout
    finally:
        await asyncio.to_thread(server.stop)
        await proxy.stop()
    log = (tmp_path / "serve.log").read_text()
    assert "Traceback" not in log and "a bug" not in log, log[-3000:]
    assert "cannot connect to PostgreSQL" in log


# -- 4. HTTP as clients expect -----------------------------------------------------------------------------------

BLITZ = next(tc for tc in TCS if csr.category(TimeControl(**tc)) == "blitz")
_games = itertools.count()


def blitz_game(white: str, black: str, result: str = "1-0") -> bytes:
    """One more rated CSR blitz game, a few days after the stream's own (its players' RDs barely grow)."""
    i = next(_games)
    return orjson.dumps(game_event(i, white, black, result, datetime(2026, 1, 10, tzinfo=UTC) + timedelta(minutes=i),
                                   BLITZ, source="/http-tests"))


def test_an_etag_revalidates(api):
    """Each JSON answer has an ETag; If-None-Match with it (or weak, or among others, or *) is a 304 without a
    body and with the same headers; another tag gets the answer."""
    urls = [f"{api.url}/v1/players/p005", f"{api.url}/v1/players/p005/history/csr/blitz",
            f"{api.url}/v1/leaderboards/csr/blitz?limit=1000"]
    first = {url: get(url) for url in urls}
    for url, response in first.items():
        assert response.status_code == 200 and response.headers["etag"].startswith('"'), url
        tag = response.headers["etag"]
        for header in (tag, f"W/{tag}", f'"other", {tag}', "*"):
            again = get(url, {"If-None-Match": header})
            assert again.status_code == 304 and again.content == b"", (url, header)
            assert again.headers["etag"] == tag and again.headers["cache-control"] == response.headers["cache-control"]
        assert get(url, {"If-None-Match": '"other"'}).status_code == 200
        assert get(url).headers["etag"] == tag  # the same answer, the same tag


async def test_the_etag_changes_with_the_rating(api, fed):
    """One more game of p005: his ratings, his history and the board answer a revalidation with the new
    answer and a new tag, and the history's newest item is the game's record as published."""
    urls = [f"{api.url}/v1/players/p005", f"{api.url}/v1/players/p005/history/csr/blitz",
            f"{api.url}/v1/leaderboards/csr/blitz?limit=1000"]
    before = {url: await aget(url) for url in urls}
    records = await replay_into(fed.url, [blitz_game("p005", "p006")])
    assert {(r["player_id"], r["category"]) for r in records} == {("p005", "blitz"), ("p006", "blitz")}
    for url, response in before.items():
        after = await aget(url, {"If-None-Match": response.headers["etag"]})
        assert after.status_code == 200 and after.headers["etag"] != response.headers["etag"], url
    history = (await aget(urls[1])).json()["items"]
    assert history[-1] == next(r for r in records if r["player_id"] == "p005")


def test_each_route_says_how_long_its_answer_may_be_reused(api):
    expected = {"/v1/players/p005": FRESH, "/v1/players/p005/history/csr/blitz": FRESH,
                "/v1/leaderboards/csr/blitz": BOARD_CACHE, "/v1/messages?source=%2Ffixed&id=x-1": PRIVATE,
                "/v1/preview/csr/blitz?white=p005&black=p006": NEVER, "/v1/fide/lists/2027-03": FRESH,
                "/openapi.json": STATIC}
    shown = {path: get(api.url + path, AUTH) for path in expected}
    assert {p: (r.status_code, r.headers.get("cache-control")) for p, r in shown.items()} == {
        p: (200, cache) for p, cache in expected.items()}
    # what support asks and the points at stake are never stored by a shared cache
    assert "private" in PRIVATE and NEVER == "no-store"


def test_a_large_answer_is_compressed_when_asked(api):
    url = f"{api.url}/v1/leaderboards/csr/blitz?limit=1000"
    plain = get(url, {"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and "content-encoding" not in plain.headers and len(plain.content) > 5000
    with requests.get(url, headers={"Accept-Encoding": "gzip"}, timeout=TIMEOUT_S, stream=True) as packed:
        assert packed.headers["content-encoding"] == "gzip" and "Accept-Encoding" in packed.headers["vary"]
        raw = packed.raw.read(decode_content=False)
    assert gzip.decompress(raw) == plain.content and len(raw) < len(plain.content) / 3
    small = get(f"{api.url}/v1/players/nobody-ever", {"Accept-Encoding": "gzip"})  # a few hundred bytes
    assert small.status_code == 404 and "content-encoding" not in small.headers
    history = get(f"{api.url}/v1/players/p005/history/csr/blitz?limit=1000", {"Accept-Encoding": "gzip"})
    assert history.headers["content-encoding"] == "gzip" and history.json()["items"]


def test_cors_answers_the_configured_origin_only(api):
    url = f"{api.url}/v1/players/p005"
    preflight = {"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization"}
    allowed = get(url, {"Origin": ORIGIN, **preflight}, method="OPTIONS")
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == ORIGIN
    assert "GET" in allowed.headers["access-control-allow-methods"]
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    refused = get(url, {"Origin": "https://elsewhere.example", **preflight}, method="OPTIONS")
    assert refused.status_code >= 400 and "access-control-allow-origin" not in refused.headers
    simple = get(url, {"Origin": ORIGIN})
    assert simple.status_code == 200 and simple.headers["access-control-allow-origin"] == ORIGIN
    assert "etag" in simple.headers["access-control-expose-headers"].lower()
    other = get(url, {"Origin": "https://elsewhere.example"})
    assert other.status_code == 200 and "access-control-allow-origin" not in other.headers


async def test_a_cursor_holds_while_ratings_change(api, fed):
    """Page 1 of a leaderboard; then a rating enters above its end (an import) and games move ratings above
    and below it; the next page starts right after page 1's last entry as the board now is: no entry twice,
    the order kept, the ranks going on from page 1's. A page at an offset would have shown page 1's last entry again (checked: the entrant
    pushed it one place down), which is what the cursor is for. (An entry whose own rating crosses the end
    of page 1 between the two requests is shown where it now is: twice, or not at all.)"""
    board = f"{api.url}/v1/leaderboards/csr/blitz"
    page1 = (await aget(f"{board}?limit=10")).json()
    whole = (await aget(f"{board}?limit=1000")).json()["items"]
    last = page1["items"][-1]
    top = [e["player_id"] for e in page1["items"] if not e["player_id"].startswith("imp")][:2]
    bottom = [e["player_id"] for e in whole if not e["player_id"].startswith("imp")][-2:]
    imported = orjson.dumps({
        "specversion": "1.0", "id": "enter-1", "source": "/http-tests", "type": "rating.imported",
        "time": "2026-03-02T00:00:00Z", "data": {"player_id": "http-entrant", "system": "csr", "category": "blitz",
                                                  "rating": last["rating"] + 300, "rd": 60,
                                                  "imported_at": "2026-03-02T00:00:00Z"}})
    records = await replay_into(fed.url, [imported, blitz_game(*top), blitz_game(*top, "0-1"),
                                          blitz_game(*bottom), blitz_game(*bottom, "1/2-1/2")])
    assert {r["player_id"] for r in records} == {"http-entrant", *top, *bottom}
    page2 = (await aget(f"{board}?limit=1000&cursor={page1['next']}")).json()
    now = (await aget(f"{board}?limit=1000")).json()["items"]
    shown = [e["player_id"] for e in page1["items"] + page2["items"]]
    assert len(shown) == len(set(shown)), "an entry appeared twice"
    key = [(-e["rating"], e["player_id"]) for e in page2["items"]]
    assert key == sorted(key) and key[0] > (-last["rating"], last["player_id"])
    after = [e for e in now if (-e["rating"], e["player_id"]) > (-last["rating"], last["player_id"])]
    def unranked(items: list[dict]) -> list[dict]:
        return [{k: v for k, v in e.items() if k != "rank"} for e in items]

    assert unranked(page2["items"]) == unranked(after)
    # the ranks go on from page 1's, as it numbered the board (not counted again above the page)
    assert [e["rank"] for e in page2["items"]] == ranks([e["rating"] for e in page2["items"]],
                                                        (last["rating"], last["rank"], len(page1["items"])))
    assert now[len(page1["items"])]["player_id"] == last["player_id"]  # an offset would repeat it


# -- 5. read-only --------------------------------------------------------------------------------------------------

READS = ["/v1/players/p005", "/v1/players/p001", "/v1/players/p005/history/csr/blitz?order=desc&limit=5",
         "/v1/leaderboards/csr/blitz?limit=1000", "/v1/leaderboards/fide/standard", "/v1/leaderboards/uscf/regular",
         "/v1/messages?source=%2Ffixed&id=x-1", "/v1/messages?source=%2Ffixed&id=x-10",
         "/v1/preview/csr/blitz?white=p005&black=p006&at=2026-06-01T00:00:00Z",
         "/v1/preview/fide/standard?white=p005&black=p006&at=2026-06-01T00:00:00Z",
         "/v1/fide/lists/2027-03", "/openapi.json", "/readyz"]


def as_role(url: str, role: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}"))


async def test_a_role_that_may_only_select_serves_every_route(api, fed, tmp_path):
    """serve logged in as a role with LOGIN, USAGE on the schema and SELECT on its tables, nothing else: every
    route answers as it does for the tables' owner. The role can write nothing, and can not lock a row
    either (FOR UPDATE and FOR SHARE need the UPDATE privilege), so that whatever the API sends, it takes no
    lock a worker waits on. No CORS origin is configured for it: no CORS header."""
    role = f"api_reader_{os.getpid()}"
    owner = await asyncpg.connect(fed.url)
    try:
        await owner.execute(f"CREATE ROLE {role} LOGIN")
        await owner.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        await owner.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
        reader = await asyncpg.connect(as_role(fed.url, role))
        try:
            for statement in ("UPDATE players SET closed_reason = NULL WHERE player_id = 'p005'",
                              "SELECT 1 FROM players WHERE player_id = 'p005' FOR SHARE",
                              "CREATE TABLE mine (x int)"):
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await reader.execute(statement)
        finally:
            await reader.close()
        with ApiServer(as_role(fed.url, role), tmp_path / "serve.log",
                       {"SUPPORT_TOKEN": TOKEN, "API_RANKS_MAX_AGE_S": "0"}) as server:
            for path in READS:
                mine, theirs = await aget(server.url + path, AUTH), await aget(api.url + path, AUTH)
                assert (mine.status_code, mine.content) == (200, theirs.content), (path, mine.text[:300])
            assert "access-control-allow-origin" not in (await aget(server.url + READS[0], {"Origin": ORIGIN})).headers
    finally:
        await owner.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
        await owner.execute(f"REVOKE ALL ON SCHEMA public FROM {role}")
        await owner.execute(f"DROP ROLE IF EXISTS {role}")
        await owner.close()


async def test_a_worker_holding_a_players_rows_does_not_hold_up_the_api(api, fed):
    """A worker's batch holds its players' rows FOR UPDATE (queries.sql, lock_players_select) and updates
    their ratings while it rates. Meanwhile every route about those players answers 200: the API reads a
    snapshot and waits on no row lock. Had it asked for one (FOR SHARE), it would have waited for the batch
    until its statement timeout (API_DB_TIMEOUT_S, 5 s) and answered 503, or been refused by its read-only
    session (a 500)."""
    batch = await asyncpg.connect(fed.url)
    try:
        async with batch.transaction():
            locked = await batch.fetch("SELECT player_id FROM players WHERE player_id = ANY($1::text[]) "
                                       "ORDER BY player_id FOR UPDATE", ["p005", "p006"])
            assert len(locked) == 2
            await batch.execute("UPDATE ratings SET games = games WHERE player_id = ANY($1::text[])", ["p005", "p006"])
            answers = {path: await aget(api.url + path, AUTH) for path in READS}
            waiting = await batch.fetchval("SELECT count(*) FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid) "
                                           "WHERE a.application_name = 'rating-worker-api' AND NOT l.granted")
    finally:
        await batch.close()
    assert {p: r.status_code for p, r in answers.items()} == dict.fromkeys(READS, 200)
    assert waiting == 0
