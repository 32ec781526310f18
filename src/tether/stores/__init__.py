"""Store adapters: SQLite in the home (the embedded default); PostgreSQL later.

``open_store`` and ``open_sweep_store`` are the one place that picks the backend from
``[store] url``.
"""

from __future__ import annotations

from pathlib import Path

from tether.config import Config
from tether.errors import BadInputError, StoreError
from tether.ports import Store, SweepStore, VectorIndex
from tether.stores.sqlite import SqliteStore

#: The embedded store's file, inside the home.
DB_FILE = "tether.db"


def open_store(home: Path, config: Config) -> Store:
    """Open (creating and migrating if needed) the store ``config`` names.

    An empty ``[store] url`` is SQLite at ``<home>/tether.db``. A PostgreSQL URL is refused
    for now, without echoing it (it may hold a password).
    """
    if config.store.url:
        raise BadInputError(
            "PostgreSQL is not supported yet: [store] url names a PostgreSQL database; "
            "leave it empty to use SQLite in the home"
        )
    return SqliteStore(home / DB_FILE)


def open_sweep_store(home: Path, config: Config, *, migrate: bool = True) -> SweepStore:
    """The sweep's store, in the same SQLite file as the main one. With ``migrate``
    False (a reader: recall, the memory scan), a file the sweep never ran in is left
    without its tables (its facts stamp says so)."""
    if config.store.url:
        raise StoreError(home, "the sweep runs on the SQLite store only until PostgreSQL lands")
    from tether.stores.sqlite_sweep import SqliteSweepStore  # on use: recall starts faster

    return SqliteSweepStore(home / DB_FILE, migrate=migrate)


def open_vector_index(home: Path, config: Config) -> VectorIndex | None:
    """Where recall's vectors live: beside the index in the SQLite file (migrated by
    ``open_store`` first); None on a backend that has no vector table yet. Needs the extra
    tether[vectors] (numpy)."""
    if config.store.url:
        return None
    from tether.stores.sqlite_vectors import SqliteVectors  # numpy: only with the extra

    return SqliteVectors(home / DB_FILE)


__all__ = ["DB_FILE", "SqliteStore", "open_store", "open_sweep_store", "open_vector_index"]
