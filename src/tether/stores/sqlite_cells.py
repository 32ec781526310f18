"""The stored text of durable memory, cell by cell, for ``tether memory scan``.

Every column of the main store that holds memory text a person or a model wrote: notes,
page titles and bodies, the memory journal's before/after, and the index rows of notes
and pages. (The sweep's cells are the sweep store's: ``sqlite_sweep_cells``.)

``read_cells`` visits them in batches (a large journal is never held at once);
``rewrite_cells`` replaces the given cells in one transaction with ``secure_delete`` on,
so the old text is zeroed in the file; the store then truncates the WAL so no frame
keeps it. Nothing here decides what is a secret: the caller does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from tether.core import cjk
from tether.records import TextCell

BATCH = 500

#: (kind, table, key columns, column, which rows); the key names the row in messages and
#: in updates. The index rows of notes and pages are listed too: they were indexed as
#: written (turn, identity and fact rows are redacted when indexed, so they are not).
CELLS: tuple[tuple[str, str, tuple[str, ...], str, str], ...] = (
    ("note", "note", ("id",), "text", ""),
    ("page", "page", ("slug",), "title", ""),
    ("page", "page", ("slug",), "body", ""),
    ("index", "doc", ("id",), "text", "kind IN ('note', 'page') AND "),
    ("journal", "journal", ("id",), "before", ""),
    ("journal", "journal", ("id",), "after", ""),
)


def _tables(c: sqlite3.Connection) -> set[str]:
    return {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def read_cells(c: sqlite3.Connection, visit: Callable[[TextCell], None]) -> None:
    """Call ``visit`` with every non-empty memory text cell, table by table, in key order."""
    tables = _tables(c)
    for kind, table, keys, column, rows_of in CELLS:
        if table not in tables:
            continue
        cols = ", ".join(keys)
        ref = ", ref" if kind == "index" else ""
        after: tuple[Any, ...] | None = None
        while True:
            where = f"({cols}) > ({', '.join('?' * len(keys))}) AND " if after else ""
            rows = c.execute(
                f"SELECT {cols}, {column}{ref} FROM {table} AS t "
                f"WHERE {where}{rows_of}{column} IS NOT NULL AND {column} != '' "
                f"ORDER BY {cols} LIMIT ?",
                (*(after or ()), BATCH),
            ).fetchall()
            for row in rows:
                key = tuple(row[: len(keys)])
                text = row[len(keys)]
                name = "/".join(str(k) for k in key[:2])
                if kind == "index":
                    name = str(row[len(keys) + 1])
                visit(TextCell(kind, table, column, key, name, text))
            if len(rows) < BATCH:
                break
            after = tuple(rows[-1][: len(keys)])


def _keys(table: str) -> tuple[str, ...]:
    return next(keys for _, t, keys, _, _ in CELLS if t == table)


def rewrite_cells(c: sqlite3.Connection, edits: Sequence[tuple[TextCell, str]]) -> list[bool]:
    """Replace each cell's text inside the transaction the caller has begun, where it
    still holds the text it was read with (a cell written meanwhile is left alone); per
    edit, whether it was made."""
    made: list[bool] = []
    for cell, text in edits:
        match = " AND ".join(f"{k} = ?" for k in _keys(cell.table))
        if cell.kind == "index":
            made.append(_reindex(c, cell, text))
            continue
        done = c.execute(
            f"UPDATE {cell.table} SET {cell.column} = ? WHERE {match} AND {cell.column} = ?",
            (text, *cell.key, cell.text),
        )
        made.append(done.rowcount > 0)
    return made


def _reindex(c: sqlite3.Connection, cell: TextCell, text: str) -> bool:
    """Rewrite one index row: its postings out with the old text, in with the new."""
    (doc_id,) = cell.key
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
    c.execute("UPDATE doc SET text = ?, seg = ? WHERE id = ?", (text, cjk.segment(text), doc_id))
    c.execute(
        "INSERT INTO doc_fts (rowid, body, aside) SELECT id, body, aside FROM doc WHERE id = ?",
        (doc_id,),
    )
    return True
