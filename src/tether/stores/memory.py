"""The main store's repositories written once for both backends: the index cursors and
log rows, notes and pages (each with its index row), the identity and fact mirrors, the
journal and the recall log. Each store (``sqlite.SqliteStore``, ``postgres.PostgresStore``)
runs them in its transactions (``dialect.Repository``) and keeps what truly differs, its
text index: how a row goes into it and out of it (``_add_docs``, ``_drop_docs``: FTS5's
postings, or a ``tsvector`` and the bm25 counters), how it is searched, reset and
optimized.

Every write of the index is guarded by ``INDEX_LOCK``: on PostgreSQL an advisory lock
that keeps the row and token counters (bm25's N and average length) exact, ``newest``'s
ids in commit order, and a mirror's stamp true between its check and its write; SQLite's
``BEGIN IMMEDIATE`` holds the whole file. Index and recall-log writes do not wait for the
disk on SQLite (``durable=False``: the index is rebuilt from the logs, a lost recall only
undercounts); notes, pages and the journal do.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, cast

import msgspec

from tether.core.context.memory_block import Entry
from tether.core.recall.summaries import Unit
from tether.core.sweep.state import Fact
from tether.records import (
    Found,
    HitKind,
    IndexCursor,
    JournalEntry,
    LogRow,
    Note,
    Page,
    RecallStat,
)
from tether.stores import search
from tether.stores.dialect import Repository, Sql, from_iso, iso, micros, upsert, utc

#: What every write of ``doc`` is guarded by (module docstring).
INDEX_LOCK = "index"
#: An index row: kind, session, epoch, turn, field, tainted, ref, time (unix
#: microseconds), text.
Doc = tuple[str, str | None, int | None, int | None, str | None, int, str | None, int, str]
#: The ``mirror`` row that stamps each mirrored kind.
_MIRRORED = {"identity": "identity", "fact": "facts"}
_CURSOR = ("path", '"offset"', "lines", "turn", "tainted", "size", "mtime_ns", "ino", "tail")
_PAGE = "slug, title, body, tags, visibility, untrusted, updated_at"
_JOURNAL = "id, time, who, session, action, target, before, after"
_tags = msgspec.json.Decoder(tuple[str, ...])


def index_time(time: datetime) -> int:
    """An aware time as the index stores it (a naive one is refused)."""
    return micros(utc(time))


def page_text(page: Page) -> str:
    """What a page's index row holds: its title, body and tags."""
    body = f"{page.title}\n{page.body}"
    return f"{body}\ntags: {', '.join(page.tags)}" if page.tags else body


def _cursor(row: Sequence[Any]) -> IndexCursor:
    # As ``_CURSOR`` names them; both drivers give ints (or None) for the integer columns.
    path, offset, lines, turn, tainted, size, mtime_ns, ino, tail = row
    return IndexCursor(path, offset, turn, bool(tainted), lines, size, mtime_ns, ino, tail)


def _page(row: Sequence[Any]) -> Page:
    return Page(
        slug=row[0],
        title=row[1],
        body=row[2],
        tags=_tags.decode(row[3]),
        visibility=cast(Literal["private", "world"], row[4]),
        untrusted=bool(row[5]),
        updated_at=from_iso(row[6]),
    )


def _journal(row: Sequence[Any]) -> JournalEntry:
    return JournalEntry(
        id=row[0],
        time=from_iso(row[1]),
        who=row[2],
        session=row[3],
        action=row[4],
        target=row[5],
        before=row[6],
        after=row[7],
    )


class MemoryRepo(Repository):
    """The ``Store`` port's index, memory, mirror, journal and recall methods, for both
    stores (a mixin); each store implements its text index's two hooks."""

    # -- the text index: each store's own ---------------------------------------------

    def _add_docs(self, db: Sql, rows: Sequence[Doc]) -> None:
        """Insert index rows and move the counters."""
        raise NotImplementedError

    def _drop_docs(self, db: Sql, where: str, params: Sequence[object]) -> int:
        """Delete the index rows matching ``where`` and move the counters; how many."""
        raise NotImplementedError

    # -- the index over session logs ---------------------------------------------------

    def index_cursor(self, path: str) -> IndexCursor | None:
        row = self._in_read(
            "reading an index cursor",
            lambda db: db.one(
                f"SELECT {', '.join(_CURSOR)} FROM index_cursor WHERE path = ?", (path,)
            ),
        )
        return None if row is None else _cursor(row)

    def index_cursors(self) -> dict[str, IndexCursor]:
        rows = self._in_read(
            "reading index cursors",
            lambda db: db.all(f"SELECT {', '.join(_CURSOR)} FROM index_cursor"),
        )
        return {r[0]: _cursor(r) for r in rows}

    def index_log_rows(self, rows: Sequence[LogRow], cursor: IndexCursor) -> None:
        self.index_logs([(rows, cursor)])

    def index_logs(self, batch: Sequence[tuple[Sequence[LogRow], IndexCursor]]) -> None:
        if not batch:
            return
        docs: list[Doc] = [
            (
                "summary" if r.field == "summary" else "turn",
                r.session,
                r.epoch,
                r.turn,
                r.field,
                int(r.tainted),
                None,
                index_time(r.time),
                r.text,
            )
            for rows, _ in batch
            for r in rows
        ]
        cursors = [
            (c.path, c.offset, c.lines, c.turn, int(c.tainted), c.size, c.mtime_ns, c.ino, c.tail)
            for _, c in batch
        ]

        def work(db: Sql) -> None:
            self._add_docs(db, docs)
            db.many(upsert("index_cursor", _CURSOR, ("path",)), cursors)

        self._in_write("indexing session logs", work, guard=INDEX_LOCK, durable=False)

    def forget_session_index(self, session: str) -> int:
        prefix = f"{session}/"

        def work(db: Sql) -> int:
            n = self._drop_docs(db, "session = ? AND kind IN ('turn', 'summary')", (session,))
            db.execute(
                "DELETE FROM index_cursor WHERE substr(path, 1, ?) = ?", (len(prefix), prefix)
            )
            return n

        return self._in_write(
            "dropping a session's index rows", work, guard=INDEX_LOCK, durable=False
        )

    def put_summary_units(self, units: Sequence[Unit], gone: Sequence[str] = ()) -> None:
        if not units and not gone:
            return
        refs = sorted({*gone, *(u.span.ref for u in units)})
        docs: list[Doc] = [
            (
                "summary",
                u.span.session,
                u.span.epoch,
                None,
                None,
                int(u.tainted),
                u.span.ref,
                index_time(u.time),
                u.text,
            )
            for u in units
        ]

        def work(db: Sql) -> None:
            for ref in refs:
                self._drop_docs(db, "ref = ?", (ref,))
            self._add_docs(db, docs)

        self._in_write("indexing summaries", work, guard=INDEX_LOCK, durable=False)

    def between(self, start: datetime, end: datetime, limit: int) -> list[Found]:
        return self._in_read(
            "reading a period's rows", lambda db: search.between(db, start, end, limit)
        )

    def row_count(self) -> int:
        row = self._in_read(
            "counting indexed rows",
            lambda db: db.one("SELECT value FROM stat WHERE name = 'doc_rows'"),
        )
        return int(row[0])

    # -- notes and pages ---------------------------------------------------------------

    def _index_memory(
        self,
        db: Sql,
        *,
        kind: HitKind,
        ref: str,
        body: str,
        tainted: bool,
        session: str | None,
        time: datetime,
    ) -> None:
        """(Re)index one note or page: its old row out of the index, the new one in."""
        self._drop_docs(db, "ref = ?", (ref,))
        self._add_docs(
            db, [(kind, session, None, None, None, int(tainted), ref, index_time(time), body)]
        )

    def add_note(self, text: str, *, untrusted: bool, session: str | None, time: datetime) -> Note:
        stamp = iso(time)

        def work(db: Sql) -> int:
            (note_id,) = db.one(
                "INSERT INTO note (text, untrusted, session, time) VALUES (?, ?, ?, ?)"
                " RETURNING id",
                (text, int(untrusted), session, stamp),
            )
            self._index_memory(
                db,
                kind="note",
                ref=f"note:{note_id}",
                body=text,
                tainted=untrusted,
                session=session,
                time=time,
            )
            return int(note_id)

        note_id = self._in_write("writing a note", work, guard=INDEX_LOCK)
        return Note(id=note_id, text=text, untrusted=untrusted, session=session, time=utc(time))

    def notes(self) -> list[Note]:
        rows = self._in_read(
            "reading notes",
            lambda db: db.all("SELECT id, text, untrusted, session, time FROM note ORDER BY id"),
        )
        return [
            Note(id=r[0], text=r[1], untrusted=bool(r[2]), session=r[3], time=from_iso(r[4]))
            for r in rows
        ]

    def put_page(self, page: Page) -> None:
        """Create or replace the page with this slug, and its index row, atomically."""
        values = (
            page.slug,
            page.title,
            page.body,
            msgspec.json.encode(list(page.tags)).decode(),
            page.visibility,
            int(page.untrusted),
            iso(page.updated_at),
        )

        def work(db: Sql) -> None:
            db.execute(upsert("page", _PAGE.split(", "), ("slug",)), values)
            self._index_memory(
                db,
                kind="page",
                ref=f"page:{page.slug}",
                body=page_text(page),
                tainted=page.untrusted,
                session=None,
                time=page.updated_at,
            )

        self._in_write(f"writing page {page.slug!r}", work, guard=INDEX_LOCK)

    def get_page(self, slug: str) -> Page | None:
        row = self._in_read(
            f"reading page {slug!r}",
            lambda db: db.one(f"SELECT {_PAGE} FROM page WHERE slug = ?", (slug,)),
        )
        return None if row is None else _page(row)

    def pages(self) -> list[Page]:
        rows = self._in_read(
            "reading pages", lambda db: db.all(f"SELECT {_PAGE} FROM page ORDER BY slug")
        )
        return [_page(r) for r in rows]

    def delete_page(self, slug: str) -> Page | None:
        """Remove the page with this slug and its index row, atomically; the page as it
        was, or None when there was none."""

        def work(db: Sql) -> Page | None:
            row = db.one(f"DELETE FROM page WHERE slug = ? RETURNING {_PAGE}", (slug,))
            if row is None:
                return None
            self._drop_docs(db, "ref = ?", (f"page:{slug}",))
            return _page(row)

        return self._in_write(f"removing page {slug!r}", work, guard=INDEX_LOCK)

    # -- identity and sweep facts, mirrored into the index -------------------------------

    def _stamp(self, db: Sql, name: str) -> str | None:
        row = db.one("SELECT value FROM mirror WHERE name = ?", (name,))
        return None if row is None else str(row[0])

    def _mirror(self, db: Sql, kind: str, rows: Sequence[tuple[str, str, int]], value: str) -> None:
        """Replace every index row of ``kind`` with ``rows`` (ref, text, time in
        microseconds), and store the source's new stamp."""
        self._drop_docs(db, "kind = ?", (kind,))
        self._add_docs(
            db, [(kind, None, None, None, None, 0, ref, at, body) for ref, body, at in rows]
        )
        db.execute(upsert("mirror", ("name", "value"), ("name",)), (_MIRRORED[kind], value))

    def identity_stamp(self) -> str | None:
        return self._in_read("reading the identity stamp", lambda db: self._stamp(db, "identity"))

    def replace_identity(self, entries: Sequence[Entry], *, stamp: str, time: datetime) -> None:
        at = index_time(time)
        rows = [(f"identity:{e.id}", e.text, at) for e in entries]
        self._in_write(
            "indexing identity",
            lambda db: self._mirror(db, "identity", rows, stamp),
            guard=INDEX_LOCK,
            durable=False,
        )

    def facts_stamp(self) -> str | None:
        return self._in_read("reading the facts stamp", lambda db: self._stamp(db, "facts"))

    def replace_facts(self, facts: Sequence[Fact], *, stamp: str, expect: str | None) -> bool:
        rows = [(f"fact:{f.id}", f.text, index_time(f.updated_at)) for f in facts]

        def work(db: Sql) -> bool:
            if self._stamp(db, "facts") != expect:  # again, inside the guarded transaction
                return False
            self._mirror(db, "fact", rows, stamp)
            return True

        return self._in_write("indexing sweep facts", work, guard=INDEX_LOCK, durable=False)

    # -- journal and recalls -----------------------------------------------------------

    def journal_append(self, entry: JournalEntry) -> JournalEntry:
        (entry_id,) = self._in_write(
            "writing the journal",
            lambda db: db.one(
                "INSERT INTO journal (time, who, session, action, target, before, after)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    iso(entry.time),
                    entry.who,
                    entry.session,
                    entry.action,
                    entry.target,
                    entry.before,
                    entry.after,
                ),
            ),
        )
        return msgspec.structs.replace(entry, id=int(entry_id), time=utc(entry.time))

    def journal(self, limit: int | None = None) -> list[JournalEntry]:
        """Entries oldest first; with ``limit``, only the newest ``limit`` of them."""
        sql = f"SELECT {_JOURNAL} FROM journal"

        def work(db: Sql) -> list[Any]:
            if limit is None:
                return db.all(sql + " ORDER BY id")
            return db.all(sql + " ORDER BY id DESC LIMIT ?", (limit,))[::-1]

        return [_journal(r) for r in self._in_read("reading the journal", work)]

    def record_recalls(self, refs: Sequence[str], time: datetime) -> None:
        if not refs:
            return
        stamp = iso(time)
        self._in_write(
            "recording recalls",
            lambda db: db.many(
                "INSERT INTO recall_log (ref, time) VALUES (?, ?)", [(r, stamp) for r in refs]
            ),
            durable=False,
        )

    def recall_stats(self) -> dict[str, RecallStat]:
        rows = self._in_read(
            "reading recall counts",
            lambda db: db.all("SELECT ref, count(*), max(time) FROM recall_log GROUP BY ref"),
        )
        return {
            r[0]: RecallStat(ref=r[0], count=int(r[1]), last=from_iso(r[2]) if r[2] else None)
            for r in rows
        }
