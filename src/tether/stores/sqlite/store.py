"""The embedded Store: one SQLite file (WAL, FTS5), no server.

Layout (migrations 1 to 6):

- ``doc`` holds every searchable row: session-log rows (kind ``turn`` or ``summary``),
  one row per note and page, and rows mirrored from memory.md (``identity``) and the
  sweep's active facts (``fact``), kept in step by ``memory`` (the repositories written
  once for both stores; this store keeps its text index, FTS5). ``doc_fts`` is an
  external-content FTS5 index (porter-stemmed unicode61) over two columns computed from
  ``doc.text``: ``body`` (user text, notes, pages, identity, facts) and ``aside``
  (assistant replies, tool calls, tool summaries), so a search can weigh them apart.
  The text is stored once, the index holds only postings, and ``reset_index`` can
  rebuild it from what remains.
- ``index_cursor``: per log file, the byte offset indexed so far and the session's turn
  number and taint there, so an incremental pass resumes exactly; and the file's state
  at that pass (size, mtime, inode, a checksum of the bytes before the offset), so a
  pass with nothing new stats each log instead of opening it.
- ``note``, ``page``, ``journal``, ``recall_log``: the memory itself; never touched by
  ``reset_index``.
- ``budget_spend``, ``budget_total``: the budget gate's spend ledger (``budget``),
  committed with ``synchronous=NORMAL``: a restart keeps it, a power cut may lose the
  last calls' rows.
- ``session_meta``, ``epoch_summary``, ``session_digest``: what the sweep reads of a day
  besides the log rows (``days``, written once for both stores).

Concurrency: one connection per store object, guarded by a lock, so a store may be
handed between threads but runs one operation at a time. Other processes may use the same
file: WAL lets readers run beside the one writer, writes take ``BEGIN IMMEDIATE`` and wait
up to ``busy_timeout``. Index and recall-log writes commit with ``synchronous=NORMAL``
(a power cut may lose the last few: the index is rebuilt from the logs, a lost recall only
undercounts), which keeps an fsync out of every recall; notes, pages and the journal
commit with ``FULL``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from tether.core.recall import symbols
from tether.errors import StoreVersionError
from tether.records import (
    TextCell,
)
from tether.stores import cells
from tether.stores.budget import BudgetLedger
from tether.stores.days import Days
from tether.stores.dialect import SQLITE, Sql, T
from tether.stores.memory import Doc, MemoryRepo
from tether.stores.search import Searches
from tether.stores.sqlite import search as fts
from tether.stores.sqlite.file import SqliteFile, begun, tables
from tether.stores.sqlite.migrations import AFTER, FTS_TABLE, MIGRATIONS, migrate

BUSY_TIMEOUT_MS = 10_000

_LOG_KINDS = "('turn', 'summary')"


class SqliteStore(MemoryRepo, Searches, BudgetLedger, Days, SqliteFile):
    """``tether.ports.Store`` over one SQLite file. Use from one thread at a time (a lock
    enforces it); close it when done (or use it as a context manager)."""

    busy_timeout_ms = BUSY_TIMEOUT_MS
    #: The searches' SQL (``sqlite.search``, the FTS5 syntax in ``sqlite.fts``).
    text_search = fts.FTS

    def __init__(self, path: Path | str, *, snapshot: bool = False) -> None:
        self._sync: str | None = None
        super().__init__(path, snapshot=snapshot)

    # -- plumbing ----------------------------------------------------------------------

    def _setup(self) -> None:
        with self._errors("cannot open the store"):
            c = self._c()
            version = self._user_version()
            if version > len(MIGRATIONS):
                raise StoreVersionError(self.path, version, len(MIGRATIONS))
            if self.snapshot:
                return  # read as it stands: no WAL, no migration
            self._busy_timeout_and_wal(c)
            c.execute("PRAGMA cache_size = -32000")  # 32 MB: the FTS index's hot pages
            self._migrate()

    def _user_version(self) -> int:
        return int(self._c().execute("PRAGMA user_version").fetchone()[0])

    @contextlib.contextmanager
    def _write(self, doing: str, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction under the lock; rolled back on any error."""
        with self._lock, self._errors(doing):
            c = self._c()
            sync = "FULL" if durable else "NORMAL"
            if sync != self._sync:
                c.execute(f"PRAGMA synchronous = {sync}")
                self._sync = sync
            with begun(c):
                yield c

    @contextlib.contextmanager
    def _read(self, doing: str) -> Iterator[sqlite3.Connection]:
        with self._lock, self._errors(doing):
            yield self._c()

    def _in_write(
        self,
        doing: str,
        work: Callable[[Sql], T],
        *,
        guard: str | None = None,  # noqa: ARG002 - BEGIN IMMEDIATE holds the whole file
        durable: bool = True,
    ) -> T:
        with self._write(doing, durable=durable) as c:
            return work(Sql(c, SQLITE))

    def _in_read(self, doing: str, work: Callable[[Sql], T]) -> T:
        with self._read(doing) as c:
            return work(Sql(c, SQLITE))

    def _migrate(self) -> None:
        migrate(
            self.path,
            lambda: self._write("migrating the schema"),
            MIGRATIONS,
            version=lambda conn: int(conn.execute("PRAGMA user_version").fetchone()[0]),
            set_version=lambda conn, version: conn.execute(f"PRAGMA user_version = {version}"),
            after=AFTER,
        )

    def schema_version(self) -> int:
        with self._read("reading the schema version"):
            return self._user_version()

    # -- the index over session logs ---------------------------------------------------

    def reset_index(self) -> None:
        with self._write("resetting the index", durable=False) as c:
            if "doc_fts" not in tables(c):
                c.execute(FTS_TABLE)  # dropped: made again, then rebuilt below
            c.execute(f"DELETE FROM doc WHERE kind IN {_LOG_KINDS}")
            c.execute(
                "UPDATE stat SET value = (SELECT count(*) FROM doc WHERE ref IS NOT NULL)"
                " WHERE name = 'doc_rows'"
            )
            # Rebuild from what is left (notes, pages): far cheaper than a 'delete' per row.
            c.execute("INSERT INTO doc_fts (doc_fts) VALUES ('rebuild')")
            c.execute("DELETE FROM index_cursor")

    def optimize_index(self) -> None:
        """Merge the FTS index into one segment (after a large re-index: faster queries)."""
        with self._write("optimizing the index", durable=False) as c:
            c.execute("INSERT INTO doc_fts (doc_fts) VALUES ('optimize')")

    def _add_docs(self, db: Sql, rows: Sequence[Doc]) -> None:
        """Insert index rows, their postings (FTS5 reads ``body`` and ``aside``, computed
        from ``text``) and count them."""
        if not rows:
            return
        c = db.c
        first = int(c.execute("SELECT coalesce(max(id), 0) + 1 FROM doc").fetchone()[0])
        c.executemany(
            "INSERT INTO doc (kind, session, epoch, turn, field, tainted, ref, time, text,"
            " seg) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ((*r, symbols.seg(r[8])) for r in rows),
        )
        c.execute(
            "INSERT INTO doc_fts (rowid, body, aside)"
            " SELECT id, body, aside FROM doc WHERE id >= ?",
            (first,),
        )
        _count_docs(c, len(rows))

    def _drop_docs(self, db: Sql, where: str, params: Sequence[object]) -> int:
        n = fts.unindex(db.c, where, params)
        _count_docs(db.c, -n)
        return n

    # -- the stored text of memory ----------------------------------------------------

    def read_cells(self, visit: Callable[[TextCell], None]) -> None:
        with self._read("reading the memory's text") as c:
            cells.read_cells(Sql(c, SQLITE), visit, present=tables(c))

    def rewrite_cells(self, edits: Sequence[tuple[TextCell, str]]) -> tuple[list[bool], bool]:
        """With ``secure_delete`` on, so the old text is zeroed in the file, not just
        freed; then the WAL is truncated so no frame keeps it."""
        self._secure_delete(True)
        try:
            made = self._in_write(
                "rewriting the memory's text", lambda db: cells.rewrite_cells(db, edits, _reindex)
            )
        finally:
            self._secure_delete(False)
        return made, self._truncate_wal()


def _count_docs(conn: sqlite3.Connection, delta: int) -> None:
    if delta:
        conn.execute("UPDATE stat SET value = value + ? WHERE name = 'doc_rows'", (delta,))


def _reindex(db: Sql, cell: TextCell, text: str) -> bool:
    """Rewrite one index row: its postings out with the old text, in with the new."""
    (doc_id,) = cell.key
    c = db.c
    if (
        c.execute("SELECT 1 FROM doc WHERE id = ? AND text = ?", (doc_id, cell.text)).fetchone()
        is None
    ):
        return False
    c.execute(
        "INSERT INTO doc_fts (doc_fts, rowid, body, aside) "
        "SELECT 'delete', id, body, aside FROM doc WHERE id = ?",
        (doc_id,),
    )
    c.execute("UPDATE doc SET text = ?, seg = ? WHERE id = ?", (text, symbols.seg(text), doc_id))
    c.execute(
        "INSERT INTO doc_fts (rowid, body, aside) SELECT id, body, aside FROM doc WHERE id = ?",
        (doc_id,),
    )
    return True
