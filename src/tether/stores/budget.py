"""The budget gate's spend ledger, written once for both stores: ``budget_spend`` (one row
per gated call) and ``budget_total`` (per local day and kind, the sum the gate checks:
settled calls at what they used, reservations at their bound).

The reserve rule: a reservation first settles the calls the gate has finished since
(``settles``, so a call costs the ledger one write, not two, and the decision weighs what
they used), then reads the day's totals, asks the caller's decision and writes its row
and the new totals, all in one write transaction guarded by ``budget``: SQLite's
``BEGIN IMMEDIATE`` holds the file, PostgreSQL an advisory lock, so two calls at once
(threads, processes or machines) are weighed one after the other and cannot both slip
under a cap. SQLite commits the ledger with ``synchronous=NORMAL`` (``durable=False``): a
restart keeps it, a power cut may lose the last calls' rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from tether.records import (
    BudgetReason,
    SpendKind,
    SpendRow,
    SpendSettle,
    SpendState,
    SpentToday,
)
from tether.stores.dialect import Repository, Sql, from_iso, iso

COLUMNS = (
    "id, time, day, kind, session, state, reason, bound_tokens, bound_usd,"
    " tokens, usd, cache_n, prompt_n, predicted_n"
)
#: What a reservation or a settlement locks on PostgreSQL.
GUARD = "budget"


def spent(db: Sql, day: str, kind: str) -> SpentToday:
    tokens, usd = db.one(
        "SELECT coalesce(sum(CASE WHEN kind = ? THEN tokens END), 0),"
        " coalesce(sum(CASE WHEN kind <> 'live' THEN usd END), 0)"
        " FROM budget_total WHERE day = ?",
        (kind, day),
    )
    return SpentToday(tokens=int(tokens), usd=float(usd))


def _add(db: Sql, day: str, kind: str, tokens: int, usd: float) -> None:
    db.execute(
        "INSERT INTO budget_total (day, kind, tokens, usd) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (day, kind) DO UPDATE SET tokens = budget_total.tokens"
        " + excluded.tokens, usd = budget_total.usd + excluded.usd",
        (day, kind, tokens, usd),
    )


def reserve(
    db: Sql,
    row: SpendRow,
    decide: Callable[[SpentToday], BudgetReason | None],
    settles: Sequence[SpendSettle] = (),
) -> SpendRow:
    """The reserve rule (module docstring), inside the caller's guarded transaction."""
    settle_all(db, settles)  # before the read, so the decision weighs what they used
    reason = decide(spent(db, row.day, row.kind))
    state: SpendState = "refused" if reason else "reserved"
    (spend_id,) = db.one(
        "INSERT INTO budget_spend (time, day, kind, session, state, reason, bound_tokens,"
        " bound_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            iso(row.time),
            row.day,
            row.kind,
            row.session,
            state,
            reason,
            row.bound_tokens,
            row.bound_usd,
        ),
    )
    if reason is None:
        _add(db, row.day, row.kind, row.bound_tokens, row.bound_usd)
    return SpendRow(
        id=int(spend_id),
        time=row.time,
        day=row.day,
        kind=row.kind,
        session=row.session,
        state=state,
        reason=reason,
        bound_tokens=row.bound_tokens,
        bound_usd=row.bound_usd,
    )


def settle(db: Sql, spend: SpendSettle) -> bool:
    """A reserved call at what it used: its row settled, the day's totals moved from its
    bound to its use. False when it was settled already (or never reserved)."""
    found = db.one(
        "UPDATE budget_spend SET state = 'settled', tokens = ?, usd = ?, cache_n = ?,"
        " prompt_n = ?, predicted_n = ? WHERE id = ? AND state = 'reserved'"
        " RETURNING day, kind, bound_tokens, bound_usd",
        (spend.tokens, spend.usd, spend.cache_n, spend.prompt_n, spend.predicted_n, spend.id),
    )
    if found is None:
        return False  # settled already, or never reserved: nothing to move
    day, kind, bound_tokens, bound_usd = found
    _add(db, day, kind, spend.tokens - int(bound_tokens), spend.usd - float(bound_usd))
    return True


def settle_all(db: Sql, settles: Sequence[SpendSettle]) -> None:
    for s in settles:
        settle(db, s)


def spend_row(row: Sequence[Any]) -> SpendRow:
    return SpendRow(
        id=int(row[0]),
        time=from_iso(row[1]),
        day=row[2],
        kind=cast(SpendKind, row[3]),
        session=row[4],
        state=cast(SpendState, row[5]),
        reason=cast("BudgetReason | None", row[6]),
        bound_tokens=int(row[7]),
        bound_usd=float(row[8]),
        tokens=int(row[9]),
        usd=float(row[10]),
        cache_n=int(row[11]),
        prompt_n=int(row[12]),
        predicted_n=int(row[13]),
    )


def rows(db: Sql, since: str | None) -> list[SpendRow]:
    if since is None:
        found = db.all(f"SELECT {COLUMNS} FROM budget_spend ORDER BY id")
    else:
        found = db.all(f"SELECT {COLUMNS} FROM budget_spend WHERE day >= ? ORDER BY id", (since,))
    return [spend_row(r) for r in found]


class BudgetLedger(Repository):
    """The ``Store`` port's budget methods, for both stores (a mixin)."""

    def budget_reserve(
        self,
        row: SpendRow,
        decide: Callable[[SpentToday], BudgetReason | None],
        settles: Sequence[SpendSettle] = (),
    ) -> SpendRow:
        return self._in_write(
            "reserving a model call's budget",
            lambda db: reserve(db, row, decide, settles),
            guard=GUARD,
            durable=False,
        )

    def budget_settle_all(self, settles: Sequence[SpendSettle]) -> None:
        if settles:
            self._in_write(
                "settling model calls' budget",
                lambda db: settle_all(db, settles),
                guard=GUARD,
                durable=False,
            )

    def budget_settle(
        self,
        spend_id: int,
        *,
        tokens: int,
        usd: float,
        cache_n: int = 0,
        prompt_n: int = 0,
        predicted_n: int = 0,
    ) -> bool:
        done = SpendSettle(
            id=spend_id,
            tokens=tokens,
            usd=usd,
            cache_n=cache_n,
            prompt_n=prompt_n,
            predicted_n=predicted_n,
        )
        return self._in_write(
            "settling a model call's budget",
            lambda db: settle(db, done),
            guard=GUARD,
            durable=False,
        )

    def budget_spent(self, day: str, kind: str) -> SpentToday:
        return self._in_read("reading the day's spend", lambda db: spent(db, day, kind))

    def budget_rows(self, since: str | None = None) -> list[SpendRow]:
        return self._in_read("reading the spend ledger", lambda db: rows(db, since))
