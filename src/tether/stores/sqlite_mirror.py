"""Index rows mirrored from sources the main store does not own: identity entries
(``memory/memory.md``) and the daily sweep's active facts (the ``SweepStore``'s).

Design: recall-time sync, not writes from the sources' own paths. Before a recall, a
cheap check compares a stamp of the source with the one stored in ``mirror`` when it was
last indexed: memory.md's sha256 (it is small; a hash also catches an owner's hand edit
that keeps size and mtime), and the sweep's fact change stamp (``SweepTx.facts_stamp``).
The caller (``memory.identity``, ``memory.facts``) reads the source, redacts it and hands
the rows here; every row of that kind is replaced, with the new stamp, in one
transaction. This module knows only the main store's tables. Identity rows are trusted by
construction (the owner's file); facts are trusted (a ``Fact`` carries no untrusted flag).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from tether.core import symbols
from tether.core.memory_block import Entry
from tether.core.sweep.state import Fact
from tether.stores.dialect import EPOCH, MICRO
from tether.stores.sqlite_search import unindex


def stamp(c: sqlite3.Connection, name: str) -> str | None:
    row = c.execute("SELECT value FROM mirror WHERE name = ?", (name,)).fetchone()
    return None if row is None else str(row[0])


def _micros(time: datetime) -> int:
    return (time.astimezone(UTC) - EPOCH) // MICRO


def _replace(
    c: sqlite3.Connection,
    kind: str,
    rows: Iterable[tuple[str, str, int]],
    name: str,
    value: str,
) -> None:
    """Replace every index row of ``kind`` with ``rows`` (ref, text, time in
    microseconds), keep ``doc_rows`` in step, and store the source's new stamp."""
    removed = unindex(c, "kind = ?", (kind,))
    first = int(c.execute("SELECT coalesce(max(id), 0) + 1 FROM doc").fetchone()[0])
    new = [(kind, ref, time, text, symbols.seg(text)) for ref, text, time in rows]
    c.executemany(
        "INSERT INTO doc (kind, tainted, ref, time, text, seg) VALUES (?, 0, ?, ?, ?, ?)", new
    )
    c.execute(
        "INSERT INTO doc_fts (rowid, body, aside) SELECT id, body, aside FROM doc WHERE id >= ?",
        (first,),
    )
    delta = len(new) - removed
    if delta:
        c.execute("UPDATE stat SET value = value + ? WHERE name = 'doc_rows'", (delta,))
    c.execute(
        "INSERT INTO mirror (name, value) VALUES (?, ?)"
        " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (name, value),
    )


def replace_identity(
    c: sqlite3.Connection, entries: Sequence[Entry], value: str, time: datetime
) -> None:
    """Index ``entries`` as the identity rows (``identity:<entry id>``), stamped ``value``."""
    at = _micros(time)
    _replace(c, "identity", ((f"identity:{e.id}", e.text, at) for e in entries), "identity", value)


def replace_facts(c: sqlite3.Connection, facts: Sequence[Fact], value: str) -> None:
    """Index ``facts`` as the fact rows (``fact:<id>``), stamped ``value``."""
    rows = [(f"fact:{f.id}", f.text, _micros(f.updated_at)) for f in facts]
    _replace(c, "fact", rows, "facts", value)
