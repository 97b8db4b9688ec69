"""The `rating-worker` commands, one module each, each with its own `add_parser(sub)`.

- run: the worker (the store, the pipeline, the health server, the signals, the watchdog)
- serve: the read API (worker.api) under uvicorn
- migrate, replay, backfill (a history into PostgreSQL in bulk), evaluate (how well the ratings predicted a
  history), docs, demo
- importer: `rating-worker import FILE` (a package: reading, checking, sending, the command)
- fide: `rating-worker fide close-period YYYY-MM` (FIDE's monthly list, as the platform's scheduler sends it)
- player, message, leaderboard, outbox, dlq: the operator's commands (operator: what they share)
- history: the history's months (list, detach, archive, drop)
- beside them: ratings_page and settings_page (the pages `docs` writes: docs/ratings.md,
  docs/configuration.md). What the commands show people (progress, tables, charts, plots, the demo's
  screen) is worker.terminal's; a history read and rated (replay, backfill, evaluate) is worker.offline's

worker/cli.py builds the parser from COMMANDS, in this order (the order of `rating-worker --help`), importing
only the module of the command asked for: `rating-worker replay` need not load Kafka's, PostgreSQL's and the
demo's libraries (0.1 to 0.15 s of every start, 3% of a 100,000-game replay).
"""

#: command name -> its module (worker.commands.<module>), in the order of `rating-worker --help`
COMMANDS = {
    "run": "run",
    "serve": "serve",
    "migrate": "migrate",
    "replay": "replay",
    "backfill": "backfill",
    "evaluate": "evaluate",
    "docs": "docs",
    "demo": "demo",
    "import": "importer",
    "fide": "fide",
    "player": "player",
    "message": "message",
    "leaderboard": "leaderboard",
    "outbox": "outbox",
    "dlq": "dlq",
    "history": "history",
}
