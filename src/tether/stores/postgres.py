"""The PostgreSQL Store: the same contract as ``SqliteStore``, for homes that share one
database server (several daemons, a fleet of sweep workers).

Each owner's rows are in the owner's own schema (``postgres_conn``: tenancy without an
owner column); the schema is ``postgres_schema``'s migrations; search is
``postgres_search`` over ``postgres_text``'s FTS5-equal tokens; what the sweep reads of
a day (``days``) and the budget ledger (``budget``) are written once for both stores;
memory text for the scan is ``postgres_cells``.

Every operation is one transaction run by ``PgStore.run`` (retried where that is safe).
Writes that read before they write, as SQLite's ``BEGIN IMMEDIATE`` does, take an
advisory lock named for what they guard (the index counters, the budget day, the fact
mirror), so two writers never interleave there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal, cast

import msgspec
import psycopg

from tether.core.memory_block import Entry
from tether.core.sweep.state import Fact
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
from tether.stores import postgres_cells as cells
from tether.stores import postgres_search as search
from tether.stores import postgres_text as text
from tether.stores.budget import BudgetLedger
from tether.stores.days import Days
from tether.stores.dialect import EPOCH, MICRO, POSTGRES, Sql, T
from tether.stores.postgres_conn import PgPool, PgStore
from tether.stores.sqlite_file import from_iso, iso, utc

Conn = psycopg.Connection[Any]
_ASIDE = frozenset({"assistant", "tool_call", "summary"})
_tags = msgspec.json.Decoder(tuple[str, ...])
#: The ``mirror`` row that stamps each mirrored kind.
_MIRRORED = {"identity": "identity", "fact": "facts"}
#: The advisory lock every write of ``doc`` takes: it keeps the row and token counters
#: (bm25's N and average length) exact, and ``newest``'s ids in commit order.
INDEX_LOCK = "index"


def _micros(time: datetime) -> int:
    return (utc(time) - EPOCH) // MICRO


def _page_text(page: Page) -> str:
    body = f"{page.title}\n{page.body}"
    return f"{body}\ntags: {', '.join(page.tags)}" if page.tags else body


def add_docs(c: Conn, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert index rows (kind, session, epoch, turn, field, tainted, ref, time, text) and
    move the counters, with COPY (the bulk path of an import)."""
    if not rows:
        return
    docs = text.documents([r[8] for r in rows])
    tokens = 0
    with c.cursor().copy(
        "COPY doc (kind, session, epoch, turn, field, tainted, ref, time, text, aside, len, tsv)"
        " FROM STDIN"
    ) as copy:
        for r, (vector, length) in zip(rows, docs, strict=True):
            tokens += length
            copy.write_row((*r, r[4] in _ASIDE, length, vector))
    count(c, len(rows), tokens)


def drop_docs(c: Conn, where: str, params: Sequence[object]) -> int:
    """Delete the ``doc`` rows matching ``where`` and move the counters; how many."""
    found = c.execute(
        f"WITH gone AS (DELETE FROM doc WHERE {where} RETURNING len)"
        " SELECT count(*), coalesce(sum(len), 0) FROM gone",
        params,
    ).fetchone()
    n, tokens = (int(found[0]), int(found[1])) if found else (0, 0)
    count(c, -n, -tokens)
    return n


def count(c: Conn, rows: int, tokens: int) -> None:
    if rows or tokens:
        c.execute(
            "UPDATE stat SET value = value + CASE name WHEN 'doc_rows' THEN %s ELSE %s END"
            " WHERE name IN ('doc_rows', 'doc_tokens')",
            (rows, tokens),
        )


def lock(c: Conn, schema: str, name: str) -> None:
    c.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{schema}/{name}",))


class PostgresStore(BudgetLedger, Days):
    """``tether.ports.Store`` in one owner's schema of a PostgreSQL database. Safe to use
    from several threads (a pool of connections); close it when done."""

    def __init__(
        self, url: str, owner: str, *, migrate: bool = True, pool: PgPool | None = None
    ) -> None:
        self.pg = PgStore(url, owner, migrate=migrate, pool=pool)
        self.path = self.pg.where  # what messages name (the URL without its password)

    def close(self) -> None:
        self.pg.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schema_version(self) -> int:
        return self.pg.level

    def _w(self, doing: str, work: Callable[[Conn], Any], *, guard: str | None = None) -> Any:
        def locked(c: Conn) -> Any:
            if guard is not None:
                lock(c, self.pg.schema, guard)
            return work(c)

        return self.pg.run(doing, locked)

    def _r(self, doing: str, work: Callable[[Conn], Any]) -> Any:
        return self.pg.run(doing, work, write=False)

    def _in_write(
        self,
        doing: str,
        work: Callable[[Sql], T],
        *,
        guard: str | None = None,
        durable: bool = True,  # noqa: ARG002 - the server's commit is always its own
    ) -> T:
        return cast(T, self._w(doing, lambda c: work(Sql(c, POSTGRES)), guard=guard))

    def _in_read(self, doing: str, work: Callable[[Sql], T]) -> T:
        return cast(T, self._r(doing, lambda c: work(Sql(c, POSTGRES))))

    # -- the index over session logs ---------------------------------------------------

    _CURSOR = 'SELECT path, "offset", turn, tainted, lines FROM index_cursor'

    def index_cursor(self, path: str) -> IndexCursor | None:
        row = self._r(
            "reading an index cursor",
            lambda c: c.execute(self._CURSOR + " WHERE path = %s", (path,)).fetchone(),
        )
        return None if row is None else _cursor(row)

    def index_cursors(self) -> dict[str, IndexCursor]:
        rows = self._r("reading index cursors", lambda c: c.execute(self._CURSOR).fetchall())
        return {r[0]: _cursor(r) for r in rows}

    def index_log_rows(self, rows: Sequence[LogRow], cursor: IndexCursor) -> None:
        self.index_logs([(rows, cursor)])

    def index_logs(self, batch: Sequence[tuple[Sequence[LogRow], IndexCursor]]) -> None:
        if not batch:
            return
        docs = [
            (
                "summary" if r.field == "summary" else "turn",
                r.session,
                r.epoch,
                r.turn,
                r.field,
                int(r.tainted),
                None,
                _micros(r.time),
                r.text,
            )
            for rows, _ in batch
            for r in rows
        ]

        def work(c: Conn) -> None:
            add_docs(c, docs)
            c.cursor().executemany(
                'INSERT INTO index_cursor (path, "offset", lines, turn, tainted)'
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (path) DO UPDATE SET"
                ' "offset" = excluded."offset", lines = excluded.lines,'
                " turn = excluded.turn, tainted = excluded.tainted",
                [(cur.path, cur.offset, cur.lines, cur.turn, int(cur.tainted)) for _, cur in batch],
            )

        self._w("indexing session logs", work, guard=INDEX_LOCK)

    def reset_index(self) -> None:
        def work(c: Conn) -> None:
            drop_docs(c, "kind IN ('turn', 'summary')", ())
            c.execute("DELETE FROM index_cursor")

        self._w("resetting the index", work, guard=INDEX_LOCK)

    def optimize_index(self) -> None:
        """Refresh the planner's statistics after a bulk load (the GIN index has no
        pending list to merge: it is built with ``fastupdate = off``)."""
        self.pg.run("optimizing the index", lambda c: c.execute("ANALYZE doc"))

    # -- notes and pages ---------------------------------------------------------------

    def _index_memory(
        self,
        c: Conn,
        *,
        kind: HitKind,
        ref: str,
        body: str,
        tainted: bool,
        session: str | None,
        time: datetime,
    ) -> None:
        lock(c, self.pg.schema, INDEX_LOCK)
        drop_docs(c, "ref = %s", (ref,))
        add_docs(c, [(kind, session, None, None, None, int(tainted), ref, _micros(time), body)])

    def add_note(self, text: str, *, untrusted: bool, session: str | None, time: datetime) -> Note:
        stamp = iso(time)

        def work(c: Conn) -> int:
            row = c.execute(
                "INSERT INTO note (text, untrusted, session, time) VALUES (%s, %s, %s, %s)"
                " RETURNING id",
                (text, int(untrusted), session, stamp),
            ).fetchone()
            assert row is not None
            note_id = int(row[0])
            self._index_memory(
                c,
                kind="note",
                ref=f"note:{note_id}",
                body=text,
                tainted=untrusted,
                session=session,
                time=time,
            )
            return note_id

        note_id = self._w("writing a note", work)
        return Note(id=note_id, text=text, untrusted=untrusted, session=session, time=utc(time))

    def notes(self) -> list[Note]:
        rows = self._r(
            "reading notes",
            lambda c: c.execute(
                "SELECT id, text, untrusted, session, time FROM note ORDER BY id"
            ).fetchall(),
        )
        return [
            Note(id=r[0], text=r[1], untrusted=bool(r[2]), session=r[3], time=from_iso(r[4]))
            for r in rows
        ]

    def put_page(self, page: Page) -> None:
        def work(c: Conn) -> None:
            c.execute(
                "INSERT INTO page (slug, title, body, tags, visibility, untrusted, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (slug) DO UPDATE SET"
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
                body=_page_text(page),
                tainted=page.untrusted,
                session=None,
                time=page.updated_at,
            )

        self._w(f"writing page {page.slug!r}", work)

    _PAGE = "SELECT slug, title, body, tags, visibility, untrusted, updated_at FROM page"

    def get_page(self, slug: str) -> Page | None:
        row = self._r(
            f"reading page {slug!r}",
            lambda c: c.execute(self._PAGE + " WHERE slug = %s", (slug,)).fetchone(),
        )
        return None if row is None else _page(row)

    def pages(self) -> list[Page]:
        rows = self._r(
            "reading pages", lambda c: c.execute(self._PAGE + " ORDER BY slug").fetchall()
        )
        return [_page(r) for r in rows]

    def delete_page(self, slug: str) -> Page | None:
        def work(c: Conn) -> Page | None:
            row = c.execute(
                "DELETE FROM page WHERE slug = %s"
                " RETURNING slug, title, body, tags, visibility, untrusted, updated_at",
                (slug,),
            ).fetchone()
            if row is None:
                return None
            lock(c, self.pg.schema, INDEX_LOCK)
            drop_docs(c, "ref = %s", (f"page:{slug}",))
            return _page(row)

        return cast("Page | None", self._w(f"removing page {slug!r}", work))

    # -- the stored text of memory ----------------------------------------------------

    def read_cells(self, visit: Callable[[TextCell], None]) -> None:
        self._r("reading the memory's text", lambda c: cells.read_cells(c, visit))

    def rewrite_cells(self, edits: Sequence[tuple[TextCell, str]]) -> tuple[list[bool], bool]:
        """As on SQLite; the server's write-ahead log is not ours to truncate, so the
        second value is always False (``tether memory scan`` says the old text may stay
        in the server's WAL and backups until they cycle)."""
        made = self._w(
            "rewriting the memory's text",
            lambda c: cells.rewrite_cells(c, edits),
            guard=INDEX_LOCK,
        )
        return made, False

    # -- identity and sweep facts, mirrored into the index -------------------------------

    def _stamp(self, c: Conn, name: str) -> str | None:
        row = c.execute("SELECT value FROM mirror WHERE name = %s", (name,)).fetchone()
        return None if row is None else str(row[0])

    def _mirror(self, c: Conn, kind: str, rows: Sequence[tuple[str, str, int]], value: str) -> None:
        drop_docs(c, "kind = %s", (kind,))
        add_docs(c, [(kind, None, None, None, None, 0, ref, at, body) for ref, body, at in rows])
        c.execute(
            "INSERT INTO mirror (name, value) VALUES (%s, %s)"
            " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (_MIRRORED[kind], value),
        )

    def identity_stamp(self) -> str | None:
        return cast(
            "str | None",
            self._r("reading the identity stamp", lambda c: self._stamp(c, "identity")),
        )

    def replace_identity(self, entries: Sequence[Entry], *, stamp: str, time: datetime) -> None:
        at = _micros(time)
        rows = [(f"identity:{e.id}", e.text, at) for e in entries]
        self._w(
            "indexing identity",
            lambda c: self._mirror(c, "identity", rows, stamp),
            guard=INDEX_LOCK,
        )

    def facts_stamp(self) -> str | None:
        return cast(
            "str | None", self._r("reading the facts stamp", lambda c: self._stamp(c, "facts"))
        )

    def replace_facts(self, facts: Sequence[Fact], *, stamp: str, expect: str | None) -> bool:
        rows = [(f"fact:{f.id}", f.text, _micros(f.updated_at)) for f in facts]

        def work(c: Conn) -> bool:
            if self._stamp(c, "facts") != expect:  # again, under the lock
                return False
            self._mirror(c, "fact", rows, stamp)
            return True

        return bool(self._w("indexing sweep facts", work, guard=INDEX_LOCK))

    # -- search ------------------------------------------------------------------------

    def search(self, query: SearchQuery, k: int) -> list[Hit]:
        return cast("list[Hit]", self._r("searching", lambda c: search.search(c, query, k)))

    def search_terms(
        self, query: SearchQuery, k: int, *, aside: float, only: Sequence[str] | None = None
    ) -> list[Found]:
        return cast(
            "list[Found]",
            self._r(
                "searching",
                lambda c: search.search_terms(c, query, k, aside=aside, only=only),
            ),
        )

    def newest(
        self,
        query: SearchQuery,
        k: int,
        *,
        within: int | None = None,
        only: Sequence[str] | None = None,
    ) -> list[Found]:
        return cast(
            "list[Found]",
            self._r("searching", lambda c: search.newest(c, query, k, within=within, only=only)),
        )

    def between(self, start: datetime, end: datetime, k: int) -> list[Found]:
        return cast(
            "list[Found]",
            self._r("reading a period's rows", lambda c: search.between(c, start, end, k)),
        )

    def row_count(self) -> int:
        row = self._r(
            "counting indexed rows",
            lambda c: c.execute("SELECT value FROM stat WHERE name = 'doc_rows'").fetchone(),
        )
        return int(row[0])

    def count_matches(self, queries: Sequence[SearchQuery], cap: int) -> list[int]:
        return cast(
            "list[int]",
            self._r("counting matches", lambda c: search.count_matches(c, queries, cap)),
        )

    # -- journal and recalls -----------------------------------------------------------

    def journal_append(self, entry: JournalEntry) -> JournalEntry:
        row = self._w(
            "writing the journal",
            lambda c: c.execute(
                "INSERT INTO journal (time, who, session, action, target, before, after)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (
                    iso(entry.time),
                    entry.who,
                    entry.session,
                    entry.action,
                    entry.target,
                    entry.before,
                    entry.after,
                ),
            ).fetchone(),
        )
        return msgspec.structs.replace(entry, id=int(row[0]), time=utc(entry.time))

    def journal(self, limit: int | None = None) -> list[JournalEntry]:
        sql = "SELECT id, time, who, session, action, target, before, after FROM journal"

        def work(c: Conn) -> list[Any]:
            if limit is None:
                return c.execute(sql + " ORDER BY id").fetchall()
            rows = c.execute(sql + " ORDER BY id DESC LIMIT %s", (limit,)).fetchall()
            rows.reverse()
            return rows

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
            for r in self._r("reading the journal", work)
        ]

    def record_recalls(self, refs: Sequence[str], time: datetime) -> None:
        if not refs:
            return
        stamp = iso(time)
        self._w(
            "recording recalls",
            lambda c: c.cursor().executemany(
                "INSERT INTO recall_log (ref, time) VALUES (%s, %s)", [(r, stamp) for r in refs]
            ),
        )

    def recall_stats(self) -> dict[str, RecallStat]:
        rows = self._r(
            "reading recall counts",
            lambda c: c.execute(
                "SELECT ref, count(*), max(time) FROM recall_log GROUP BY ref"
            ).fetchall(),
        )
        return {
            r[0]: RecallStat(ref=r[0], count=int(r[1]), last=from_iso(r[2]) if r[2] else None)
            for r in rows
        }


def _cursor(row: Sequence[Any]) -> IndexCursor:
    return IndexCursor(
        path=row[0], offset=int(row[1]), turn=row[2], tainted=bool(row[3]), lines=int(row[4])
    )


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
