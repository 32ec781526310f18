"""PostgreSQL for the tests: ``TETHER_TEST_POSTGRES`` names a server (``scripts/check``
sets it when one answers at 127.0.0.1:5432); each test run makes its own database
(``tether_test_<pid>_<random>``) and drops it at the end, and each test gets its own
owner schema in it, so no two tests and no two runs see each other's rows."""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import pytest

ENV = "TETHER_TEST_POSTGRES"
_owners = itertools.count(1)


def server() -> str | None:
    return os.environ.get(ENV) or None


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new, empty database on the test server, dropped when the block ends."""
    import psycopg

    base = server()
    assert base is not None
    name = f"tether_test_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(base, name)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def new_owner(prefix: str = "t") -> str:
    """An owner id no other test of this run has used (so a fresh schema)."""
    return f"{prefix}{os.getpid()}-{next(_owners)}"


#: The backends a contract suite runs over: SQLite always, PostgreSQL when a server is set.
BACKENDS = [
    "sqlite",
    pytest.param(
        "postgres",
        marks=[
            pytest.mark.postgres,
            pytest.mark.skipif(server() is None, reason=f"{ENV} is not set (no PostgreSQL)"),
        ],
    ),
]
