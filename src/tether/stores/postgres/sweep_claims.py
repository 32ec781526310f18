"""Owner-days that sweep workers claim, in one owner's schema (``sweep_claim``).

A worker offers the days it finds due (``offer``: a row per owner-day, inserted once
whoever offers it), then claims one: the oldest open row, or a claimed one whose lease
ran out (its worker died or stalled), picked ``FOR UPDATE SKIP LOCKED`` so workers racing
for work never wait on each other's rows, and leased until the server's clock passes
``lease``. ``finish`` marks it done only while the claim is still the caller's. Leases
are on the database server's clock, so workers on machines whose clocks disagree still
agree on who holds a day.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg

from tether.records import ClaimedDay
from tether.stores.dialect import iso
from tether.stores.postgres.conn import PgStore

Conn = psycopg.Connection[Any]

_CLAIM = """
WITH pick AS (
    SELECT owner, local_date FROM sweep_claim
    WHERE state = 'open' OR (state = 'claimed' AND lease_until < clock_timestamp())
    ORDER BY local_date, owner LIMIT 1 FOR UPDATE SKIP LOCKED
)
UPDATE sweep_claim AS c SET state = 'claimed', claimant = %s,
    lease_until = clock_timestamp() + %s, attempts = c.attempts + 1
FROM pick WHERE c.owner = pick.owner AND c.local_date = pick.local_date
RETURNING c.owner, c.local_date, c.attempts
"""


class PostgresClaims:
    """``tether.ports.OwnerClaims`` over one owner schema's ``sweep_claim``."""

    def __init__(self, pg: PgStore) -> None:
        self.pg = pg

    def offer(self, days: Sequence[tuple[str, date]]) -> int:
        if not days:
            return 0

        def work(conn: Conn) -> int:
            cur = conn.cursor()
            cur.executemany(
                "INSERT INTO sweep_claim (owner, local_date, state) VALUES (%s, %s, 'open')"
                " ON CONFLICT DO NOTHING",
                [(o, d.isoformat()) for o, d in days],
            )
            return max(cur.rowcount, 0)

        return int(self.pg.run("offering owner-days", work))

    def claim(self, claimant: str, lease: timedelta) -> ClaimedDay | None:
        row = self.pg.run(
            "claiming an owner-day",
            lambda conn: conn.execute(_CLAIM, (claimant, lease)).fetchone(),
        )
        if row is None:
            return None
        return ClaimedDay(
            owner=row[0],
            local_date=date.fromisoformat(row[1]),
            claimant=claimant,
            attempts=int(row[2]),
        )

    def finish(self, day: ClaimedDay, outcome: str) -> bool:
        """A ``complete`` day is marked done; any other outcome hands the day back (its
        row goes, so the next pass offers it again). Only while still the caller's."""
        if outcome == "complete":
            sql = (
                "UPDATE sweep_claim SET state = 'done', outcome = %s, lease_until = NULL"
                " WHERE owner = %s AND local_date = %s AND claimant = %s AND state = 'claimed'"
                " RETURNING 1"
            )
            params: tuple[object, ...] = (outcome, day.owner, day.local_date.isoformat())
        else:
            sql = (
                "DELETE FROM sweep_claim WHERE owner = %s AND local_date = %s"
                " AND claimant = %s AND state = 'claimed' RETURNING 1"
            )
            params = (day.owner, day.local_date.isoformat())
        found = self.pg.run(
            "finishing an owner-day",
            lambda conn: conn.execute(sql, (*params, day.claimant)).fetchone(),
        )
        return found is not None

    def release(self, claimant: str) -> int:
        """Hand back every owner-day ``claimant`` holds (open again, for any worker now,
        the claim not counted as an attempt) and let its pending receipts' leases run
        out; how many days. For a worker that is stopping and will write nothing more."""

        def work(conn: Conn) -> int:
            days = conn.execute(
                "UPDATE sweep_claim SET state = 'open', claimant = NULL, lease_until = NULL,"
                " attempts = greatest(attempts - 1, 0)"
                " WHERE claimant = %s AND state = 'claimed'",
                (claimant,),
            ).rowcount
            conn.execute(
                "UPDATE sweep_receipt SET lease_until = %s WHERE claimant = %s"
                " AND state = 'pending'",
                (iso(datetime(1970, 1, 1, tzinfo=UTC)), claimant),
            )
            return max(days, 0)

        return int(self.pg.run("handing back owner-days", work))

    def counts(self) -> dict[str, int]:
        """Owner-days by state (``open``, ``claimed``, ``done``)."""
        rows = self.pg.run(
            "counting owner-days",
            lambda conn: conn.execute(
                "SELECT state, count(*) FROM sweep_claim GROUP BY state"
            ).fetchall(),
            write=False,
        )
        return {str(r[0]): int(r[1]) for r in rows}
