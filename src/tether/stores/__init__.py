"""Store adapters: SQLite in the home (the embedded default); PostgreSQL later.

``open_store`` is the one place that picks the backend from ``[store] url``.
"""

from __future__ import annotations

from pathlib import Path

from tether.config import Config
from tether.errors import BadInputError
from tether.ports import Store
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


__all__ = ["DB_FILE", "SqliteStore", "open_store"]
