"""The budget gate's spend ledger in the main store: ``budget_spend`` (one row per gated
call) and ``budget_total`` (per local day and kind, the sum the gate checks: settled
calls at what they used, reservations at their bound).

A reservation reads the day's totals, asks the caller's decision and writes its row and
the new totals in one ``BEGIN IMMEDIATE`` transaction, so two calls at once (threads or
processes) are weighed one after the other and cannot both slip under a cap. The same
transaction first settles the calls the gate has finished since (``settles``), so a call
costs the ledger one write, not two.
"""

from __future__ import annotations

import sqlite3
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
from tether.stores.sqlite_file import from_iso, iso

_COLUMNS = (
    "id, time, day, kind, session, state, reason, bound_tokens, bound_usd,"
    " tokens, usd, cache_n, prompt_n, predicted_n"
)


def spent(c: sqlite3.Connection, day: str, kind: str) -> SpentToday:
    tokens, usd = c.execute(
        "SELECT coalesce(sum(CASE WHEN kind = ? THEN tokens END), 0),"
        " coalesce(sum(CASE WHEN kind != 'live' THEN usd END), 0)"
        " FROM budget_total WHERE day = ?",
        (kind, day),
    ).fetchone()
    return SpentToday(tokens=int(tokens), usd=float(usd))


def _add(c: sqlite3.Connection, day: str, kind: str, tokens: int, usd: float) -> None:
    c.execute(
        "INSERT INTO budget_total (day, kind, tokens, usd) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (day, kind) DO UPDATE SET tokens = tokens + excluded.tokens,"
        " usd = usd + excluded.usd",
        (day, kind, tokens, usd),
    )


def reserve(
    c: sqlite3.Connection,
    row: SpendRow,
    decide: Callable[[SpentToday], BudgetReason | None],
    settles: Sequence[SpendSettle] = (),
) -> SpendRow:
    settle_all(c, settles)  # before the read, so the decision weighs what they used
    reason = decide(spent(c, row.day, row.kind))
    state: SpendState = "refused" if reason else "reserved"
    cur = c.execute(
        "INSERT INTO budget_spend (time, day, kind, session, state, reason, bound_tokens,"
        " bound_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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
        _add(c, row.day, row.kind, row.bound_tokens, row.bound_usd)
    return SpendRow(
        id=int(cur.lastrowid or 0),
        time=row.time,
        day=row.day,
        kind=row.kind,
        session=row.session,
        state=state,
        reason=reason,
        bound_tokens=row.bound_tokens,
        bound_usd=row.bound_usd,
    )


def settle(
    c: sqlite3.Connection,
    spend_id: int,
    *,
    tokens: int,
    usd: float,
    cache_n: int,
    prompt_n: int,
    predicted_n: int,
) -> bool:
    found = c.execute(
        "UPDATE budget_spend SET state = 'settled', tokens = ?, usd = ?, cache_n = ?,"
        " prompt_n = ?, predicted_n = ? WHERE id = ? AND state = 'reserved'"
        " RETURNING day, kind, bound_tokens, bound_usd",
        (tokens, usd, cache_n, prompt_n, predicted_n, spend_id),
    ).fetchone()
    if found is None:
        return False  # settled already, or never reserved: nothing to move
    day, kind, bound_tokens, bound_usd = found
    _add(c, day, kind, tokens - int(bound_tokens), usd - float(bound_usd))
    return True


def settle_all(c: sqlite3.Connection, settles: Sequence[SpendSettle]) -> None:
    for s in settles:
        settle(
            c,
            s.id,
            tokens=s.tokens,
            usd=s.usd,
            cache_n=s.cache_n,
            prompt_n=s.prompt_n,
            predicted_n=s.predicted_n,
        )


def _row(r: tuple[Any, ...]) -> SpendRow:
    return SpendRow(
        id=int(r[0]),
        time=from_iso(r[1]),
        day=r[2],
        kind=cast(SpendKind, r[3]),
        session=r[4],
        state=cast(SpendState, r[5]),
        reason=cast("BudgetReason | None", r[6]),
        bound_tokens=int(r[7]),
        bound_usd=float(r[8]),
        tokens=int(r[9]),
        usd=float(r[10]),
        cache_n=int(r[11]),
        prompt_n=int(r[12]),
        predicted_n=int(r[13]),
    )


def rows(c: sqlite3.Connection, since: str | None) -> list[SpendRow]:
    if since is None:
        found = c.execute(f"SELECT {_COLUMNS} FROM budget_spend ORDER BY id")
    else:
        found = c.execute(
            f"SELECT {_COLUMNS} FROM budget_spend WHERE day >= ? ORDER BY id", (since,)
        )
    return [_row(r) for r in found]
