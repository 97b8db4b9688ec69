"""The pages a person looks at, served by `rating-worker serve` beside the read API: a player
(`/players/{player_id}`), a leaderboard (`/leaderboards/{system}/{category}`), what became of a message
(`/messages?source=&id=`), and `/` leading to the leaderboards.

They are built on the read API's own routes, so that the two cannot disagree: each page is static HTML
(static/layout.html around static/NAME.html) and one small JavaScript module (static/NAME.js) that reads the
/v1 routes from the browser and draws what they answer. The modules build the page with createElement and
textContent only, never HTML made from a value, so escaping is structural: a player id such as `<script>`
shows as text. The Content-Security-Policy allows this origin's scripts only, should anything ever slip.

The charts are drawn by uPlot (static/vendor/: its built file as published on npm, MIT, with its licence;
vendor-uplot.sh fetches it again): ~50 kB, zoom by drag, drawn on a canvas that fits a 360 px screen. Nothing
is built at install time; the server adds only the list of leaderboards (worker.ratings.registry) to the page.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from worker.api import paths  # noqa: F401  (registers the routes' convertors)
from worker.ratings.registry import RATINGS

STATIC = Path(__file__).resolve().parent / "static"
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # a message page's address (source and id) stays on this site
    "Cache-Control": "no-cache",  # revalidated by ETag (files) each time: an upgrade is seen at once
}
CHART_HEAD = ('<link rel="stylesheet" href="/static/vendor/uPlot.min.css">\n'
              '<script src="/static/vendor/uPlot.iife.min.js" defer></script>\n')


@dataclass(frozen=True, slots=True)
class Page:
    name: str  # static/{name}.html is its main, static/{name}.js its module
    title: str  # until its module names what it shows
    chart: bool = False


PAGES = {page.name: page for page in (
    Page("index", "Leaderboards"), Page("player", "Player", chart=True), Page("leaderboard", "Leaderboard"),
    Page("message", "What became of a message"), Page("notfound", "No such page"))}


@functools.cache
def html(name: str) -> bytes:
    """The page as served: the layout around its main, with its scripts and the leaderboards there are."""
    page = PAGES[name]
    module = f'<script type="module" src="/static/{name}.js"></script>\n' if (STATIC / f"{name}.js").exists() else ""
    # JSON inside <script>: "<" escaped, so that no value could close the element
    boards = json.dumps({system: list(categories) for system, categories in RATINGS.items()}).replace("<", "\\u003c")
    text = (STATIC / "layout.html").read_text(encoding="utf-8")
    for marker, value in (("{{title}}", page.title), ("{{head}}", (CHART_HEAD if page.chart else "") + module),
                          ("{{boards}}", boards), ("{{main}}", (STATIC / f"{name}.html").read_text(encoding="utf-8"))):
        text = text.replace(marker, value)
    return text.encode()


def _answer(name: str, status: int = 200) -> Response:
    return Response(html(name), status, headers=HEADERS, media_type="text/html; charset=utf-8")


async def index(request: Request) -> Response:
    return _answer("index")


async def player(request: Request) -> Response:
    return _answer("player")  # a player never seen: the page says what the API answered (404)


async def leaderboard(request: Request) -> Response:
    system, category = request.path_params["system"], request.path_params["category"]
    return _answer("leaderboard") if category in RATINGS.get(system, ()) else _answer("notfound", 404)


async def message(request: Request) -> Response:
    return _answer("message")


class Static(StaticFiles):
    """The pages' files (CSS, JavaScript, the vendored chart library), with the pages' headers."""

    def file_response(self, *args, **kwargs) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(HEADERS)
        return response


ROUTES = [
    Route("/", index),
    Route("/players/{player_id:rest}", player),  # an id may hold a "/", escaped or not (worker.api.paths)
    Route("/leaderboards/{system:segment}/{category:segment}", leaderboard),
    Route("/messages", message),
    Mount("/static", Static(directory=STATIC), name="static"),
]
