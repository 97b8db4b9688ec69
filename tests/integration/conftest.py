"""Fixtures for the integration tests; the helpers live in harness.py."""

from tests.integration.harness import broker, database_url, postgres, template_db, topics  # noqa: F401
