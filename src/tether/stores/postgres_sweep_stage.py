"""The model pass's stage in PostgreSQL (``sweep_model_stage``): ``tether.ports.ModelStages``
for a sweep worker, which has no home to keep stage files in.

One row per owner-day holding the current record (``sweep.stage`` encodes and reads it).
``mark`` inserts the ``invoked`` record and commits before the first model request (a
committed transaction is durable; a second runner's insert finds the row and gets False,
so never invokes); ``settle`` replaces it with the outcome only while it still says
``invoked``; ``drop`` deletes it (the invocation never reached the model).
"""

from __future__ import annotations

from datetime import date
from typing import Any

import psycopg

from tether.stores.postgres_conn import PgStore

Conn = psycopg.Connection[Any]


class PostgresModelStages:
    def __init__(self, pg: PgStore) -> None:
        self.pg = pg

    def load(self, owner: str, local_date: date) -> bytes | None:
        row = self.pg.run(
            "reading the model stage",
            lambda c: c.execute(
                "SELECT record FROM sweep_model_stage WHERE owner = %s AND local_date = %s",
                (owner, local_date.isoformat()),
            ).fetchone(),
            write=False,
        )
        return None if row is None else bytes(row[0])

    def mark(self, owner: str, local_date: date, record: bytes) -> bool:
        row = self.pg.run(
            "marking the model invoked",
            lambda c: c.execute(
                "INSERT INTO sweep_model_stage (owner, local_date, state, record)"
                " VALUES (%s, %s, 'invoked', %s) ON CONFLICT DO NOTHING RETURNING 1",
                (owner, local_date.isoformat(), record),
            ).fetchone(),
        )
        return row is not None

    def settle(self, owner: str, local_date: date, state: str, record: bytes) -> None:
        self.pg.run(
            "staging the model's outcome",
            lambda c: c.execute(
                "UPDATE sweep_model_stage SET state = %s, record = %s,"
                " updated_at = clock_timestamp()"
                " WHERE owner = %s AND local_date = %s AND state = 'invoked'",
                (state, record, owner, local_date.isoformat()),
            ),
        )

    def drop(self, owner: str, local_date: date) -> None:
        self.pg.run(
            "dropping the model stage",
            lambda c: c.execute(
                "DELETE FROM sweep_model_stage WHERE owner = %s AND local_date = %s",
                (owner, local_date.isoformat()),
            ),
        )
