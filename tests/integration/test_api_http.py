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

import io
import os
import urllib.parse
from dataclasses import dataclass

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
from worker.commands.replay import replay
from worker.dev.api import ApiServer
from worker.dev.streams import every_type
from worker.engine.preview import PREVIEWS
from worker.ratings.registry import RATINGS
from worker.store.postgres import PostgresStore

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
    with ApiServer(fed.url, log, {"SUPPORT_TOKEN": TOKEN, "API_CORS_ORIGINS": ORIGIN}) as server:
        yield server


def get(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> requests.Response:
    return requests.request(method, url, headers=headers, timeout=TIMEOUT_S, allow_redirects=False)


def q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def top_player(fed: Fed, system: str = "csr", category: str = "blitz") -> str:
    """The player with the most changes of that rating."""
    counts: dict[str, int] = {}
    for r in fed.published:
        if (r["system"], r["category"]) == (system, category):
            counts[r["player_id"]] = counts.get(r["player_id"], 0) + 1
    return max(sorted(counts), key=counts.__getitem__)


# -- 1. schemathesis: every route fuzzed from the served document -------------------------------------------

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance]
# per operation and mode: about 500 requests in all (API_FUZZ_EXAMPLES=400 fuzzes longer, locally)
EXAMPLES = int(os.environ.get("API_FUZZ_EXAMPLES", "40"))


def known_values(fed: Fed) -> dict[str, list[tuple[dict, dict]]]:
    """Per path, values that reach the data (path parameters, query parameters): pure fuzzing picks ids
    and categories nobody has, and would only ever see 404s."""
    ratings = sorted({(r["player_id"], r["system"], r["category"]) for r in fed.published})[::37]
    causes = sorted({(r["cause"]["source"], r["cause"]["id"]) for r in fed.published})[::97]
    players = sorted({p for p, _, _ in ratings})
    pairs = list(zip(players, players[1:], strict=False))[:8]
    return {
        "/v1/players/{player_id}": [({"player_id": p}, {}) for p in players],
        "/v1/players/{player_id}/history/{system}/{category}": [
            ({"player_id": p, "system": s, "category": c}, {}) for p, s, c in ratings],
        "/v1/leaderboards/{system}/{category}": [
            ({"system": s, "category": c}, {}) for s, cs in RATINGS.items() for c in cs],
        "/v1/messages": [({}, {"source": s, "id": i}) for s, i in causes],
        "/v1/preview/{system}/{category}": [
            ({"system": s, "category": c}, {"white": w, "black": b}) for s, cs in PREVIEWS.items() for c in cs
            for w, b in pairs[:2]],
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
    assert {o.path for o in operations} == set(known)
    failures, seen = {}, {}
    session = requests.Session()
    for operation in operations:
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            try:
                seen.setdefault(operation.path, set()).update(
                    fuzz(operation, mode, known[operation.path], api.url, session))
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - all operations' failures, together
                failures[f"{operation.label} ({mode})"] = str(exc)[:2000]
    assert not failures, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
    assert all({200, 400} <= statuses for statuses in seen.values()), seen
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
    import base64

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
