"""The sweep's stored text in PostgreSQL, cell by cell, for ``tether memory scan``: the
same cells and rules as ``sqlite_sweep_cells`` (facts, the sweep journal's before/after,
trigger conditions, staged packets; a stage only while its day is not in progress, its
digest following its bytes)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from tether.records import TextCell
from tether.stores.postgres_cells import text_rows
from tether.stores.sqlite_sweep_cells import BUSY_STAGE, CELLS

Conn = psycopg.Connection[Any]


def read_cells(c: Conn, visit: Callable[[TextCell], None]) -> None:
    for kind, table, keys, column in CELLS:
        busy = f", {BUSY_STAGE}" if kind == "stage" else ", false"
        for row in text_rows(c, table, keys, column, extra=busy):
            key = tuple(row[: len(keys)])
            value = row[len(keys)]
            body = bytes(value).decode("utf-8", "replace") if kind == "stage" else value
            name = "/".join(map(str, key[:2]))
            visit(TextCell(kind, table, column, key, name, body, bool(row[-1])))


def _keys(table: str) -> tuple[str, ...]:
    return next(keys for _, t, keys, _ in CELLS if t == table)


def rewrite_cells(c: Conn, edits: Sequence[tuple[TextCell, str]]) -> list[bool]:
    made: list[bool] = []
    for cell, new in edits:
        match = " AND ".join(f"t.{k} = %s" for k in _keys(cell.table))
        if cell.kind == "stage":
            data = new.encode()
            done = c.execute(
                f"UPDATE sweep_stage AS t SET packet = %s, digest = %s"
                f" WHERE {match} AND t.packet = %s AND NOT ({BUSY_STAGE})",
                (data, hashlib.sha256(data).hexdigest(), *cell.key, cell.text.encode()),
            )
        else:
            done = c.execute(
                f"UPDATE {cell.table} AS t SET {cell.column} = %s"
                f" WHERE {match} AND t.{cell.column} = %s",
                (new, *cell.key, cell.text),
            )
        made.append(done.rowcount > 0)
    return made
