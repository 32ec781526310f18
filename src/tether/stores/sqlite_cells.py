"""The stored text of durable memory, cell by cell, for ``tether memory scan``.

Every column of the main store that holds memory text a person or a model wrote: notes,
page titles, bodies and tags, the memory journal's before/after, and the index rows of notes
and pages. (The sweep's cells are the sweep store's: ``sqlite_sweep_cells``.)

``read_cells`` visits them in batches (a large journal is never held at once);
``rewrite_cells`` replaces the given cells in one transaction with ``secure_delete`` on,
so the old text is zeroed in the file; the store then truncates the WAL so no frame
keeps it. Nothing here decides what is a secret: the caller does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from tether.core import symbols
from tether.records import TextCell
from tether.stores.sqlite_file import tables, text_rows

#: (kind, table, key columns, column, which rows); the key names the row in messages and
#: in updates. The index rows of notes and pages are listed too: they were indexed as
#: written (turn, identity and fact rows are redacted when indexed, so they are not).
CELLS: tuple[tuple[str, str, tuple[str, ...], str, str], ...] = (
    ("note", "note", ("id",), "text", ""),
    ("page", "page", ("slug",), "title", ""),
    ("page", "page", ("slug",), "body", ""),
    # A JSON list: a secret redacted in it leaves valid JSON (a marker has no quote).
    ("page", "page", ("slug",), "tags", "tags <> '[]' AND "),
    ("index", "doc", ("id",), "text", "kind IN ('note', 'page') AND "),
    ("journal", "journal", ("id",), "before", ""),
    ("journal", "journal", ("id",), "after", ""),
)


def read_cells(c: sqlite3.Connection, visit: Callable[[TextCell], None]) -> None:
    """Call ``visit`` with every non-empty memory text cell, table by table, in key order."""
    present = tables(c)
    for kind, table, keys, column, rows_of in CELLS:
        if table not in present:
            continue
        ref = ", ref" if kind == "index" else ""
        for row in text_rows(c, table, keys, column, extra=ref, only=rows_of):
            key = tuple(row[: len(keys)])
            name = str(row[len(keys) + 1]) if kind == "index" else "/".join(map(str, key[:2]))
            visit(TextCell(kind, table, column, key, name, row[len(keys)]))


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
    c.execute("UPDATE doc SET text = ?, seg = ? WHERE id = ?", (text, symbols.seg(text), doc_id))
    c.execute(
        "INSERT INTO doc_fts (rowid, body, aside) SELECT id, body, aside FROM doc WHERE id = ?",
        (doc_id,),
    )
    return True
