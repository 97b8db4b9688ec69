"""The read API (`rating-worker serve`): ratings, histories, leaderboards, what became of a message, the
points at stake and FIDE's lists, over HTTP, computed by the same engine and rules as `rating.changed`.

- app: the Starlette application (routes, errors, health, metrics)
- players, boards, messages, fide_lists: the routes
- problems: the parameters read and checked, bad requests as RFC 9457 problems
- responses: JSON with ETag, 304 and Cache-Control
- openapi: the OpenAPI 3.1 document (schemas/openapi.json)
"""
