"""Fixtures for the deploy tests: the integration tests' PostgreSQL and broker (for the real-Prometheus test)."""

from tests.integration.harness import broker, database_url, postgres, template_db, topics  # noqa: F401
