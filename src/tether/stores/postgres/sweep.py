"""The sweep's SweepStore over PostgreSQL: the sweep tables in the owner's schema, on
their own migration track (``postgres.sweep_schema.SWEEP``) beside the main store's.

The transaction's reads and writes are ``sweep.SweepTx``, written once for both stores;
what is here is the connection: the owner's schema, the pool, the transactions.

Transactions: a write transaction is READ COMMITTED and locks each sweep owner it touches
(a transaction-level advisory lock, ``SweepTx._owner_lock``) before its first read of
that owner, so two runners on one owner take turns and everything a transaction read of
its owner stays true until it commits (what SQLite's ``BEGIN IMMEDIATE`` gives), while
runners on different owners never wait on each other. A read transaction is a REPEATABLE
READ snapshot. The constraints that make the sweep idempotent are the same as SQLite's:
``sweep_journal.receipt_id`` UNIQUE, one active fact per slot, receipts and stages keyed.

A failure inside a transaction's block rolls it back and is reported (``StoreError``):
the block is the caller's and cannot be re-run here; the sweep's receipts make the
caller's retry safe. The owner-day claims of sweep workers are ``postgres.sweep_claims``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg

from tether.core.sweep.state import JournalRow
from tether.records import TextCell
from tether.stores import sweep_cells as cells
from tether.stores.dialect import POSTGRES, Sql
from tether.stores.postgres.conn import PgPool, PgStore
from tether.stores.postgres.sweep_claims import PostgresClaims
from tether.stores.postgres.sweep_schema import SWEEP
from tether.stores.postgres.sweep_stage import PostgresModelStages
from tether.stores.sweep import OWNER_TABLES, SweepTx

#: An owner's sweep state here: the model stage of sweep workers too.
_OWNER_TABLES = (*OWNER_TABLES, "sweep_model_stage")

Conn = psycopg.Connection[Any]


class PostgresSweepStore:
    """``tether.ports.SweepStore`` (and ``ClaimingStore``) in one owner's schema of a
    PostgreSQL database."""

    def __init__(
        self, url: str, owner: str, *, migrate: bool = True, pool: PgPool | None = None
    ) -> None:
        self.pg = PgStore(url, owner, migrate=migrate, pool=pool)
        self.path = self.pg.where
        try:
            self.level = self.pg.track_level(SWEEP, migrate=migrate)
        except BaseException:
            self.pg.close()
            raise

    def close(self) -> None:
        self.pg.close()

    def __enter__(self) -> PostgresSweepStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schema_version(self) -> int:
        """The sweep's own migration level (not the main store's)."""
        return self.level

    @contextlib.contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[SweepTx]:
        with self.pg.transaction("sweep transaction", write=write) as c:
            yield self._tx(c, write=write)

    def _tx(self, conn: Conn, *, write: bool) -> SweepTx:
        return SweepTx(
            Sql(conn, POSTGRES), write=write, lock_prefix=self.pg.schema, owner_tables=_OWNER_TABLES
        )

    def journal_rows(self, limit: int | None = None) -> list[JournalRow]:
        return self.pg.run(
            "reading the sweep journal",
            lambda conn: self._tx(conn, write=False).journal_rows(limit),
            write=False,
        )

    def read_cells(self, visit: Callable[[TextCell], None]) -> None:
        self.pg.run(
            "reading the sweep's text",
            lambda conn: cells.read_cells(Sql(conn, POSTGRES), visit),
            write=False,
        )

    def rewrite_cells(self, edits: Sequence[tuple[TextCell, str]]) -> tuple[list[bool], bool]:
        """As on SQLite; the server's WAL is not ours to truncate (always False)."""
        with self.transaction() as tx:
            made = cells.rewrite_cells(tx.db, edits)
        return made, False

    def model_stages(self) -> PostgresModelStages:
        """The model pass's stage in this owner's schema (a sweep worker's)."""
        return PostgresModelStages(self.pg)

    def claims(self) -> PostgresClaims:
        """The owner-day claims of sweep workers, in this owner's schema."""
        return PostgresClaims(self.pg)
