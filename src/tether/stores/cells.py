"""The stored text of durable memory in the main store, cell by cell, for ``tether memory
scan``, on both backends.

Every column that holds memory text a person or a model wrote: notes, page titles, bodies
and tags, the memory journal's before/after, and the index rows of notes and pages. (The
sweep's cells are the sweep store's: ``sweep_cells``.) ``read_cells`` visits them in
batches (a large journal is never held at once); ``rewrite_cells`` replaces the given
cells inside the caller's write transaction, each only where it still holds the text it
was read with. An index row is rewritten by the store's own text index (``reindex``: its
postings, or its vector and length). Nothing here decides what is a secret: the caller
does.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from tether.records import TextCell
from tether.stores.dialect import Sql, text_rows

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
#: Rewrites one index row (``doc``, keyed by id) from the cell's text to the new text,
#: where it still holds the old; whether it did.
Reindex = Callable[[Sql, TextCell, str], bool]


def read_cells(
    db: Sql, visit: Callable[[TextCell], None], present: Collection[str] | None = None
) -> None:
    """Call ``visit`` with every non-empty memory text cell, table by table, in key order
    (only of the tables in ``present``, when given)."""
    for kind, table, keys, column, rows_of in CELLS:
        if present is not None and table not in present:
            continue
        ref = ", ref" if kind == "index" else ""
        for row in text_rows(db, table, keys, column, extra=ref, only=rows_of):
            key = tuple(row[: len(keys)])
            name = str(row[len(keys) + 1]) if kind == "index" else "/".join(map(str, key[:2]))
            visit(TextCell(kind, table, column, key, name, row[len(keys)]))


def _keys(table: str) -> tuple[str, ...]:
    return next(keys for _, t, keys, _, _ in CELLS if t == table)


def rewrite_cells(db: Sql, edits: Sequence[tuple[TextCell, str]], reindex: Reindex) -> list[bool]:
    """Replace each cell's text inside the transaction the caller has begun, where it
    still holds the text it was read with (a cell written meanwhile is left alone); per
    edit, whether it was made."""
    made: list[bool] = []
    for cell, text in edits:
        if cell.kind == "index":
            made.append(reindex(db, cell, text))
            continue
        match = " AND ".join(f"{k} = ?" for k in _keys(cell.table))
        done = db.count(
            f"UPDATE {cell.table} SET {cell.column} = ? WHERE {match} AND {cell.column} = ?",
            (text, *cell.key, cell.text),
        )
        made.append(done > 0)
    return made
