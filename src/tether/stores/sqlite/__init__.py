"""The embedded backend: one SQLite file in the home (WAL, FTS5). What is here is what
SQLite alone does: the file and its connection (``file``), the schemas and their
migrations (``migrations``, ``sweep_schema``), the FTS5 index and its search (``fts``,
``search``), the stores over them (``store``, ``sweep``), vectors (``vectors``) and what
``tether doctor`` checks (``health``). The repositories are written once, in ``stores``."""

from tether.stores.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
