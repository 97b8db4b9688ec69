"""Routing by the path as sent, one segment at a time: a player id may hold a "/" (the contract allows it).

A client sends such an id as %2F in its segment (`/v1/players/club%2Fanna`). The server decodes the path
before routing, so `club%2Funrated` and `club/unrated` would both arrive as `/v1/players/club/unrated`: a
player whose id ends in "/unrated" (or "/history/<system>/<category>") would be answered for another one,
whatever route was tried first. So `SegmentPaths` routes on the raw path instead: each segment decoded, and
a "/" or "%" inside a segment kept escaped, so that a route's `{name:segment}` matches exactly one segment,
which the `segment` convertor decodes. A path with no "%" is routed as the server decoded it (nothing to
tell apart), at no cost. Routes of `{name:rest}` after those keep an id sent with a bare "/" working.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from starlette.convertors import Convertor, register_url_convertor

__all__ = ["SegmentPaths", "routed_path"]


class Segment(Convertor):
    """One path segment as `routed_path` leaves it: decoded here, "/" and "%" included."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return unquote(value)

    def to_string(self, value: str) -> str:
        return quote(value, safe="")


class Rest(Segment):
    """The rest of the path, decoded: an id sent with a bare "/" (not escaped), found where that is not
    ambiguous, as it was before ids were routed by segments."""

    regex = ".+"


register_url_convertor("segment", Segment())
register_url_convertor("rest", Rest())


def routed_path(raw_path: bytes) -> str:
    """The path to route on: each segment of the raw path decoded (bytes that are not UTF-8 as U+FFFD, as the
    server does), with the "%" and "/" it holds escaped again."""
    segments = raw_path.partition(b"?")[0].decode("utf-8", "replace").split("/")
    return "/".join(unquote(s).replace("%", "%25").replace("/", "%2F") for s in segments)


class SegmentPaths:
    """ASGI middleware: the path routed segment by segment (`routed_path`) when the request was sent with an
    escape in it and the server gave its raw path (uvicorn does)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        raw = scope.get("raw_path")
        if scope["type"] == "http" and raw and b"%" in raw:
            # uvicorn's path is root_path + the decoded raw path: the same, routed by segments
            scope = {**scope, "path": scope.get("root_path", "") + routed_path(raw)}
        await self.app(scope, receive, send)
