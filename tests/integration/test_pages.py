"""The pages a person looks at (issue 41), in a real browser (tests/integration/browser.py: Debian's Chromium
driven by Playwright), against `rating-worker serve` over a database fed with every message type (replayed:
the worker's engine) and a player and a message whose ids are HTML.

- Each page shows what the read API answers, value for value: a player's ratings as the Account tab shows
  them, his latest changes and the messages that changed none of his ratings; a leaderboard and its next
  page; a message's status, changes and whom it left out. One leads to the other by clicks.
- The charts draw the history: uPlot holds the history route's points, each is on the drawn line, the peak's
  dot is where the peak is, and a drag with the mouse or the keyboard's buttons zoom.
- The leaderboard page shows a new rating by itself, without being reloaded.
- The hostile ids are shown as text, and nothing of them runs.
- Every page at 1280x800 and 360x740: lang, headings, labels, table headers, contrast, a visible focus,
  nothing wider than the phone; a screenshot of each in $TEST_ARTIFACTS (else a temporary directory,
  printed). UPDATE_SCREENSHOTS=1 also writes the README's docs/images/player.png.
"""

from __future__ import annotations

import io
import math
import os
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path

import asyncpg
import orjson
import pytest

from tests.integration.browser import (  # noqa: F401 - browser_fixture: the fixture `browser`
    DESKTOP,
    PHONE,
    browser_fixture,
    cells,
    check_accessible,
    follow,
    load,
    needs_browser,
    tab,
)
from tests.integration.harness import new_database
from tests.integration.test_api import every_page, get, get_json
from worker.commands.replay import replay
from worker.dev.api import ApiServer
from worker.dev.streams import TCS, every_type, game_event
from worker.ratings.registry import RATINGS
from worker.store.postgres import PostgresStore

pytestmark = [needs_browser, pytest.mark.timeout(300)]

TOKEN = "a-support-token"
HOSTILE = '<img src=x onerror="window.__pwned=1">&amp;\''
HOSTILE_MESSAGE = "<svg onload=window.__pwned=2>"
PLAYED = datetime(2026, 1, 3, 3, tzinfo=UTC)  # after every_type()'s games
AFTER = datetime(2027, 3, 2, tzinfo=UTC)  # after its last message
ROOT = Path(__file__).resolve().parents[2]


def hostile_stream() -> list[bytes]:
    """A player whose id is HTML: 24 rated blitz games against the stream's players, right after theirs, two
    in three won (he is established, on the first page of the leaderboard), and a casual game sent under a
    message id that is HTML (his page lists it)."""
    games = [game_event(90000 + i, HOSTILE, ("p003", "p023", "p078", "p057")[i % 4], ("1-0", "1-0", "1/2-1/2")[i % 3],
                        PLAYED + timedelta(minutes=i), TCS[2], "/pages") for i in range(24)]
    casual = game_event(90100, "p003", HOSTILE, "1-0", PLAYED + timedelta(hours=1), TCS[2], "/pages", rated=False)
    return [orjson.dumps(g) for g in games] + [orjson.dumps({**casual, "id": HOSTILE_MESSAGE})]


async def replay_into(database_url: str, lines: list[bytes]) -> None:
    store = await PostgresStore.connect(database_url)
    try:
        await replay(lines, io.BytesIO(), store=store, errors=io.StringIO())
    finally:
        await store.close()


@dataclass(frozen=True)
class Site:
    url: str
    database_url: str

    def api(self, path: str, **query) -> dict:
        return get_json(f"{self.url}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else ""),
                        {"Authorization": f"Bearer {TOKEN}"})


@pytest.fixture(scope="module")
async def site(postgres, template_db, tmp_path_factory):
    url = await new_database(postgres, template_db)
    await replay_into(url, every_type() + hostile_stream())
    log = tmp_path_factory.mktemp("pages") / "serve.log"
    # ranks placed on the board as it is at each request: a page and the API asked a moment apart agree
    with ApiServer(url, log, {"SUPPORT_TOKEN": TOKEN, "LOG_LEVEL": "WARNING", "API_RANKS_MAX_AGE_S": "0"}) as server:
        yield Site(server.url, url)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory, pytestconfig) -> Path:
    where = Path(os.environ["TEST_ARTIFACTS"]) / "pages" if os.environ.get("TEST_ARTIFACTS") else \
        tmp_path_factory.mktemp("pages-screenshots")
    where.mkdir(parents=True, exist_ok=True)
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        with pytestconfig.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
            reporter.write_line(f"\ntest_pages: screenshots in {where}")
    return where


def q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


# What the pages show, written out again here from the issue (the Account tab's marks) and docs/api.md.

NAMES = {"csr": "CSR", "tsr": "TSR", "uscf": "US Chess", "fide": "FIDE", "chesskite": "ChessKite",
         "chesstempo": "Chess Tempo"}


def rating_name(system: str, category: str) -> str:
    return f"{NAMES[system]} {category.capitalize()}"


def whole(x: float | None) -> str:
    """In whole points, halves up (JavaScript's Math.round), from the exact value of the double."""
    return "–" if x is None else str(math.floor(Decimal(x) + Decimal("0.5")))


def signed(x: float | None) -> str:
    """A change to a tenth, with its sign (JavaScript's toFixed(1): halves away from zero)."""
    if x is None:
        return "–"
    tenths = int((abs(Decimal(x)) * 10 + Decimal("0.5")).to_integral_value(ROUND_FLOOR))
    return ("+" if x > 0 else "-" if x < 0 else "") + f"{tenths // 10}.{tenths % 10}"


def minute(iso: str | None) -> str:
    return "–" if iso is None else f"{iso[:10]} {iso[11:16]}"


def shown(r: dict) -> str:
    """The Account tab's rating: '?' while provisional; US Chess: P and the games it is based on."""
    if r["rating"] is None:
        return "unlisted"
    mark = (f"P{r['games']}" if r["system"] == "uscf" else "?") if r["provisional"] else ""
    return whole(r["rating"]) + mark


def number(x: float) -> str:
    return str(int(x)) if x == int(x) else repr(x)


def rating_row(r: dict) -> dict:
    return {"key": f"{r['system']}/{r['category']}", "name": rating_name(r["system"], r["category"]),
            "shown": shown(r), "value": r["rating"],
            "badges": ["start"] * r["start"] + ["inactive"] * bool(r["inactive"]),
            "rd": "–" if r["rd"] is None else f"±{whole(r['rd'])}", "floor": whole(r["floor"]),
            "games": str(r["games"]), "rank": "–" if r["rank"] is None else str(r["rank"]),
            "percentile": "–" if r["percentile"] is None else f"{number(r['percentile'])}%",
            "last": minute(r["last_played_at"])}


RATING_ROWS = """() => [...document.querySelectorAll("#ratings tbody tr")].map(tr => {
  const text = (s) => tr.querySelector(s).textContent.trim();
  const value = tr.querySelector(".rating").dataset.value;
  return {key: tr.dataset.rating, name: text("th"), shown: text(".shown"), value: value === "" ? null : Number(value),
          badges: [...tr.querySelectorAll(".badge")].map(b => b.textContent), rd: text(".rd"), floor: text(".floor"),
          games: text(".games"), rank: text(".rank"), percentile: text(".percentile"), last: text(".last")};
})"""

FEATURES = {  # what the player pages must show between them, found in the stream's players
    "provisional, '?'": lambda r: r["provisional"] and r["system"] != "uscf" and not r["start"],
    "a CSR speed not played yet": lambda r: r["start"],
    "a floor": lambda r: r["floor"] is not None,
    "FIDE's inactive flag": lambda r: r["inactive"] is True,
    "US Chess provisional, P": lambda r: r["system"] == "uscf" and r["provisional"],
    "US Chess established": lambda r: r["system"] == "uscf" and not r["provisional"],
    "a rank": lambda r: r["rank"] is not None,
}


async def players_showing(site: Site) -> dict[str, str]:
    """A player for each feature (and one closed for fair play), from every player with a rating."""
    conn = await asyncpg.connect(site.database_url)
    try:
        ids = [r[0] for r in await conn.fetch("SELECT DISTINCT player_id FROM ratings WHERE system = ANY($1) "
                                              "ORDER BY 1", list(RATINGS))]
    finally:
        await conn.close()
    chosen: dict[str, str] = {}
    for player_id in ids:
        player = site.api(f"/v1/players/{q(player_id)}")
        if player["closed"]:
            chosen.setdefault("closed for fair play", player_id)
        for feature, test in FEATURES.items():
            if any(test(r) for r in player["ratings"]):
                chosen.setdefault(feature, player_id)
    assert set(chosen) == {*FEATURES, "closed for fair play"}, chosen
    return chosen


async def test_the_player_page_shows_every_rating_as_the_api_does(site, browser):
    chosen = await players_showing(site)
    async with tab(browser) as page:
        for feature, player_id in chosen.items():
            await load(page, f"{site.url}/players/{q(player_id)}")
            player = site.api(f"/v1/players/{q(player_id)}")
            assert await page.text_content("h1") == player_id
            assert await page.evaluate(RATING_ROWS) == [rating_row(r) for r in player["ratings"]], feature
            closed = await page.query_selector("#closed .problem")
            assert (closed is not None) == player["closed"], feature
            if player["closed"]:
                assert minute(player["closed_at"]) in await closed.text_content()


def latest(histories: list[dict], n: int = 20) -> list[list[str]]:
    changes = sorted(histories, key=lambda c: (c["changed_at"], c["version"]), reverse=True)[:n]
    return [[minute(c["changed_at"]), rating_name(c["system"], c["category"]), whole(c["before"]["rating"]),
             whole(c["after"]["rating"]), signed(c["delta"]), f"{c['cause']['type']} {c['cause']['ref'] or c['cause']['id']}"]
            for c in changes]


def histories_of(site: Site, player_id: str) -> dict[str, list[dict]]:
    """Every played rating's history, all pages: "system/category" -> records."""
    return {f"{r['system']}/{r['category']}": every_page(
        f"{site.url}/v1/players/{q(player_id)}/history/{r['system']}/{r['category']}?limit=1000")
        for r in site.api(f"/v1/players/{q(player_id)}")["ratings"] if r["version"]}


async def test_the_player_page_lists_his_changes_and_the_messages_that_changed_none(site, browser):
    # the route under the page: the casual game sent under an HTML id, and p001's games after his closure
    unrated = site.api(f"/v1/players/{q(HOSTILE)}/unrated")["items"]
    assert [(u["id"], u["reason"], u["type"]) for u in unrated] == [(HOSTILE_MESSAGE, "casual", "game.finished")]
    assert {u["reason"] for u in site.api("/v1/players/p001/unrated", limit=1000)["items"]} >= {"closed_account"}
    async with tab(browser) as page:
        for player_id in (HOSTILE, "p001", "p003"):
            await load(page, f"{site.url}/players/{q(player_id)}")
            histories = histories_of(site, player_id)
            assert await cells(page, "#changes") == latest([c for h in histories.values() for c in h])
            expected = [[minute(u["message_at"]), f"{u['type']} {u['ref'] or u['id']}", NAMES.get(u["system"], u["system"]),
                         f"{u['explanation']} ({u['reason']})"]
                        for u in site.api(f"/v1/players/{q(player_id)}/unrated")["items"]] or [["None."]]
            assert await cells(page, "#unrated") == expected


SERIES = """(key) => { const u = ratingCharts.get(key); return {data: u.data, labels: u.series.map(s => s.label)}; }"""
# the canvas around each point of the rating, and around the peak's dot, where uPlot says they are drawn;
# `hidden`: the points under the dot (10 px wide), which the dot covers
DRAWN = """(key) => {
  const u = ratingCharts.get(key), at = (x, y) => [u.valToPos(x, "x", true), u.valToPos(y, "y", true)];
  const around = ([x, y]) => Array.from(u.ctx.getImageData(Math.round(x) - 3, Math.round(y) - 3, 7, 7).data);
  const peak = u.data.at(-1).findIndex(v => v !== null), dot = at(u.data[0][peak], u.data.at(-1)[peak]);
  const points = u.data[0].map((x, i) => at(x, u.data[1][i]));
  return {points: points.map(around), dot: around(dot),
          hidden: points.flatMap(([x, y], i) => Math.hypot(x - dot[0], y - dot[1]) < 8 * devicePixelRatio ? [i] : [])};
}"""
RATING_RGB, PEAK_RGB = (0x1F, 0x5F, 0xA8), (0xC0, 0x00, 0x1A)


def has_colour(rgba: list[int], rgb: tuple[int, int, int], tolerance: int = 40) -> bool:
    pixels = [rgba[i:i + 4] for i in range(0, len(rgba), 4)]
    return any(p[3] > 200 and all(abs(p[c] - rgb[c]) <= tolerance for c in range(3)) for p in pixels)


def drawn_series(history: list[dict]) -> dict[str, list]:
    """What the chart must hold: x as the time of each change in the order applied (a late one at the time
    of the one before it), the rating, rating -/+ 2 RD, the floor."""
    points = [h for h in history if h["after"]["rating"] is not None]
    x, latest_s = [], -math.inf
    for h in points:
        latest_s = max(latest_s, datetime.fromisoformat(h["changed_at"]).timestamp())
        x.append(latest_s)
    rating = [h["after"]["rating"] for h in points]
    out = {"x": x, "rating": rating}
    if any(h["after"]["rd"] is not None for h in points):
        out["low"] = [h["after"]["rating"] - 2 * h["after"]["rd"] for h in points]
        out["high"] = [h["after"]["rating"] + 2 * h["after"]["rd"] for h in points]
    if any(h["floor"] is not None for h in points):
        out["floor"] = [h["floor"] for h in points]
    return out


async def test_the_charts_draw_each_history_and_zoom(site, browser):
    histories = histories_of(site, "p003")
    async with tab(browser) as page:
        await load(page, f"{site.url}/players/p003")
        assert sorted(await page.evaluate("[...ratingCharts.keys()]")) == sorted(histories)
        for key, history in histories.items():
            chart = await page.evaluate(SERIES, key)
            want = drawn_series(history)
            data = dict(zip(["x", "rating", *(["low", "high"] if "low" in want else []),
                             *(["floor"] if "floor" in want else []), "peak"], chart["data"], strict=True))
            for name, values in want.items():
                assert data[name] == (values if name == "floor" else pytest.approx(values)), (key, name)
            top = max(range(len(want["rating"])), key=lambda i: (want["rating"][i], -i))
            assert data["peak"] == [want["rating"][top] if i == top else None for i in range(len(want["x"]))], key
            drawn = await page.evaluate(DRAWN, key)
            assert has_colour(drawn["dot"], PEAK_RGB), f"{key}: no peak dot where the peak is"
            missed = [i for i, p in enumerate(drawn["points"]) if i not in drawn["hidden"] and not has_colour(p, RATING_RGB)]
            assert missed == [], f"{key}: points not on the drawn line: {missed}"
        # zoom: a drag across the middle of the plot, then "Show all", then the keyboard's "Zoom in"
        scale = "(key) => { const s = ratingCharts.get(key).scales.x; return [s.min, s.max]; }"
        full = await page.evaluate(scale, "csr/classical")
        figure = page.locator("figure.chart").filter(has=page.locator("h3", has_text="CSR Classical"))
        await figure.scroll_into_view_if_needed()
        over = await figure.locator(".u-over").bounding_box()
        y = over["y"] + over["height"] / 2
        await page.mouse.move(over["x"] + over["width"] * 0.3, y)
        await page.mouse.down()
        await page.mouse.move(over["x"] + over["width"] * 0.6, y, steps=5)
        await page.mouse.up()
        zoomed = await page.evaluate(scale, "csr/classical")
        assert full[0] < zoomed[0] < zoomed[1] < full[1]
        assert (zoomed[1] - zoomed[0]) == pytest.approx((full[1] - full[0]) * 0.3, rel=0.1)
        await figure.get_by_role("button", name="Show all").click()
        assert await page.evaluate(scale, "csr/classical") == full
        await figure.get_by_role("button", name="Zoom in").focus()
        await page.keyboard.press("Enter")
        keyed = await page.evaluate(scale, "csr/classical")
        assert keyed[1] - keyed[0] == pytest.approx((full[1] - full[0]) / 2)


async def test_the_leaderboard_pages_follow_the_api_and_lead_to_a_player(site, browser):
    async with tab(browser) as page:
        await load(page, f"{site.url}/")
        links = await page.eval_on_selector_all("#board-list a", "as => as.map(a => a.getAttribute('href'))")
        assert links == [f"/leaderboards/{s}/{c}" for s, cs in RATINGS.items() for c in cs]
        await follow(page, page.get_by_role("listitem").filter(has_text="CSR").get_by_role("link", name="Blitz").click())
        assert await page.text_content("h1") == "CSR Blitz leaderboard"
        first = site.api("/v1/leaderboards/csr/blitz", limit=50)
        assert await cells(page, "#board") == board_rows(first)
        assert HOSTILE in [e["player_id"] for e in first["items"]]  # shown as text: the cells above equal it
        await follow(page, page.get_by_role("link", name="Next page").click())
        assert urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)["cursor"] == [first["next"]]
        assert await cells(page, "#board") == board_rows(site.api("/v1/leaderboards/csr/blitz", limit=50,
                                                                  cursor=first["next"]))
        await follow(page, page.get_by_role("link", name="First page").click())
        await follow(page, page.get_by_role("link", name=HOSTILE, exact=True).click())
        assert urllib.parse.unquote(urllib.parse.urlparse(page.url).path) == f"/players/{HOSTILE}"
        assert await page.text_content("h1") == HOSTILE
        assert await page.evaluate("window.__pwned") is None
    status, headers, body = get(f"{site.url}/leaderboards/csr/turbo")  # no such board: a page that says so
    assert status == 404 and headers["content-type"].startswith("text/html") and b"No such page" in body


def board_rows(board: dict) -> list[list[str]]:
    return [[str(e["rank"]), e["player_id"], whole(e["rating"]), "–" if e["rd"] is None else f"±{whole(e['rd'])}",
             str(e["games"]), minute(e["last_played_at"])] for e in board["items"]]


async def test_the_leaderboard_page_shows_new_ratings_without_reloading(site, browser):
    async with tab(browser) as page:
        await load(page, f"{site.url}/leaderboards/csr/blitz")
        await page.evaluate("window.__loaded = true")
        board = site.api("/v1/leaderboards/csr/blitz", limit=50)
        # two players of the page win and lose twice, at once (a later game would find their RD grown past
        # the established line, and them off the board)
        a, b = [e["player_id"] for e in board["items"] if e["games"] and e["player_id"] != HOSTILE][:2]
        await replay_into(site.database_url, [orjson.dumps(game_event(
            91000 + i, a, b, "0-1", PLAYED + timedelta(hours=2, minutes=i), TCS[2], "/pages")) for i in range(2)])
        now = site.api("/v1/leaderboards/csr/blitz", limit=50)
        moved = next(e for e in now["items"] if e["player_id"] == b)
        assert moved["rating"] != next(e for e in board["items"] if e["player_id"] == b)["rating"]
        await page.wait_for_function("([id, r]) => [...document.querySelectorAll('#board tbody tr')].some("
                                     "tr => tr.dataset.player === id && tr.querySelector('.rating').dataset.value == r)",
                                     arg=[b, moved["rating"]], timeout=20_000)
        assert await cells(page, "#board") == board_rows(now)
        assert await page.evaluate("window.__loaded") is True  # the same document: never reloaded
        assert "moved" in await page.get_attribute(f"#board tr[data-player='{b}']", "class")


async def test_a_message_page_from_a_player_with_the_support_token(site, browser):
    async with tab(browser, allowed=("status of 401",)) as page:
        await load(page, f"{site.url}/players/{q(HOSTILE)}")
        await follow(page, page.locator("#unrated").get_by_role("link").first.click())
        assert "support token" in await page.text_content("#status [role=alert]")
        assert await page.evaluate("document.activeElement.id") == "token"
        await page.fill("#token", TOKEN)
        await page.get_by_role("button", name="Look up").click()
        await page.wait_for_selector("#result:not([hidden])")
        message = site.api("/v1/messages", source="/pages", id=HOSTILE_MESSAGE)
        assert await page.text_content("#outcome") == f"Unrated: {message['explanation']} (casual)."
        facts = await page.eval_on_selector_all("#facts dd", "dds => dds.map(d => d.textContent)")
        assert facts[:3] == ["/pages", HOSTILE_MESSAGE, "game.finished"]
        assert await page.evaluate("window.__pwned") is None and await page.query_selector("main svg") is None
        assert TOKEN not in page.url and await page.evaluate("localStorage.length") == 0
        assert await page.evaluate("sessionStorage.getItem('rating-worker.support-token')") == TOKEN
        # a rated game, from the player's latest change: the token is kept for the tab
        await follow(page, page.go_back())
        change = page.locator("#changes").get_by_role("link").first
        ref = await change.text_content()
        await follow(page, change.click())
        await page.wait_for_selector("#result:not([hidden])")
        query = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)
        message = site.api("/v1/messages", source=query["source"][0], id=query["id"][0])
        assert message["ref"] == ref and message["status"] == "applied"
        assert await page.text_content("#outcome") == f"Applied: it changed {len(message['changes'])} ratings."
        assert await cells(page, "#changes") == [
            [c["player_id"], rating_name(c["system"], c["category"]), whole(c["before"]["rating"]),
             whole(c["after"]["rating"]), signed(c["delta"]), str(c["version"])] for c in message["changes"]]
        assert await cells(page, "#left-out") == [["Nobody."]]
        # pasted as a game id alone: the same message
        await page.fill("#source", "")
        await page.fill("#id", "")
        await page.fill("#ref", ref)
        await page.get_by_role("button", name="Look up").click()
        await page.wait_for_function("document.location.search.startsWith('?ref=')")
        await page.wait_for_selector("#result:not([hidden])")
        assert await page.text_content("#outcome") == f"Applied: it changed {len(message['changes'])} ratings."
        facts = await page.eval_on_selector_all("#facts dd", "dds => dds.map(d => d.textContent)")
        assert facts[:2] == [query["source"][0], query["id"][0]]


PAGES = {"index": "/", "leaderboard": "/leaderboards/csr/blitz", "player": "/players/p003",
         "hostile-player": f"/players/{q(HOSTILE)}", "message": f"/messages?source=%2Fpages&id={q(HOSTILE_MESSAGE)}"}


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
async def test_every_page_is_accessible_and_fits_a_phone(site, browser, artifacts, size):
    async with tab(browser, size, allowed=("status of 401",)) as page:
        for name, path in PAGES.items():
            await load(page, site.url + path)
            await page.screenshot(path=artifacts / f"{name}-{size[0]}x{size[1]}.png")
            await check_accessible(page)
            assert await page.evaluate("window.__pwned") is None
        # the header's form, by keyboard alone
        await page.focus("#find-player-id")
        await page.keyboard.type(HOSTILE)
        await follow(page, page.keyboard.press("Enter"))
        assert await page.text_content("h1") == HOSTILE
    if size == DESKTOP and os.environ.get("UPDATE_SCREENSHOTS"):
        await readme_screenshot(site, browser)


async def readme_screenshot(site: Site, browser) -> None:
    """docs/images/player.png, the README's: a player's page down to his first chart, in 128 colours (~60 kB)."""
    from PIL import Image

    async with tab(browser, (1100, 900)) as page:
        await load(page, f"{site.url}/players/p010")
        chart = await page.locator("figure.chart").first.bounding_box()
        png = await page.screenshot(full_page=True, clip={"x": 0, "y": 0, "width": 1100,
                                                          "height": chart["y"] + chart["height"] + 16})
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(128, method=Image.Quantize.FASTOCTREE)
    (ROOT / "docs" / "images").mkdir(exist_ok=True)
    image.save(ROOT / "docs" / "images" / "player.png", optimize=True)
