"""The stored text of durable memory in the PostgreSQL store, cell by cell, for ``tether
memory scan``: the same cells as ``sqlite_cells`` (notes, page titles and bodies, the
journal's before/after, the index rows of notes and pages), read in batches and
rewritten where they still hold the text they were read with. An index row rewritten
gets its vector and length anew (the counters follow)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg

from tether.records import TextCell
from tether.stores import dialect
from tether.stores import postgres_text as text
from tether.stores.dialect import POSTGRES, Sql
from tether.stores.sqlite_cells import CELLS

Conn = psycopg.Connection[Any]


def text_rows(
    c: Conn, table: str, keys: tuple[str, ...], column: str, *, extra: str = "", only: str = ""
) -> Iterator[tuple[Any, ...]]:
    """``dialect.text_rows`` on a pooled connection."""
    return dialect.text_rows(Sql(c, POSTGRES), table, keys, column, extra=extra, only=only)


def read_cells(c: Conn, visit: Callable[[TextCell], None]) -> None:
    for kind, table, keys, column, rows_of in CELLS:
        ref = ", ref" if kind == "index" else ""
        for row in text_rows(c, table, keys, column, extra=ref, only=rows_of):
            key = tuple(row[: len(keys)])
            name = str(row[len(keys) + 1]) if kind == "index" else "/".join(map(str, key[:2]))
            visit(TextCell(kind, table, column, key, name, row[len(keys)]))


def _keys(table: str) -> tuple[str, ...]:
    return next(keys for _, t, keys, _, _ in CELLS if t == table)


def rewrite_cells(c: Conn, edits: Sequence[tuple[TextCell, str]]) -> list[bool]:
    made: list[bool] = []
    for cell, new in edits:
        if cell.kind == "index":
            made.append(_reindex(c, cell, new))
            continue
        match = " AND ".join(f"{k} = %s" for k in _keys(cell.table))
        done = c.execute(
            f"UPDATE {cell.table} SET {cell.column} = %s WHERE {match} AND {cell.column} = %s",
            (new, *cell.key, cell.text),
        )
        made.append(done.rowcount > 0)
    return made


def _reindex(c: Conn, cell: TextCell, new: str) -> bool:
    (doc_id,) = cell.key
    ((vector, length),) = text.documents([new])
    row = c.execute(
        "WITH old AS (SELECT len FROM doc WHERE id = %s AND text = %s FOR UPDATE)"
        " UPDATE doc SET text = %s, tsv = %s::tsvector, len = %s FROM old WHERE doc.id = %s"
        " RETURNING old.len",
        (doc_id, cell.text, new, vector, length, doc_id),
    ).fetchone()
    if row is None:
        return False
    c.execute(
        "UPDATE stat SET value = value + %s WHERE name = 'doc_tokens'", (length - int(row[0]),)
    )
    return True
