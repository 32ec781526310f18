"""The sweep's SweepStore over SQLite: its own tables in ``<home>/tether.db``.

The sweep keeps its own numbered migration track in ``sweep_schema_version`` (one row),
separate from the main store's ``PRAGMA user_version``, so the two schemas evolve
independently in the same file. ``SWEEP_MIGRATIONS[n]`` takes the sweep tables from
version n to n + 1 in one transaction; append, never edit a shipped script; a newer
version is refused unchanged.

Canonical sweep writes are journalled in ``sweep_journal``, in the same transaction as
the fact or trigger they record, with ``receipt_id UNIQUE``: a retried apply can never add
a second journal entry. (The main store's ``journal_append`` commits on its own
connection, so it cannot share that transaction, and it has no owner column to wipe by.)

Every write transaction is ``BEGIN IMMEDIATE`` with ``synchronous = FULL``: a claim,
apply, completion or cursor advance that returned is on disk.

The transaction's reads and writes are ``sweep.SweepTx``, written once for both stores;
what is here is the file: its connection, pragmas, migrations and WAL. What the main
store's fact mirror and the memory scan need of the sweep is the sweep store's too
(``facts_stamp``, ``active_facts``, ``read_cells``, ``rewrite_cells``; the SQL in
``sweep_cells``), so no other module names a sweep table. Opened with
``migrate=False`` (a reader), a file the sweep never ran in is left without its tables.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from tether.core.sweep.state import NO_SWEEP, JournalRow
from tether.records import TextCell
from tether.stores import sweep_cells as cells
from tether.stores.dialect import SQLITE, Sql
from tether.stores.sqlite.file import SqliteFile, begun, tables
from tether.stores.sqlite.migrations import migrate
from tether.stores.sqlite.sweep_schema import SWEEP_MIGRATIONS
from tether.stores.sweep import SweepTx

BUSY_TIMEOUT_MS = 15_000


def _sweep_version(conn: sqlite3.Connection) -> int:
    conn.execute("CREATE TABLE IF NOT EXISTS sweep_schema_version (version INTEGER)")
    row = conn.execute("SELECT version FROM sweep_schema_version").fetchone()
    return 0 if row is None else int(row[0])


def _set_sweep_version(conn: sqlite3.Connection, version: int) -> None:
    conn.execute("DELETE FROM sweep_schema_version")
    conn.execute("INSERT INTO sweep_schema_version VALUES (?)", (version,))


class SqliteSweepTx(SweepTx):
    """``sweep.SweepTx`` on the file's connection, where a reader (``migrate=False``) may
    find no sweep tables at all: its stamp then says there is no sweep."""

    def facts_stamp(self) -> str:
        if "sweep_fact_change" not in tables(self.db.c):
            return NO_SWEEP
        return super().facts_stamp()


class SqliteSweepStore(SqliteFile):
    """``tether.ports.SweepStore`` over ``<home>/tether.db`` (or any path). One connection
    guarded by a lock; other processes may use the same file at the same time."""

    busy_timeout_ms = BUSY_TIMEOUT_MS

    def __init__(self, path: Path | str, *, migrate: bool = True) -> None:
        self._migrates = migrate
        super().__init__(path)

    def _setup(self) -> None:
        with self._errors("cannot open the sweep store"):
            c = self._c()
            self._busy_timeout_and_wal(c)
            c.execute("PRAGMA synchronous = FULL")
        if not self._migrates:
            return  # a reader (recall, memory scan): a file the sweep never ran in stays so
        migrate(
            self.path,
            self._migrating,
            SWEEP_MIGRATIONS,
            version=_sweep_version,
            set_version=_set_sweep_version,
        )

    @contextlib.contextmanager
    def _migrating(self) -> Iterator[sqlite3.Connection]:
        with self._errors("migrating the sweep schema"), self._lock:
            c = self._c()
            with begun(c):
                yield c

    def schema_version(self) -> int:
        with self.transaction(write=False) as tx:
            row = tx.db.one("SELECT version FROM sweep_schema_version")
        return int(row[0])

    def journal_rows(self, limit: int | None = None) -> list[JournalRow]:
        with self.transaction(write=False) as tx:
            if "sweep_journal" not in tables(tx.db.c):
                return []  # a reader on a file the sweep never ran in
            return tx.journal_rows(limit)

    def read_cells(self, visit: Callable[[TextCell], None]) -> None:
        with self._lock, self._errors("reading the sweep's text"):
            c = self._c()
            cells.read_cells(Sql(c, SQLITE), visit, present=tables(c))

    def rewrite_cells(self, edits: Sequence[tuple[TextCell, str]]) -> tuple[list[bool], bool]:
        self._secure_delete(True)  # the old text is zeroed, not just freed
        try:
            with self.transaction() as tx:
                made = cells.rewrite_cells(tx.db, edits)
        finally:
            self._secure_delete(False)
        return made, self._truncate_wal()

    @contextlib.contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[SqliteSweepTx]:
        """``BEGIN IMMEDIATE`` (or a deferred read snapshot), committed at the end of the
        block, rolled back on any exception (which propagates)."""
        with self._lock, self._errors("sweep transaction"):
            c = self._c()
            with begun(c, "BEGIN IMMEDIATE" if write else "BEGIN"):
                yield SqliteSweepTx(Sql(c, SQLITE), write=write)
