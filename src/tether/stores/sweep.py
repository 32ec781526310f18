"""The sweep's ``SweepTx`` written once over both stores (``dialect.Sql``), with the
decoding of its rows.

The constraints that make the sweep idempotent are the schema's, alike on both backends:
``sweep_journal.receipt_id`` UNIQUE (a retried apply can never add a second journal
entry), one active fact per slot, receipts and stages keyed. What a write transaction
read of an owner stays true until it commits: SQLite's ``BEGIN IMMEDIATE`` holds the
file; on PostgreSQL (READ COMMITTED) each owner it touches is locked first
(``SweepTx._owner_lock``, a transaction-level advisory lock), so runners on one owner
take turns while runners on different owners never wait on each other.

The stores (``sqlite.sweep``, ``postgres.sweep``) open connections, begin and end the
transactions and migrate the tables; nothing here knows which backend it runs on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from tether.core.sweep.state import (
    Cursor,
    Fact,
    JournalRow,
    Owner,
    Receipt,
    StagedPacket,
    StandingTrigger,
)
from tether.stores.dialect import Sql, columns, from_iso, iso, opt_from_iso, upsert
from tether.stores.sweep_cells import active_facts_sql

#: The tables of an owner's sweep state (``wipe_owner``); PostgreSQL adds the model
#: stage of its sweep workers (``postgres.sweep_stage``).
OWNER_TABLES = (
    "sweep_fact",
    "sweep_trigger",
    "sweep_journal",
    "sweep_receipt",
    "sweep_cursor",
    "sweep_stage",
)
_CURSOR = "owner, timezone, local_date, window_id, window_start, window_end, updated_at"


class SweepTx:
    """``tether.ports.SweepTx`` on one connection inside an open transaction (``db``). In
    a write transaction every owner it touches is locked first (``_owner_lock``), so what
    it read of that owner stays true until it commits; ``lock_prefix`` keys the owners'
    locks (on PostgreSQL, the schema's name: advisory locks span the database)."""

    def __init__(
        self,
        db: Sql,
        *,
        write: bool,
        lock_prefix: str = "",
        owner_tables: tuple[str, ...] = OWNER_TABLES,
    ) -> None:
        self.db = db
        self._write = write
        self._lock_prefix = lock_prefix
        self._owner_tables = owner_tables

    def _owner_lock(self, owner_id: str) -> None:
        if self._write:
            self.db.hold(f"{self._lock_prefix}/owner/{owner_id}")

    # -- owners ---------------------------------------------------------------------
    _OWNER = (
        "id, timezone, account_generation, source_generation, receipt_namespace,"
        " first_date, created_at, deleted_at"
    )

    def owner(self, owner_id: str) -> Owner | None:
        self._owner_lock(owner_id)
        row = self.db.execute(
            f"SELECT {self._OWNER} FROM sweep_owner WHERE id = ?", (owner_id,)
        ).fetchone()
        return None if row is None else owner_row(row)

    def owners(self) -> list[Owner]:
        rows = self.db.execute(f"SELECT {self._OWNER} FROM sweep_owner ORDER BY id")
        return [owner_row(r) for r in rows]

    def put_owner(self, owner: Owner) -> None:
        self._owner_lock(owner.id)
        self.db.execute(
            upsert("sweep_owner", columns(self._OWNER), ("id",)),
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
        self._owner_lock(owner_id)
        return sum(
            self.db.count(f"DELETE FROM {table} WHERE owner = ?", (owner_id,))
            for table in self._owner_tables
        )

    # -- facts and triggers ---------------------------------------------------------
    _FACT = (
        "id, owner, subject, entity, text, authority, refs, origin_receipt, active,"
        " created_at, updated_at, visibility"
    )

    def fact_in_slot(self, owner_id: str, subject: str, entity: str) -> Fact | None:
        self._owner_lock(owner_id)
        row = self.db.execute(
            f"SELECT {self._FACT} FROM sweep_fact"
            " WHERE owner = ? AND subject = ? AND entity = ? AND active = 1",
            (owner_id, subject, entity),
        ).fetchone()
        return None if row is None else fact_row(row)

    def put_fact(self, fact: Fact) -> Fact:
        self._owner_lock(fact.owner)
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
            self.db.execute(
                "UPDATE sweep_fact SET owner = ?, subject = ?, entity = ?, text = ?,"
                " authority = ?, refs = ?, origin_receipt = ?, active = ?, created_at = ?,"
                " updated_at = ?, visibility = ? WHERE id = ?",
                (*values, fact.id),
            )
            return fact
        row = self.db.execute(
            f"INSERT INTO sweep_fact ({self._FACT.removeprefix('id, ')})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            values,
        ).fetchone()
        assert row is not None
        return Fact(**{**fields(fact), "id": int(row[0])})

    def facts_stamp(self) -> str:
        """The fact change counters' sum as text (triggers move them on every write of a
        fact or an owner: one row on SQLite, one per owner on PostgreSQL)."""
        row = self.db.one("SELECT coalesce(sum(n), 0) FROM sweep_fact_change")
        return str(int(row[0]) if row else 0)

    def active_facts(self) -> list[Fact]:
        return [fact_row(r) for r in self.db.all(active_facts_sql(self._FACT))]

    def facts(self, owner_id: str) -> list[Fact]:
        self._owner_lock(owner_id)
        rows = self.db.execute(
            f"SELECT {self._FACT} FROM sweep_fact WHERE owner = ? ORDER BY id", (owner_id,)
        )
        return [fact_row(r) for r in rows]

    _TRIGGER = "owner, id, condition, authority, provenance, active, updated_at"

    def trigger(self, owner_id: str, trigger_id: str) -> StandingTrigger | None:
        self._owner_lock(owner_id)
        row = self.db.execute(
            f"SELECT {self._TRIGGER} FROM sweep_trigger WHERE owner = ? AND id = ?",
            (owner_id, trigger_id),
        ).fetchone()
        return None if row is None else trigger_row(row)

    def put_trigger(self, trigger: StandingTrigger) -> None:
        self._owner_lock(trigger.owner)
        self.db.execute(
            upsert("sweep_trigger", columns(self._TRIGGER), ("owner", "id")),
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
        self._owner_lock(owner_id)
        rows = self.db.execute(
            f"SELECT {self._TRIGGER} FROM sweep_trigger WHERE owner = ? ORDER BY id", (owner_id,)
        )
        return [trigger_row(r) for r in rows]

    # -- journal --------------------------------------------------------------------
    _JOURNAL = "id, owner, receipt_id, time, who, action, target, before, after, evidence"

    def journal_for(self, receipt_id: str) -> JournalRow | None:
        row = self.db.execute(
            f"SELECT {self._JOURNAL} FROM sweep_journal WHERE receipt_id = ?", (receipt_id,)
        ).fetchone()
        return None if row is None else journal_row(row)

    def append_journal(self, row: JournalRow) -> JournalRow:
        self._owner_lock(row.owner)
        found = self.db.execute(
            "INSERT INTO sweep_journal"
            " (owner, receipt_id, time, who, action, target, before, after, evidence)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
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
        ).fetchone()
        assert found is not None
        return JournalRow(**{**fields(row), "id": int(found[0])})

    def journal_rows(self, limit: int | None = None) -> list[JournalRow]:
        """Every owner's journal, oldest first (the last ``limit`` rows, when given)."""
        sql = f"SELECT {self._JOURNAL} FROM sweep_journal"
        if limit is None:
            return [journal_row(r) for r in self.db.all(sql + " ORDER BY id")]
        rows = self.db.all(sql + " ORDER BY id DESC LIMIT ?", (limit,))
        return [journal_row(r) for r in reversed(rows)]

    def journal(self, owner_id: str) -> list[JournalRow]:
        self._owner_lock(owner_id)
        rows = self.db.execute(
            f"SELECT {self._JOURNAL} FROM sweep_journal WHERE owner = ? ORDER BY id", (owner_id,)
        )
        return [journal_row(r) for r in rows]

    # -- receipts -------------------------------------------------------------------
    _RECEIPT = (
        "id, owner, namespace, local_date, kind, source_key, ordinal, account_generation,"
        " source_generation, digest, state, claimant, lease_until, attempts, outcome, updated_at"
    )

    def receipt(self, receipt_id: str) -> Receipt | None:
        row = self.db.execute(
            f"SELECT {self._RECEIPT} FROM sweep_receipt WHERE id = ?", (receipt_id,)
        ).fetchone()
        return None if row is None else receipt_row(row)

    def put_receipt(self, receipt: Receipt) -> None:
        self._owner_lock(receipt.owner)
        self.db.execute(
            upsert("sweep_receipt", columns(self._RECEIPT), ("id",)),
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
        self._owner_lock(owner_id)
        rows = self.db.execute(
            f"SELECT {self._RECEIPT} FROM sweep_receipt WHERE owner = ?"
            " ORDER BY local_date, namespace, source_generation, kind, source_key, ordinal, id",
            (owner_id,),
        )
        return [receipt_row(r) for r in rows]

    def pending_receipts(
        self, owner_id: str, namespace: int, local_date: date, account_gen: int, source_gen: int
    ) -> int:
        self._owner_lock(owner_id)
        row = self.db.execute(
            "SELECT count(*) FROM sweep_receipt WHERE owner = ? AND namespace = ?"
            " AND local_date = ? AND account_generation = ? AND source_generation = ?"
            " AND state = 'pending'",
            (owner_id, namespace, local_date.isoformat(), account_gen, source_gen),
        ).fetchone()
        return int(row[0])

    # -- cursor and stages ----------------------------------------------------------
    def cursor(self, owner_id: str) -> Cursor | None:
        self._owner_lock(owner_id)
        row = self.db.execute(
            f"SELECT {_CURSOR} FROM sweep_cursor WHERE owner = ?",
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
        self._owner_lock(cursor.owner)
        self.db.execute(
            upsert("sweep_cursor", columns(_CURSOR), ("owner",)),
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
        self._owner_lock(owner_id)
        row = self.db.execute(
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
        self._owner_lock(staged.owner)
        self.db.execute(
            "INSERT INTO sweep_stage"
            " (owner, local_date, source_generation, window_id, digest, packet, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
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


def fields(struct: Any) -> dict[str, Any]:
    return {f: getattr(struct, f) for f in struct.__struct_fields__}


def owner_row(row: Sequence[Any]) -> Owner:
    return Owner(
        id=row[0],
        timezone_name=row[1],
        account_generation=row[2],
        source_generation=row[3],
        receipt_namespace=row[4],
        first_date=date.fromisoformat(row[5]),
        created_at=from_iso(row[6]),
        deleted_at=opt_from_iso(row[7]),
    )


def fact_row(row: Sequence[Any]) -> Fact:
    return Fact(
        id=row[0],
        owner=row[1],
        subject=row[2],
        entity=row[3],
        text=row[4],
        authority=row[5],
        refs=row[6],
        origin_receipt=row[7],
        active=bool(row[8]),
        created_at=from_iso(row[9]),
        updated_at=from_iso(row[10]),
        visibility=row[11],
    )


def trigger_row(row: Sequence[Any]) -> StandingTrigger:
    return StandingTrigger(
        owner=row[0],
        id=row[1],
        condition=row[2],
        authority=row[3],
        provenance=row[4],
        active=bool(row[5]),
        updated_at=from_iso(row[6]),
    )


def journal_row(row: Sequence[Any]) -> JournalRow:
    return JournalRow(
        id=row[0],
        owner=row[1],
        receipt_id=row[2],
        time=from_iso(row[3]),
        who=row[4],
        action=row[5],
        target=row[6],
        before=row[7],
        after=row[8],
        evidence=row[9],
    )


def receipt_row(row: Sequence[Any]) -> Receipt:
    return Receipt(
        id=row[0],
        owner=row[1],
        namespace=row[2],
        local_date=date.fromisoformat(row[3]),
        kind=row[4],
        source_key=row[5],
        ordinal=row[6],
        account_generation=row[7],
        source_generation=row[8],
        digest=row[9],
        state=row[10],
        claimant=row[11],
        lease_until=from_iso(row[12]),
        attempts=row[13],
        outcome=row[14],
        updated_at=from_iso(row[15]),
    )
