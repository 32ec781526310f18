"""The PostgreSQL Store: the same contract as ``SqliteStore``, for homes that share one
database server (several daemons, a fleet of sweep workers).

Each owner's rows are in the owner's own schema (``postgres.conn``: tenancy without an
owner column); the schema is ``postgres.schema``'s migrations; search is
``postgres.search`` over ``postgres.text``'s FTS5-equal tokens. The repositories are
written once for both stores (``memory``: the index cursors, notes, pages, mirrors,
journal, recalls; ``days``; ``budget``; ``cells``); what is here is this backend's text
index (``tsvector`` rows added with COPY, the bm25 counters) and its transactions.

Every operation is one transaction run by ``PgStore.run`` (retried where that is safe).
Writes that read before they write, as SQLite's ``BEGIN IMMEDIATE`` does, take an
advisory lock named for what they guard (the index counters, the budget day, the fact
mirror), so two writers never interleave there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import psycopg

from tether.records import (
    TextCell,
)
from tether.stores import cells
from tether.stores.budget import BudgetLedger
from tether.stores.days import Days
from tether.stores.dialect import POSTGRES, Sql, T
from tether.stores.memory import INDEX_LOCK, Doc, MemoryRepo
from tether.stores.postgres import search, text
from tether.stores.postgres.conn import PgPool, PgStore
from tether.stores.search import Searches

Conn = psycopg.Connection[Any]
_ASIDE = frozenset({"assistant", "tool_call", "summary"})


def add_docs(conn: Conn, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert index rows (kind, session, epoch, turn, field, tainted, ref, time, text) and
    move the counters, with COPY (the bulk path of an import)."""
    if not rows:
        return
    docs = text.documents([r[8] for r in rows])
    tokens = 0
    with conn.cursor().copy(
        "COPY doc (kind, session, epoch, turn, field, tainted, ref, time, text, aside, len, tsv)"
        " FROM STDIN"
    ) as copy:
        for r, (vector, length) in zip(rows, docs, strict=True):
            tokens += length
            copy.write_row((*r, r[4] in _ASIDE, length, vector))
    count(conn, len(rows), tokens)


def drop_docs(conn: Conn, where: str, params: Sequence[object]) -> int:
    """Delete the ``doc`` rows matching ``where`` and move the counters; how many."""
    found = conn.execute(
        f"WITH gone AS (DELETE FROM doc WHERE {where} RETURNING len)"
        " SELECT count(*), coalesce(sum(len), 0) FROM gone",
        params,
    ).fetchone()
    n, tokens = (int(found[0]), int(found[1])) if found else (0, 0)
    count(conn, -n, -tokens)
    return n


def count(conn: Conn, rows: int, tokens: int) -> None:
    if rows or tokens:
        conn.execute(
            "UPDATE stat SET value = value + CASE name WHEN 'doc_rows' THEN %s ELSE %s END"
            " WHERE name IN ('doc_rows', 'doc_tokens')",
            (rows, tokens),
        )


def lock(conn: Conn, schema: str, name: str) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{schema}/{name}",))


class PostgresStore(MemoryRepo, Searches, BudgetLedger, Days):
    """``tether.ports.Store`` in one owner's schema of a PostgreSQL database. Safe to use
    from several threads (a pool of connections); close it when done."""

    #: The searches' SQL (``postgres.search``, the tokens in ``postgres.text``).
    text_search = search.TSV

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
        def locked(conn: Conn) -> Any:
            if guard is not None:
                lock(conn, self.pg.schema, guard)
            return work(conn)

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
        return cast(T, self._w(doing, lambda conn: work(Sql(conn, POSTGRES)), guard=guard))

    def _in_read(self, doing: str, work: Callable[[Sql], T]) -> T:
        return cast(T, self._r(doing, lambda conn: work(Sql(conn, POSTGRES))))

    # -- the index over session logs ---------------------------------------------------

    def reset_index(self) -> None:
        def work(conn: Conn) -> None:
            drop_docs(conn, "kind IN ('turn', 'summary')", ())
            conn.execute("DELETE FROM index_cursor")

        self._w("resetting the index", work, guard=INDEX_LOCK)

    def optimize_index(self) -> None:
        """Refresh the planner's statistics after a bulk load (the GIN index has no
        pending list to merge: it is built with ``fastupdate = off``)."""
        self.pg.run("optimizing the index", lambda conn: conn.execute("ANALYZE doc"))

    # -- notes and pages ---------------------------------------------------------------

    # -- the stored text of memory ----------------------------------------------------

    def _add_docs(self, db: Sql, rows: Sequence[Doc]) -> None:
        add_docs(db.c, rows)

    def _drop_docs(self, db: Sql, where: str, params: Sequence[object]) -> int:
        return drop_docs(db.c, POSTGRES.sql(where), params)

    def read_cells(self, visit: Callable[[TextCell], None]) -> None:
        self._in_read("reading the memory's text", lambda db: cells.read_cells(db, visit))

    def rewrite_cells(self, edits: Sequence[tuple[TextCell, str]]) -> tuple[list[bool], bool]:
        """As on SQLite; the server's write-ahead log is not ours to truncate, so the
        second value is always False (``tether memory scan`` says the old text may stay
        in the server's WAL and backups until they cycle)."""
        made = self._in_write(
            "rewriting the memory's text",
            lambda db: cells.rewrite_cells(db, edits, _reindex),
            guard=INDEX_LOCK,
        )
        return made, False

    # -- identity and sweep facts, mirrored into the index -------------------------------

    # -- journal and recalls -----------------------------------------------------------


def _reindex(db: Sql, cell: TextCell, new: str) -> bool:
    """Rewrite one index row: its vector and length anew, the token counter moved."""
    (doc_id,) = cell.key
    ((vector, length),) = text.documents([new])
    row = db.one(
        "WITH old AS (SELECT len FROM doc WHERE id = ? AND text = ? FOR UPDATE)"
        " UPDATE doc SET text = ?, tsv = ?::tsvector, len = ? FROM old WHERE doc.id = ?"
        " RETURNING old.len",
        (doc_id, cell.text, new, vector, length, doc_id),
    )
    if row is None:
        return False
    db.execute(
        "UPDATE stat SET value = value + ? WHERE name = 'doc_tokens'", (length - int(row[0]),)
    )
    return True
