"""bench/cpu.py: which PostgreSQL processes count as the statements' (client backends)."""

import pytest

from bench.cpu import is_client_backend_title


@pytest.mark.parametrize("title", [
    b"postgres: postgres lifecycle_grown 127.0.0.1(53590) idle" + b" " * 40,
    b"postgres: rw ratings [local] INSERT",
    b"postgres: rw ratings ::1(40112) idle in transaction",
    b"postgres: rw ratings db.internal(5432) SELECT",
])
def test_a_client_connection_is_a_backend(title):
    assert is_client_backend_title(title)


@pytest.mark.parametrize("title", [
    b"postgres: checkpointer" + b" " * 60,
    b"postgres: background writer",
    b"postgres: walwriter",
    b"postgres: io worker 0",
    b"postgres: autovacuum launcher",
    b"postgres: autovacuum worker lifecycle_grown",
    b"postgres: logical replication launcher",
    b"/usr/lib/postgresql/18/bin/postgres\x00-D\x00/var/lib/postgresql/data\x00",
])
def test_the_servers_own_processes_are_not(title):
    assert not is_client_backend_title(title)
