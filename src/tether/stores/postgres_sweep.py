"""The sweep's SweepStore over PostgreSQL: the sweep tables in the owner's schema
(``postgres_schema``; one migration track with the main store's).

Transactions: a write transaction is READ COMMITTED and locks each sweep owner it touches
(a transaction-level advisory lock, ``PostgresSweepTx._hold``) before its first read of
that owner, so two runners on one owner take turns and everything a transaction read of
its owner stays true until it commits (what SQLite's ``BEGIN IMMEDIATE`` gives), while
runners on different owners never wait on each other. A read transaction is a REPEATABLE
READ snapshot. The constraints that make the sweep idempotent are the same as SQLite's:
``sweep_journal.receipt_id`` UNIQUE, one active fact per slot, receipts and stages keyed.

A failure inside a transaction's block rolls it back and is reported (``StoreError``):
the block is the caller's and cannot be re-run here; the sweep's receipts make the
caller's retry safe. The owner-day claims of sweep workers are ``postgres_sweep_claims``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from typing import Any

import psycopg

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
from tether.stores import postgres_sweep_cells as cells
from tether.stores.postgres_conn import PgPool, PgStore
from tether.stores.postgres_sweep_claims import PostgresClaims
from tether.stores.postgres_sweep_stage import PostgresModelStages
from tether.stores.sqlite_file import from_iso, iso
from tether.stores.sqlite_sweep_cells import active_facts_sql
from tether.stores.sqlite_sweep_schema import (
    _fact,
    _fields,
    _journal,
    _owner,
    _receipt,
    _trigger,
)

Conn = psycopg.Connection[Any]


def _sets(columns: str, keys: int = 1) -> str:
    """``col = excluded.col`` for every column after the first ``keys`` (the key)."""
    names = [c.strip() for c in columns.split(",")][keys:]
    return ", ".join(f"{n} = excluded.{n}" for n in names)


class PostgresSweepTx:
    """``tether.ports.SweepTx`` on one connection inside an open transaction. In a write
    transaction every owner it touches is locked first (``_hold``), so what it read of
    that owner stays true until it commits, as under SQLite's ``BEGIN IMMEDIATE``."""

    def __init__(self, conn: Conn, schema: str, *, write: bool) -> None:
        self._c = conn
        self._schema = schema
        self._write = write
        self._held: set[str] = set()

    def _hold(self, owner_id: str) -> None:
        if self._write and owner_id not in self._held:
            self._c.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"{self._schema}/owner/{owner_id}",),
            )
            self._held.add(owner_id)

    # -- owners ---------------------------------------------------------------------
    _OWNER = (
        "id, timezone, account_generation, source_generation, receipt_namespace,"
        " first_date, created_at, deleted_at"
    )

    def owner(self, owner_id: str) -> Owner | None:
        self._hold(owner_id)
        row = self._c.execute(
            f"SELECT {self._OWNER} FROM sweep_owner WHERE id = %s", (owner_id,)
        ).fetchone()
        return None if row is None else _owner(row)

    def owners(self) -> list[Owner]:
        rows = self._c.execute(f"SELECT {self._OWNER} FROM sweep_owner ORDER BY id")
        return [_owner(r) for r in rows]

    def put_owner(self, owner: Owner) -> None:
        self._hold(owner.id)
        self._c.execute(
            f"INSERT INTO sweep_owner ({self._OWNER}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            f" ON CONFLICT (id) DO UPDATE SET {_sets(self._OWNER)}",
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
        self._hold(owner_id)
        deleted = 0
        for table in (
            "sweep_fact",
            "sweep_trigger",
            "sweep_journal",
            "sweep_receipt",
            "sweep_cursor",
            "sweep_stage",
            "sweep_model_stage",
        ):
            deleted += self._c.execute(
                f"DELETE FROM {table} WHERE owner = %s", (owner_id,)
            ).rowcount
        return deleted

    # -- facts and triggers ---------------------------------------------------------
    _FACT = (
        "id, owner, subject, entity, text, authority, refs, origin_receipt, active,"
        " created_at, updated_at, visibility"
    )

    def fact_in_slot(self, owner_id: str, subject: str, entity: str) -> Fact | None:
        self._hold(owner_id)
        row = self._c.execute(
            f"SELECT {self._FACT} FROM sweep_fact"
            " WHERE owner = %s AND subject = %s AND entity = %s AND active = 1",
            (owner_id, subject, entity),
        ).fetchone()
        return None if row is None else _fact(row)

    def put_fact(self, fact: Fact) -> Fact:
        self._hold(fact.owner)
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
                "UPDATE sweep_fact SET owner = %s, subject = %s, entity = %s, text = %s,"
                " authority = %s, refs = %s, origin_receipt = %s, active = %s, created_at = %s,"
                " updated_at = %s, visibility = %s WHERE id = %s",
                (*values, fact.id),
            )
            return fact
        row = self._c.execute(
            f"INSERT INTO sweep_fact ({self._FACT.removeprefix('id, ')})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            values,
        ).fetchone()
        assert row is not None
        return Fact(**{**_fields(fact), "id": int(row[0])})

    def facts_stamp(self) -> str:
        row = self._c.execute("SELECT coalesce(sum(n), 0) FROM sweep_fact_change").fetchone()
        return str(int(row[0]) if row else 0)

    def active_facts(self) -> list[Fact]:
        return [_fact(r) for r in self._c.execute(active_facts_sql(self._FACT)).fetchall()]

    def facts(self, owner_id: str) -> list[Fact]:
        self._hold(owner_id)
        rows = self._c.execute(
            f"SELECT {self._FACT} FROM sweep_fact WHERE owner = %s ORDER BY id", (owner_id,)
        )
        return [_fact(r) for r in rows]

    _TRIGGER = "owner, id, condition, authority, provenance, active, updated_at"

    def trigger(self, owner_id: str, trigger_id: str) -> StandingTrigger | None:
        self._hold(owner_id)
        row = self._c.execute(
            f"SELECT {self._TRIGGER} FROM sweep_trigger WHERE owner = %s AND id = %s",
            (owner_id, trigger_id),
        ).fetchone()
        return None if row is None else _trigger(row)

    def put_trigger(self, trigger: StandingTrigger) -> None:
        self._hold(trigger.owner)
        self._c.execute(
            f"INSERT INTO sweep_trigger ({self._TRIGGER}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
            f" ON CONFLICT (owner, id) DO UPDATE SET {_sets(self._TRIGGER, 2)}",
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
        self._hold(owner_id)
        rows = self._c.execute(
            f"SELECT {self._TRIGGER} FROM sweep_trigger WHERE owner = %s ORDER BY id", (owner_id,)
        )
        return [_trigger(r) for r in rows]

    # -- journal --------------------------------------------------------------------
    _JOURNAL = "id, owner, receipt_id, time, who, action, target, before, after, evidence"

    def journal_for(self, receipt_id: str) -> JournalRow | None:
        row = self._c.execute(
            f"SELECT {self._JOURNAL} FROM sweep_journal WHERE receipt_id = %s", (receipt_id,)
        ).fetchone()
        return None if row is None else _journal(row)

    def append_journal(self, row: JournalRow) -> JournalRow:
        self._hold(row.owner)
        found = self._c.execute(
            "INSERT INTO sweep_journal"
            " (owner, receipt_id, time, who, action, target, before, after, evidence)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
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
        return JournalRow(**{**_fields(row), "id": int(found[0])})

    def journal(self, owner_id: str) -> list[JournalRow]:
        self._hold(owner_id)
        rows = self._c.execute(
            f"SELECT {self._JOURNAL} FROM sweep_journal WHERE owner = %s ORDER BY id", (owner_id,)
        )
        return [_journal(r) for r in rows]

    # -- receipts -------------------------------------------------------------------
    _RECEIPT = (
        "id, owner, namespace, local_date, kind, source_key, ordinal, account_generation,"
        " source_generation, digest, state, claimant, lease_until, attempts, outcome, updated_at"
    )

    def receipt(self, receipt_id: str) -> Receipt | None:
        row = self._c.execute(
            f"SELECT {self._RECEIPT} FROM sweep_receipt WHERE id = %s", (receipt_id,)
        ).fetchone()
        return None if row is None else _receipt(row)

    def put_receipt(self, receipt: Receipt) -> None:
        self._hold(receipt.owner)
        self._c.execute(
            f"INSERT INTO sweep_receipt ({self._RECEIPT})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            f" ON CONFLICT (id) DO UPDATE SET {_sets(self._RECEIPT)}",
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
        self._hold(owner_id)
        rows = self._c.execute(
            f"SELECT {self._RECEIPT} FROM sweep_receipt WHERE owner = %s"
            " ORDER BY local_date, namespace, source_generation, kind, source_key, ordinal, id",
            (owner_id,),
        )
        return [_receipt(r) for r in rows]

    def pending_receipts(
        self, owner_id: str, namespace: int, local_date: date, account_gen: int, source_gen: int
    ) -> int:
        self._hold(owner_id)
        row = self._c.execute(
            "SELECT count(*) FROM sweep_receipt WHERE owner = %s AND namespace = %s"
            " AND local_date = %s AND account_generation = %s AND source_generation = %s"
            " AND state = 'pending'",
            (owner_id, namespace, local_date.isoformat(), account_gen, source_gen),
        ).fetchone()
        return int(row[0]) if row else 0

    # -- cursor and stages ----------------------------------------------------------
    def cursor(self, owner_id: str) -> Cursor | None:
        self._hold(owner_id)
        row = self._c.execute(
            "SELECT owner, timezone, local_date, window_id, window_start, window_end, updated_at"
            " FROM sweep_cursor WHERE owner = %s",
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
        self._hold(cursor.owner)
        cols = "owner, timezone, local_date, window_id, window_start, window_end, updated_at"
        self._c.execute(
            f"INSERT INTO sweep_cursor ({cols}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
            f" ON CONFLICT (owner) DO UPDATE SET {_sets(cols)}",
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
        self._hold(owner_id)
        row = self._c.execute(
            "SELECT digest, packet, created_at FROM sweep_stage WHERE owner = %s"
            " AND local_date = %s AND source_generation = %s AND window_id = %s",
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
        self._hold(staged.owner)
        self._c.execute(
            "INSERT INTO sweep_stage"
            " (owner, local_date, source_generation, window_id, digest, packet, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
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


class PostgresSweepStore:
    """``tether.ports.SweepStore`` (and ``ClaimingStore``) in one owner's schema of a
    PostgreSQL database."""

    def __init__(
        self, url: str, owner: str, *, migrate: bool = True, pool: PgPool | None = None
    ) -> None:
        self.pg = PgStore(url, owner, migrate=migrate, pool=pool)
        self.path = self.pg.where

    def close(self) -> None:
        self.pg.close()

    def __enter__(self) -> PostgresSweepStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schema_version(self) -> int:
        return self.pg.level

    @contextlib.contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[PostgresSweepTx]:
        with self.pg.transaction("sweep transaction", write=write) as c:
            yield PostgresSweepTx(c, self.pg.schema, write=write)

    def journal_rows(self, limit: int | None = None) -> list[JournalRow]:
        sql = f"SELECT {PostgresSweepTx._JOURNAL} FROM sweep_journal"

        def work(c: Conn) -> list[JournalRow]:
            if limit is None:
                return [_journal(r) for r in c.execute(sql + " ORDER BY id").fetchall()]
            rows = c.execute(sql + " ORDER BY id DESC LIMIT %s", (limit,)).fetchall()
            return [_journal(r) for r in reversed(rows)]

        return self.pg.run("reading the sweep journal", work, write=False)

    def read_cells(self, visit: Callable[[TextCell], None]) -> None:
        self.pg.run("reading the sweep's text", lambda c: cells.read_cells(c, visit), write=False)

    def rewrite_cells(self, edits: Sequence[tuple[TextCell, str]]) -> tuple[list[bool], bool]:
        """As on SQLite; the server's WAL is not ours to truncate (always False)."""
        with self.transaction() as tx:
            made = cells.rewrite_cells(tx._c, edits)
        return made, False

    def model_stages(self) -> PostgresModelStages:
        """The model pass's stage in this owner's schema (a sweep worker's)."""
        return PostgresModelStages(self.pg)

    def claims(self) -> PostgresClaims:
        """The owner-day claims of sweep workers, in this owner's schema."""
        return PostgresClaims(self.pg)
