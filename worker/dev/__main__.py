"""`python -m worker.dev`: an embedded PostgreSQL and broker until Ctrl-C, their addresses printed as the
DATABASE_URL and KAFKA_BOOTSTRAP_SERVERS lines the commands read (worker.dev.services)."""

from worker.dev.services import _main

if __name__ == "__main__":
    raise SystemExit(_main())
