"""The sweep's SweepStore over SQLite: its own tables in ``<home>/tether.db``.

The sweep keeps its own numbered migration track in ``sweep_schema_version`` (one row),
separate from the main store's ``PRAGMA user_version``, so the two schemas evolve
independently in the same file. ``SWEEP_MIGRATIONS[n]`` takes the sweep tables from
version n to n + 1 in one transaction; append, never edit a shipped script; a newer
version is refused unchanged.

Canonical sweep writes are journalled in ``sweep_journal``, in the same transaction as
the fact or trigger they record, with ``receipt_id UNIQUE``: a retried apply can never add
a second journal entry. (The main store's ``journal_append`` commits on its own
connection, so it cannot share that transaction, and it has no owner column to wipe by.)

Every write transaction is ``BEGIN IMMEDIATE`` with ``synchronous = FULL``: a claim,
apply, completion or cursor advance that returned is on disk.

What the main store's fact mirror and the memory scan need of the sweep is here too
(``facts_stamp``, ``active_facts``, ``read_cells``, ``rewrite_cells``; the SQL in
``sqlite_sweep_cells``), so no other module names a sweep table. Opened with
``migrate=False`` (a reader), a file the sweep never ran in is left without its tables.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from pathlib import Path
from typing import cast

from tether.core.sweep.state import (
    Cursor,
    Fact,
    JournalRow,
    Owner,
    Receipt,
    StagedPacket,
    StandingTrigger,
)
from tether.records import TextCell
from tether.stores import sqlite_sweep_cells as cells
from tether.stores.migrations import migrate
from tether.stores.sqlite_file import SqliteFile, begun, from_iso, iso, tables
from tether.stores.sqlite_sweep_schema import (
    SWEEP_MIGRATIONS,
    _fact,
    _fields,
    _journal,
    _owner,
    _receipt,
    _trigger,
)

BUSY_TIMEOUT_MS = 15_000


def _sweep_version(c: sqlite3.Connection) -> int:
    c.execute("CREATE TABLE IF NOT EXISTS sweep_schema_version (version INTEGER)")
    row = c.execute("SELECT version FROM sweep_schema_version").fetchone()
    return 0 if row is None else int(row[0])


def _set_sweep_version(c: sqlite3.Connection, version: int) -> None:
    c.execute("DELETE FROM sweep_schema_version")
    c.execute("INSERT INTO sweep_schema_version VALUES (?)", (version,))


class SqliteSweepTx:
    """``tether.ports.SweepTx`` on one connection inside an open transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._c = conn

    # -- owners ---------------------------------------------------------------------
    _OWNER = (
        "id, timezone, account_generation, source_generation, receipt_namespace,"
        " first_date, created_at, deleted_at"
    )

    def owner(self, owner_id: str) -> Owner | None:
        row = self._c.execute(
            f"SELECT {self._OWNER} FROM sweep_owner WHERE id = ?", (owner_id,)
        ).fetchone()
        return None if row is None else _owner(row)

    def owners(self) -> list[Owner]:
        rows = self._c.execute(f"SELECT {self._OWNER} FROM sweep_owner ORDER BY id")
        return [_owner(r) for r in rows]

    def put_owner(self, owner: Owner) -> None:
        self._c.execute(
            f"INSERT OR REPLACE INTO sweep_owner ({self._OWNER}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                owner.id,
                owner.timezone_name,
                owner.account_generation,
                owner.source_generation,
                owner.receipt_namespace,
                owner.first_date.isoformat(),
                iso(owner.created_at),
                None if owner.deleted_at is None else iso(owner.deleted_at),
            ),
        )

    def wipe_owner(self, owner_id: str) -> int:
        deleted = 0
        for table in (
            "sweep_fact",
            "sweep_trigger",
            "sweep_journal",
            "sweep_receipt",
            "sweep_cursor",
            "sweep_stage",
        ):
            deleted += self._c.execute(f"DELETE FROM {table} WHERE owner = ?", (owner_id,)).rowcount
        return deleted

    # -- facts and triggers ---------------------------------------------------------
    _FACT = (
        "id, owner, subject, entity, text, authority, refs, origin_receipt, active,"
        " created_at, updated_at, visibility"
    )

    def fact_in_slot(self, owner_id: str, subject: str, entity: str) -> Fact | None:
        row = self._c.execute(
            f"SELECT {self._FACT} FROM sweep_fact"
            " WHERE owner = ? AND subject = ? AND entity = ? AND active = 1",
            (owner_id, subject, entity),
        ).fetchone()
        return None if row is None else _fact(row)

    def put_fact(self, fact: Fact) -> Fact:
        values = (
            fact.owner,
            fact.subject,
            fact.entity,
            fact.text,
            fact.authority,
            fact.refs,
            fact.origin_receipt,
            int(fact.active),
            iso(fact.created_at),
            iso(fact.updated_at),
            fact.visibility,
        )
        if fact.id:
            self._c.execute(
                "UPDATE sweep_fact SET owner = ?, subject = ?, entity = ?, text = ?,"
                " authority = ?, refs = ?, origin_receipt = ?, active = ?, created_at = ?,"
                " updated_at = ?, visibility = ? WHERE id = ?",
                (*values, fact.id),
            )
            return fact
        cur = self._c.execute(
            f"INSERT INTO sweep_fact ({self._FACT.removeprefix('id, ')})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            values,
        )
        return Fact(**{**_fields(fact), "id": cast(int, cur.lastrowid)})

    def facts_stamp(self) -> str:
        return cells.facts_stamp(self._c)

    def active_facts(self) -> list[Fact]:
        return [_fact(r) for r in self._c.execute(cells.active_facts_sql(self._FACT))]

    def facts(self, owner_id: str) -> list[Fact]:
        rows = self._c.execute(
            f"SELECT {self._FACT} FROM sweep_fact WHERE owner = ? ORDER BY id", (owner_id,)
        )
        return [_fact(r) for r in rows]

    _TRIGGER = "owner, id, condition, authority, provenance, active, updated_at"

    def trigger(self, owner_id: str, trigger_id: str) -> StandingTrigger | None:
        row = self._c.execute(
            f"SELECT {self._TRIGGER} FROM sweep_trigger WHERE owner = ? AND id = ?",
            (owner_id, trigger_id),
        ).fetchone()
        return None if row is None else _trigger(row)

    def put_trigger(self, trigger: StandingTrigger) -> None:
        self._c.execute(
            f"INSERT OR REPLACE INTO sweep_trigger ({self._TRIGGER}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                trigger.owner,
                trigger.id,
                trigger.condition,
                trigger.authority,
                trigger.provenance,
                int(trigger.active),
                iso(trigger.updated_at),
            ),
        )

    def triggers(self, owner_id: str) -> list[StandingTrigger]:
        rows = self._c.execute(
            f"SELECT {self._TRIGGER} FROM sweep_trigger WHERE owner = ? ORDER BY id", (owner_id,)
        )
        return [_trigger(r) for r in rows]

    # -- journal --------------------------------------------------------------------
    _JOURNAL = "id, owner, receipt_id, time, who, action, target, before, after, evidence"

    def journal_for(self, receipt_id: str) -> JournalRow | None:
        row = self._c.execute(
            f"SELECT {self._JOURNAL} FROM sweep_journal WHERE receipt_id = ?", (receipt_id,)
        ).fetchone()
        return None if row is None else _journal(row)

    def append_journal(self, row: JournalRow) -> JournalRow:
        cur = self._c.execute(
            "INSERT INTO sweep_journal"
            " (owner, receipt_id, time, who, action, target, before, after, evidence)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.owner,
                row.receipt_id,
                iso(row.time),
                row.who,
                row.action,
                row.target,
                row.before,
                row.after,
                row.evidence,
            ),
        )
        return JournalRow(**{**_fields(row), "id": cast(int, cur.lastrowid)})

    def journal(self, owner_id: str) -> list[JournalRow]:
        rows = self._c.execute(
            f"SELECT {self._JOURNAL} FROM sweep_journal WHERE owner = ? ORDER BY id", (owner_id,)
        )
        return [_journal(r) for r in rows]

    # -- receipts -------------------------------------------------------------------
    _RECEIPT = (
        "id, owner, namespace, local_date, kind, source_key, ordinal, account_generation,"
        " source_generation, digest, state, claimant, lease_until, attempts, outcome, updated_at"
    )

    def receipt(self, receipt_id: str) -> Receipt | None:
        row = self._c.execute(
            f"SELECT {self._RECEIPT} FROM sweep_receipt WHERE id = ?", (receipt_id,)
        ).fetchone()
        return None if row is None else _receipt(row)

    def put_receipt(self, receipt: Receipt) -> None:
        self._c.execute(
            f"INSERT OR REPLACE INTO sweep_receipt ({self._RECEIPT})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                receipt.id,
                receipt.owner,
                receipt.namespace,
                receipt.local_date.isoformat(),
                receipt.kind,
                receipt.source_key,
                receipt.ordinal,
                receipt.account_generation,
                receipt.source_generation,
                receipt.digest,
                receipt.state,
                receipt.claimant,
                iso(receipt.lease_until),
                receipt.attempts,
                receipt.outcome,
                iso(receipt.updated_at),
            ),
        )

    def receipts(self, owner_id: str) -> list[Receipt]:
        rows = self._c.execute(
            f"SELECT {self._RECEIPT} FROM sweep_receipt WHERE owner = ?"
            " ORDER BY local_date, namespace, source_generation, kind, source_key, ordinal, id",
            (owner_id,),
        )
        return [_receipt(r) for r in rows]

    def pending_receipts(
        self, owner_id: str, namespace: int, local_date: date, account_gen: int, source_gen: int
    ) -> int:
        row = self._c.execute(
            "SELECT count(*) FROM sweep_receipt WHERE owner = ? AND namespace = ?"
            " AND local_date = ? AND account_generation = ? AND source_generation = ?"
            " AND state = 'pending'",
            (owner_id, namespace, local_date.isoformat(), account_gen, source_gen),
        ).fetchone()
        return int(row[0])

    # -- cursor and stages ----------------------------------------------------------
    def cursor(self, owner_id: str) -> Cursor | None:
        row = self._c.execute(
            "SELECT owner, timezone, local_date, window_id, window_start, window_end, updated_at"
            " FROM sweep_cursor WHERE owner = ?",
            (owner_id,),
        ).fetchone()
        if row is None:
            return None
        return Cursor(
            owner=row[0],
            timezone_name=row[1],
            local_date=date.fromisoformat(row[2]),
            window_id=row[3],
            window_start_utc=from_iso(row[4]),
            window_end_utc=from_iso(row[5]),
            updated_at=from_iso(row[6]),
        )

    def put_cursor(self, cursor: Cursor) -> None:
        self._c.execute(
            "INSERT OR REPLACE INTO sweep_cursor"
            " (owner, timezone, local_date, window_id, window_start, window_end, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                cursor.owner,
                cursor.timezone_name,
                cursor.local_date.isoformat(),
                cursor.window_id,
                iso(cursor.window_start_utc),
                iso(cursor.window_end_utc),
                iso(cursor.updated_at),
            ),
        )

    def stage(
        self, owner_id: str, local_date: date, source_gen: int, window_id: str
    ) -> StagedPacket | None:
        row = self._c.execute(
            "SELECT digest, packet, created_at FROM sweep_stage WHERE owner = ?"
            " AND local_date = ? AND source_generation = ? AND window_id = ?",
            (owner_id, local_date.isoformat(), source_gen, window_id),
        ).fetchone()
        if row is None:
            return None
        return StagedPacket(
            owner=owner_id,
            local_date=local_date,
            source_generation=source_gen,
            window_id=window_id,
            digest=row[0],
            packet=bytes(row[1]),
            created_at=from_iso(row[2]),
        )

    def put_stage(self, staged: StagedPacket) -> None:
        self._c.execute(
            "INSERT OR IGNORE INTO sweep_stage"
            " (owner, local_date, source_generation, window_id, digest, packet, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                staged.owner,
                staged.local_date.isoformat(),
                staged.source_generation,
                staged.window_id,
                staged.digest,
                staged.packet,
                iso(staged.created_at),
            ),
        )


class SqliteSweepStore(SqliteFile):
    """``tether.ports.SweepStore`` over ``<home>/tether.db`` (or any path). One connection
    guarded by a lock; other processes may use the same file at the same time."""

    busy_timeout_ms = BUSY_TIMEOUT_MS

    def __init__(self, path: Path | str, *, migrate: bool = True) -> None:
        self._migrates = migrate
        super().__init__(path)

    def _setup(self) -> None:
        with self._errors("cannot open the sweep store"):
            c = self._c()
            self._busy_timeout_and_wal(c)
            c.execute("PRAGMA synchronous = FULL")
        if not self._migrates:
            return  # a reader (recall, memory scan): a file the sweep never ran in stays so
        migrate(
            self.path,
            self._migrating,
            SWEEP_MIGRATIONS,
            version=_sweep_version,
            set_version=_set_sweep_version,
        )

    @contextlib.contextmanager
    def _migrating(self) -> Iterator[sqlite3.Connection]:
        with self._errors("migrating the sweep schema"), self._lock:
            c = self._c()
            with begun(c):
                yield c

    def schema_version(self) -> int:
        with self.transaction(write=False) as tx:
            row = tx._c.execute("SELECT version FROM sweep_schema_version").fetchone()
        return int(row[0])

    def journal_rows(self, limit: int | None = None) -> list[JournalRow]:
        sql = f"SELECT {SqliteSweepTx._JOURNAL} FROM sweep_journal"
        with self._lock, self._errors("reading the sweep journal"):
            c = self._c()
            if "sweep_journal" not in tables(c):
                return []  # a reader on a file the sweep never ran in
            if limit is None:
                return [_journal(r) for r in c.execute(sql + " ORDER BY id")]
            rows = c.execute(sql + " ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
            return [_journal(r) for r in reversed(rows)]

    def read_cells(self, visit: Callable[[TextCell], None]) -> None:
        with self._lock, self._errors("reading the sweep's text"):
            cells.read_cells(self._c(), visit)

    def rewrite_cells(self, edits: Sequence[tuple[TextCell, str]]) -> tuple[list[bool], bool]:
        self._secure_delete(True)  # the old text is zeroed, not just freed
        try:
            with self.transaction() as tx:
                made = cells.rewrite_cells(tx._c, edits)
        finally:
            self._secure_delete(False)
        return made, self._truncate_wal()

    @contextlib.contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[SqliteSweepTx]:
        """``BEGIN IMMEDIATE`` (or a deferred read snapshot), committed at the end of the
        block, rolled back on any exception (which propagates)."""
        with self._lock, self._errors("sweep transaction"):
            c = self._c()
            with begun(c, "BEGIN IMMEDIATE" if write else "BEGIN"):
                yield SqliteSweepTx(c)
