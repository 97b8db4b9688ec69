"""Fixtures shared by every test directory: one embedded PostgreSQL and one broker per session (the
helpers live in tests/integration/harness.py). Declared here, once, so that the integration and deploy
tests share the same pair instead of each starting its own."""

from tests.integration.harness import broker, database_url, postgres, template_db, topics  # noqa: F401
