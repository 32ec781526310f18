"""Store adapters: SQLite in the home (the embedded default), or PostgreSQL when several
machines share one memory (``stores.postgres``, extra tether[postgres]).

``open_store`` and ``open_sweep_store`` are the one place that picks the backend from
``[store] url``: empty is ``<home>/tether.db``, ``sqlite:///PATH`` a SQLite file at PATH
(relative to the home), ``postgresql://...`` the owner's schema (``[store] owner``) in
that database.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from tether.config import Config
from tether.errors import BadInputError
from tether.ports import Store, SweepStore, VectorIndex
from tether.stores.sqlite import SqliteStore

if TYPE_CHECKING:  # the extra tether[postgres]: loaded on use
    from tether.stores.postgres import PostgresStore
    from tether.stores.postgres.conn import PgPool
    from tether.stores.postgres.sweep import PostgresSweepStore

#: The embedded store's file, inside the home.
DB_FILE = "tether.db"
POSTGRES_EXTRA = "PostgreSQL needs the extra tether[postgres]: pip install 'tether[postgres]'"


def sqlite_path(home: Path, config: Config) -> Path:
    """The SQLite file ``[store] url`` names (empty: ``<home>/tether.db``)."""
    url = config.store.url
    if not url:
        return home / DB_FILE
    return home / url.removeprefix("sqlite:///")


def _postgres() -> None:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise BadInputError(POSTGRES_EXTRA) from None


def open_store(home: Path, config: Config) -> Store:
    """Open (creating and migrating if needed) the store ``config`` names."""
    if config.store.postgres:
        _postgres()
        from tether.stores.postgres import PostgresStore

        return PostgresStore(config.store.url, config.store.owner)
    return SqliteStore(sqlite_path(home, config))


def open_sweep_store(home: Path, config: Config, *, migrate: bool = True) -> SweepStore:
    """The sweep's store, beside the main one. With ``migrate`` False (a reader: recall,
    the memory scan), a SQLite file the sweep never ran in is left without its tables
    (its facts stamp says so); a PostgreSQL schema's sweep tables are made (or migrated)
    on open, on the sweep's own track."""
    if config.store.postgres:
        _postgres()
        from tether.stores.postgres.sweep import PostgresSweepStore

        return PostgresSweepStore(config.store.url, config.store.owner)
    from tether.stores.sqlite.sweep import SqliteSweepStore  # on use: recall starts faster

    return SqliteSweepStore(sqlite_path(home, config), migrate=migrate)


class StoreInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What ``tether doctor`` and ``tether store migrate`` say of the store."""

    backend: str  # "sqlite" or "postgresql"
    where: str  # the file, or the URL without its password
    owner: str | None  # PostgreSQL: the owner whose schema this is
    server_version: str  # SQLite's library version, or the server's
    level: int  # the main store's migration level now
    known: int  # the level this tether knows
    sweep_level: int | None = None  # the sweep's own track, on both backends
    sweep_known: int | None = None


def store_info(home: Path, config: Config, main: Store, sweep: SweepStore) -> StoreInfo:
    """Where the store stands: ``main`` and ``sweep``, the stores ``config`` names, opened
    (so migrated to the schema this tether knows: idempotent, and safe beside another
    process doing the same: SQLite's write lock, PostgreSQL's advisory lock) by the
    caller (``App.store_info``)."""
    if config.store.postgres:
        from tether.stores.postgres import PostgresStore
        from tether.stores.postgres import schema as postgres_schema
        from tether.stores.postgres.sweep import PostgresSweepStore
        from tether.stores.postgres.sweep_schema import SWEEP

        assert isinstance(main, PostgresStore)
        assert isinstance(sweep, PostgresSweepStore)
        return StoreInfo(
            backend="postgresql",
            where=main.path,
            owner=config.store.owner,
            server_version=main.pg.server_version(),
            level=main.schema_version(),
            known=postgres_schema.KNOWN,
            sweep_level=sweep.schema_version(),
            sweep_known=SWEEP.known,
        )
    import sqlite3

    from tether.stores.sqlite.migrations import MIGRATIONS
    from tether.stores.sqlite.sweep import SqliteSweepStore
    from tether.stores.sqlite.sweep_schema import SWEEP_MIGRATIONS

    assert isinstance(main, SqliteStore)
    assert isinstance(sweep, SqliteSweepStore)
    return StoreInfo(
        backend="sqlite",
        where=str(sqlite_path(home, config)),
        owner=None,
        server_version=sqlite3.sqlite_version,
        level=main.schema_version(),
        known=len(MIGRATIONS),
        sweep_level=sweep.schema_version(),
        sweep_known=len(SWEEP_MIGRATIONS),
    )


def open_snapshot(home: Path, config: Config) -> Store:
    """The SQLite file ``config`` names, read as it stands (read-only, unmigrated): what
    recall answers from when a full disk keeps the store from opening."""
    return SqliteStore(sqlite_path(home, config), snapshot=True)


def open_pool(url: str, *, max_size: int, name: str) -> PgPool:
    """One pool of connections to the PostgreSQL database at ``url``, for the stores of
    many owners (a sweep worker's), its connections called ``name``."""
    _postgres()
    from tether.stores.postgres.conn import PgPool

    return PgPool(url, max_size=max_size, application_name=name)


def open_owner_sweep(pool: PgPool, owner: str) -> PostgresSweepStore:
    """``owner``'s sweep store, on ``pool`` (its tables made or migrated)."""
    from tether.stores.postgres.sweep import PostgresSweepStore

    return PostgresSweepStore(pool.url, owner, pool=pool)


def open_owner_store(pool: PgPool, owner: str) -> PostgresStore:
    """``owner``'s main store, on ``pool``, as it stands (never migrated here)."""
    from tether.stores.postgres import PostgresStore

    return PostgresStore(pool.url, owner, migrate=False, pool=pool)


def open_vector_index(home: Path, config: Config) -> VectorIndex | None:
    """Where recall's vectors live: beside the index, in the SQLite file or the owner's
    PostgreSQL schema (migrated by ``open_store`` first). Needs the extra tether[vectors]
    (numpy). The return type keeps None for a backend without a vector table."""
    if config.store.postgres:
        _postgres()
        from tether.stores.postgres.vectors import PostgresVectors

        return PostgresVectors(config.store.url, config.store.owner)
    from tether.stores.sqlite.vectors import SqliteVectors  # numpy: only with the extra

    return SqliteVectors(sqlite_path(home, config))


__all__ = [
    "DB_FILE",
    "SqliteStore",
    "StoreInfo",
    "open_owner_store",
    "open_owner_sweep",
    "open_pool",
    "open_snapshot",
    "open_store",
    "open_sweep_store",
    "open_vector_index",
    "sqlite_path",
    "store_info",
]
