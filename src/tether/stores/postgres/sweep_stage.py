"""The model pass's stage in PostgreSQL (``sweep_model_stage``): ``tether.ports.ModelStages``
for a sweep worker, which has no home to keep stage files in.

One row per owner-day holding the current record (``sweep.stage`` encodes, reads and
fences it). ``mark`` inserts the ``invoked`` record and commits before the first model
request (a committed transaction is durable; a second runner's insert finds the row and
gets False, so never invokes); ``replace`` and ``remove`` change the row only while it
holds exactly the record the caller read (compare and swap), so a holder whose day was
taken over cannot write over the new holder's mark. Leases are on the server's clock
(``now``), so runners on machines whose clocks disagree agree on whose a day is.

A write whose connection was lost while committing (``StoreError``: "may or may not have
been saved") is settled by reading the row back: the write landed when the row holds what
was written; it is tried again while the row still holds what it replaces (the compare
makes a second try a no-op once the first landed); anything else is another runner's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

import psycopg

from tether.errors import StoreError
from tether.stores.postgres.conn import PgStore

Conn = psycopg.Connection[Any]
#: Tries of one write whose outcome the lost connection left unknown.
WRITE_TRIES = 4


class PostgresModelStages:
    def __init__(self, pg: PgStore) -> None:
        self.pg = pg

    def now(self) -> datetime:
        row = self.pg.run(
            "reading the server's clock",
            lambda conn: conn.execute("SELECT clock_timestamp()").fetchone(),
            write=False,
        )
        assert row is not None
        return row[0]  # type: ignore[no-any-return]

    def load(self, owner: str, local_date: date) -> bytes | None:
        row = self.pg.run(
            "reading the model stage",
            lambda conn: conn.execute(
                "SELECT record FROM sweep_model_stage WHERE owner = %s AND local_date = %s",
                (owner, local_date.isoformat()),
            ).fetchone(),
            write=False,
        )
        return None if row is None else bytes(row[0])

    def days(self, owner: str) -> list[date]:
        rows = self.pg.run(
            "listing the model stages",
            lambda conn: conn.execute(
                "SELECT local_date FROM sweep_model_stage WHERE owner = %s ORDER BY 1", (owner,)
            ).fetchall(),
            write=False,
        )
        return [date.fromisoformat(r[0]) for r in rows]

    def _write(
        self,
        owner: str,
        local_date: date,
        doing: str,
        work: Callable[[Conn], object],
        *,
        before: bytes | None,
        after: bytes | None,
    ) -> bool:
        """``work`` (True when it changed the row from ``before`` to ``after``), its
        outcome settled by reading back when the connection was lost (module docstring)."""
        for attempt in range(1, WRITE_TRIES + 1):
            try:
                return self.pg.run(doing, work) is not None
            except StoreError:
                if attempt == WRITE_TRIES:
                    raise
                time.sleep(0.1 * 2**attempt)
                now = self.load(owner, local_date)
                if now == after:
                    return True
                if now != before:
                    return False
        raise AssertionError("unreachable")

    def mark(self, owner: str, local_date: date, record: bytes) -> bool:
        return self._write(
            owner,
            local_date,
            "marking the model invoked",
            lambda conn: conn.execute(
                "INSERT INTO sweep_model_stage (owner, local_date, state, record)"
                " VALUES (%s, %s, 'invoked', %s) ON CONFLICT DO NOTHING RETURNING 1",
                (owner, local_date.isoformat(), record),
            ).fetchone(),
            before=None,
            after=record,
        )

    def replace(
        self, owner: str, local_date: date, expected: bytes, record: bytes, state: str
    ) -> bool:
        return self._write(
            owner,
            local_date,
            "staging the model's outcome" if state != "invoked" else "renewing the model mark",
            lambda conn: conn.execute(
                "UPDATE sweep_model_stage SET state = %s, record = %s,"
                " updated_at = clock_timestamp()"
                " WHERE owner = %s AND local_date = %s AND record = %s RETURNING 1",
                (state, record, owner, local_date.isoformat(), expected),
            ).fetchone(),
            before=expected,
            after=record,
        )

    def remove(self, owner: str, local_date: date, expected: bytes) -> bool:
        return self._write(
            owner,
            local_date,
            "dropping the model stage",
            lambda conn: conn.execute(
                "DELETE FROM sweep_model_stage WHERE owner = %s AND local_date = %s"
                " AND record = %s RETURNING 1",
                (owner, local_date.isoformat(), expected),
            ).fetchone(),
            before=expected,
            after=None,
        )
