"""The embedded Store: one SQLite file (WAL, FTS5), no server.

Layout (migrations 1 to 6):

- ``doc`` holds every searchable row: session-log rows (kind ``turn`` or ``summary``),
  one row per note and page, and rows mirrored from memory.md (``identity``) and the
  sweep's active facts (``fact``), kept in step by ``sqlite_mirror``. ``doc_fts`` is an
  external-content FTS5 index (porter-stemmed unicode61) over two columns computed from
  ``doc.text``: ``body`` (user text, notes, pages, identity, facts) and ``aside``
  (assistant replies, tool calls, tool summaries), so a search can weigh them apart.
  The text is stored once, the index holds only postings, and ``reset_index`` can
  rebuild it from what remains.
- ``index_cursor``: per log file, the byte offset indexed so far and the session's turn
  number and taint there, so an incremental pass resumes exactly.
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
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, cast

import msgspec

from tether.core import symbols
from tether.core.memory_block import Entry
from tether.core.sweep.state import Fact
from tether.errors import StoreVersionError
from tether.records import (
    Found,
    Hit,
    HitKind,
    IndexCursor,
    JournalEntry,
    LogRow,
    Note,
    Page,
    RecallStat,
    SearchQuery,
    TextCell,
)
from tether.stores import sqlite_cells as cells
from tether.stores import sqlite_mirror as mirror
from tether.stores import sqlite_search as fts
from tether.stores.budget import BudgetLedger
from tether.stores.days import Days
from tether.stores.dialect import SQLITE, Sql, T, micros
from tether.stores.migrations import AFTER, FTS_TABLE, MIGRATIONS, migrate
from tether.stores.sqlite_file import SqliteFile, begun, from_iso, iso, tables, utc

BUSY_TIMEOUT_MS = 10_000

_LOG_KINDS = "('turn', 'summary')"
_tags = msgspec.json.Decoder(tuple[str, ...])


def _micros(time: datetime) -> int:
    return micros(utc(time))


def _page_text(page: Page) -> str:
    text = f"{page.title}\n{page.body}"
    return f"{text}\ntags: {', '.join(page.tags)}" if page.tags else text


class SqliteStore(BudgetLedger, Days, SqliteFile):
    """``tether.ports.Store`` over one SQLite file. Use from one thread at a time (a lock
    enforces it); close it when done (or use it as a context manager)."""

    busy_timeout_ms = BUSY_TIMEOUT_MS

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
            version=lambda c: int(c.execute("PRAGMA user_version").fetchone()[0]),
            set_version=lambda c, n: c.execute(f"PRAGMA user_version = {n}"),
            after=AFTER,
        )

    def schema_version(self) -> int:
        with self._read("reading the schema version"):
            return self._user_version()

    # -- the index over session logs ---------------------------------------------------

    def index_cursor(self, path: str) -> IndexCursor | None:
        with self._read("reading an index cursor") as c:
            row = c.execute(
                "SELECT path, offset, turn, tainted, lines FROM index_cursor WHERE path = ?",
                (path,),
            ).fetchone()
        return None if row is None else _cursor(row)

    def index_cursors(self) -> dict[str, IndexCursor]:
        with self._read("reading index cursors") as c:
            rows = c.execute("SELECT path, offset, turn, tainted, lines FROM index_cursor")
            return {r[0]: _cursor(r) for r in rows}

    def index_log_rows(self, rows: Sequence[LogRow], cursor: IndexCursor) -> None:
        self.index_logs([(rows, cursor)])

    def index_logs(self, batch: Sequence[tuple[Sequence[LogRow], IndexCursor]]) -> None:
        if not batch:
            return
        with self._write("indexing session logs", durable=False) as c:
            first = int(c.execute("SELECT coalesce(max(id), 0) + 1 FROM doc").fetchone()[0])
            c.executemany(
                "INSERT INTO doc (kind, session, epoch, turn, field, tainted, ref, time, text,"
                " seg) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)",
                (
                    (
                        "summary" if r.field == "summary" else "turn",
                        r.session,
                        r.epoch,
                        r.turn,
                        r.field,
                        int(r.tainted),
                        _micros(r.time),
                        r.text,
                        symbols.seg(r.text),
                    )
                    for rows, _ in batch
                    for r in rows
                ),
            )
            c.execute(
                "INSERT INTO doc_fts (rowid, body, aside)"
                " SELECT id, body, aside FROM doc WHERE id >= ?",
                (first,),
            )
            _count_docs(c, sum(len(rows) for rows, _ in batch))
            c.executemany(
                "INSERT INTO index_cursor (path, offset, lines, turn, tainted)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (path) DO UPDATE SET"
                " offset = excluded.offset, lines = excluded.lines, turn = excluded.turn,"
                " tainted = excluded.tainted",
                ((cur.path, cur.offset, cur.lines, cur.turn, int(cur.tainted)) for _, cur in batch),
            )

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

    # -- notes and pages ---------------------------------------------------------------

    def _index_memory(
        self,
        c: sqlite3.Connection,
        *,
        kind: HitKind,
        ref: str,
        text: str,
        tainted: bool,
        session: str | None,
        time: datetime,
    ) -> None:
        """(Re)index one note or page: drop its old row from the index, add the new one."""
        _count_docs(c, 1 - fts.unindex(c, "ref = ?", (ref,)))
        cur = c.execute(
            "INSERT INTO doc (kind, session, tainted, ref, time, text, seg)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (kind, session, int(tainted), ref, _micros(time), text, symbols.seg(text)),
        )
        c.execute(
            "INSERT INTO doc_fts (rowid, body, aside) SELECT id, body, aside FROM doc WHERE id = ?",
            (cur.lastrowid,),
        )

    def add_note(self, text: str, *, untrusted: bool, session: str | None, time: datetime) -> Note:
        with self._write("writing a note") as c:
            cur = c.execute(
                "INSERT INTO note (text, untrusted, session, time) VALUES (?, ?, ?, ?)",
                (text, int(untrusted), session, iso(time)),
            )
            note_id = cast(int, cur.lastrowid)
            self._index_memory(
                c,
                kind="note",
                ref=f"note:{note_id}",
                text=text,
                tainted=untrusted,
                session=session,
                time=time,
            )
        return Note(id=note_id, text=text, untrusted=untrusted, session=session, time=utc(time))

    def notes(self) -> list[Note]:
        with self._read("reading notes") as c:
            rows = c.execute("SELECT id, text, untrusted, session, time FROM note ORDER BY id")
            return [
                Note(id=r[0], text=r[1], untrusted=bool(r[2]), session=r[3], time=from_iso(r[4]))
                for r in rows
            ]

    def put_page(self, page: Page) -> None:
        """Create or replace the page with this slug, and its index row, atomically."""
        with self._write(f"writing page {page.slug!r}") as c:
            c.execute(
                "INSERT INTO page (slug, title, body, tags, visibility, untrusted, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (slug) DO UPDATE SET"
                " title = excluded.title, body = excluded.body, tags = excluded.tags,"
                " visibility = excluded.visibility, untrusted = excluded.untrusted,"
                " updated_at = excluded.updated_at",
                (
                    page.slug,
                    page.title,
                    page.body,
                    msgspec.json.encode(list(page.tags)).decode(),
                    page.visibility,
                    int(page.untrusted),
                    iso(page.updated_at),
                ),
            )
            self._index_memory(
                c,
                kind="page",
                ref=f"page:{page.slug}",
                text=_page_text(page),
                tainted=page.untrusted,
                session=None,
                time=page.updated_at,
            )

    _PAGE_COLUMNS = "slug, title, body, tags, visibility, untrusted, updated_at"

    def get_page(self, slug: str) -> Page | None:
        with self._read(f"reading page {slug!r}") as c:
            row = c.execute(
                f"SELECT {self._PAGE_COLUMNS} FROM page WHERE slug = ?", (slug,)
            ).fetchone()
        return None if row is None else _page(row)

    def pages(self) -> list[Page]:
        with self._read("reading pages") as c:
            return [
                _page(r) for r in c.execute(f"SELECT {self._PAGE_COLUMNS} FROM page ORDER BY slug")
            ]

    def delete_page(self, slug: str) -> Page | None:
        """Remove the page with this slug and its index row, atomically; the page as it
        was, or None when there was none."""
        with self._write(f"removing page {slug!r}") as c:
            row = c.execute(
                f"SELECT {self._PAGE_COLUMNS} FROM page WHERE slug = ?", (slug,)
            ).fetchone()
            if row is None:
                return None
            c.execute("DELETE FROM page WHERE slug = ?", (slug,))
            _count_docs(c, -fts.unindex(c, "ref = ?", (f"page:{slug}",)))
        return _page(row)

    # -- identity and sweep facts, mirrored into the index (``sqlite_mirror``) ------------

    # -- the stored text of memory ----------------------------------------------------

    def read_cells(self, visit: Callable[[TextCell], None]) -> None:
        with self._read("reading the memory's text") as c:
            cells.read_cells(c, visit)

    def rewrite_cells(self, edits: Sequence[tuple[TextCell, str]]) -> tuple[list[bool], bool]:
        self._secure_delete(True)  # the old text is zeroed, not just freed
        try:
            with self._write("rewriting the memory's text") as c:
                made = cells.rewrite_cells(c, edits)
        finally:
            self._secure_delete(False)
        return made, self._truncate_wal()

    def identity_stamp(self) -> str | None:
        with self._read("reading the identity stamp") as c:
            return mirror.stamp(c, "identity")

    def replace_identity(self, entries: Sequence[Entry], *, stamp: str, time: datetime) -> None:
        with self._write("indexing identity", durable=False) as c:
            mirror.replace_identity(c, entries, stamp, utc(time))

    def facts_stamp(self) -> str | None:
        with self._read("reading the facts stamp") as c:
            return mirror.stamp(c, "facts")

    def replace_facts(self, facts: Sequence[Fact], *, stamp: str, expect: str | None) -> bool:
        with self._write("indexing sweep facts", durable=False) as c:
            if mirror.stamp(c, "facts") != expect:  # again, inside the transaction
                return False
            mirror.replace_facts(c, facts, stamp)
        return True

    # -- search (the SQL is in ``sqlite_search``, the FTS5 syntax in ``sqlite_fts``) -------

    def search(self, query: SearchQuery, k: int) -> list[Hit]:
        with self._read("searching") as c:
            return fts.search(c, query, k)

    def search_terms(
        self, query: SearchQuery, k: int, *, aside: float, only: Sequence[str] | None = None
    ) -> list[Found]:
        with self._read("searching") as c:
            return fts.search_terms(c, query, k, aside=aside, only=only)

    def newest(
        self,
        query: SearchQuery,
        k: int,
        *,
        within: int | None = None,
        only: Sequence[str] | None = None,
    ) -> list[Found]:
        with self._read("searching") as c:
            return fts.newest(c, query, k, within=within, only=only)

    def between(self, start: datetime, end: datetime, k: int) -> list[Found]:
        with self._read("reading a period's rows") as c:
            return fts.between(c, start, end, k)

    def row_count(self) -> int:
        with self._read("counting indexed rows") as c:
            row = c.execute("SELECT value FROM stat WHERE name = 'doc_rows'").fetchone()
        return int(row[0])

    def count_matches(self, queries: Sequence[SearchQuery], cap: int) -> list[int]:
        with self._read("counting matches") as c:
            return fts.count_matches(c, queries, cap)

    # -- journal and recalls -----------------------------------------------------------

    def journal_append(self, entry: JournalEntry) -> JournalEntry:
        with self._write("writing the journal") as c:
            cur = c.execute(
                "INSERT INTO journal (time, who, session, action, target, before, after)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    iso(entry.time),
                    entry.who,
                    entry.session,
                    entry.action,
                    entry.target,
                    entry.before,
                    entry.after,
                ),
            )
        return msgspec.structs.replace(entry, id=cast(int, cur.lastrowid), time=utc(entry.time))

    def journal(self, limit: int | None = None) -> list[JournalEntry]:
        """Entries oldest first; with ``limit``, only the newest ``limit`` of them."""
        sql = "SELECT id, time, who, session, action, target, before, after FROM journal"
        with self._read("reading the journal") as c:
            if limit is None:
                rows = c.execute(sql + " ORDER BY id").fetchall()
            else:
                rows = c.execute(sql + " ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
                rows.reverse()
        return [
            JournalEntry(
                id=r[0],
                time=from_iso(r[1]),
                who=r[2],
                session=r[3],
                action=r[4],
                target=r[5],
                before=r[6],
                after=r[7],
            )
            for r in rows
        ]

    def record_recalls(self, refs: Sequence[str], time: datetime) -> None:
        if not refs:
            return
        stamp = iso(time)
        with self._write("recording recalls", durable=False) as c:
            c.executemany(
                "INSERT INTO recall_log (ref, time) VALUES (?, ?)", ((r, stamp) for r in refs)
            )

    def recall_stats(self) -> dict[str, RecallStat]:
        with self._read("reading recall counts") as c:
            rows = c.execute("SELECT ref, count(*), max(time) FROM recall_log GROUP BY ref")
            return {
                r[0]: RecallStat(ref=r[0], count=r[1], last=from_iso(r[2]) if r[2] else None)
                for r in rows
            }


def _count_docs(c: sqlite3.Connection, delta: int) -> None:
    if delta:
        c.execute("UPDATE stat SET value = value + ? WHERE name = 'doc_rows'", (delta,))


def _cursor(row: Sequence[Any]) -> IndexCursor:
    return IndexCursor(path=row[0], offset=row[1], turn=row[2], tainted=bool(row[3]), lines=row[4])


def _page(row: Sequence[Any]) -> Page:
    visibility = cast(Literal["private", "world"], row[4])
    return Page(
        slug=row[0],
        title=row[1],
        body=row[2],
        tags=_tags.decode(row[3]),
        visibility=visibility,
        untrusted=bool(row[5]),
        updated_at=from_iso(row[6]),
    )
