"""The sweep's stored text, cell by cell, for ``tether memory scan``, on both stores; and
what the main store's fact mirror reads (the active facts).

Cells: sweep facts, the sweep journal's before/after, standing-trigger conditions and
staged day packets (when the sweep's tables are there). ``read_cells`` visits them in
batches; ``rewrite_cells`` replaces the given ones in one sweep write transaction, each
only where it still holds the text it was read with. A staged packet is rewritten only
while its day is not in progress (``BUSY_STAGE``, read again inside that transaction), and
its digest follows its bytes. Nothing here decides what is a secret: the caller does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Sequence

from tether.records import TextCell
from tether.stores.dialect import Sql, text_rows

#: (kind, table, key columns, column), in the order a scan visits them.
CELLS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("fact", "sweep_fact", ("id",), "text"),
    ("sweep-journal", "sweep_journal", ("id",), "before"),
    ("sweep-journal", "sweep_journal", ("id",), "after"),
    ("trigger", "sweep_trigger", ("owner", "id"), "condition"),
    ("stage", "sweep_stage", ("owner", "local_date", "source_generation", "window_id"), "packet"),
)

#: A staged packet's day is in progress when the sweep has claimed a candidate of it and
#: not yet moved the owner's cursor past it: its receipts keep the digests of the stage
#: as it is, so it must not change under them. (``t`` is the stage row.)
BUSY_STAGE = """
EXISTS (SELECT 1 FROM sweep_receipt r
        WHERE r.owner = t.owner AND r.local_date = t.local_date
          AND r.source_generation = t.source_generation)
AND NOT EXISTS (SELECT 1 FROM sweep_cursor c
                WHERE c.owner = t.owner AND c.local_date >= t.local_date)
"""

_ACTIVE_FACTS = (
    "SELECT {columns} FROM sweep_fact WHERE active = 1 AND owner NOT IN"
    " (SELECT id FROM sweep_owner WHERE deleted_at IS NOT NULL) ORDER BY id"
)


def active_facts_sql(columns: str) -> str:
    """The active facts of owners not deleted, by id."""
    return _ACTIVE_FACTS.format(columns=columns)


def read_cells(
    db: Sql, visit: Callable[[TextCell], None], present: Collection[str] | None = None
) -> None:
    """Call ``visit`` with every non-empty sweep text cell, table by table, in key order
    (only of the tables in ``present``, when given: a SQLite file the sweep never ran in)."""
    for kind, table, keys, column in CELLS:
        if present is not None and table not in present:
            continue
        busy = f", {BUSY_STAGE}" if kind == "stage" else f", {db.dialect.false}"
        for row in text_rows(db, table, keys, column, extra=busy):
            key = tuple(row[: len(keys)])
            value = row[len(keys)]
            text = bytes(value).decode("utf-8", "replace") if kind == "stage" else value
            name = "/".join(map(str, key[:2]))
            visit(TextCell(kind, table, column, key, name, text, bool(row[-1])))


def _keys(table: str) -> tuple[str, ...]:
    return next(keys for _, t, keys, _ in CELLS if t == table)


def rewrite_cells(db: Sql, edits: Sequence[tuple[TextCell, str]]) -> list[bool]:
    """Replace each cell's text inside the write transaction the caller has begun, where
    it still holds the text it was read with (and, for a stage, its day is still not in
    progress); per edit, whether it was made."""
    made: list[bool] = []
    for cell, text in edits:
        match = " AND ".join(f"t.{k} = ?" for k in _keys(cell.table))
        if cell.kind == "stage":
            data = text.encode()
            done = db.count(
                f"UPDATE sweep_stage AS t SET packet = ?, digest = ?"
                f" WHERE {match} AND t.packet = ? AND NOT ({BUSY_STAGE})",
                (data, hashlib.sha256(data).hexdigest(), *cell.key, cell.text.encode()),
            )
        else:
            done = db.count(
                f"UPDATE {cell.table} AS t SET {cell.column} = ?"
                f" WHERE {match} AND t.{cell.column} = ?",
                (text, *cell.key, cell.text),
            )
        made.append(done > 0)
    return made
