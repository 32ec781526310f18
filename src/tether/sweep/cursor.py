"""The per-owner cursor: the last completed local day, its zone and exact window.

Advancing re-reads the owner (deletion marker, generations, namespace) in the same
transaction, compares the cursor it expects (CAS), checks the day is the next one, that
its packet is durably staged and that none of its receipts is still pending, and fails
closed otherwise.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from tether.core.sweep.errors import SweepFencedError, UnknownOwnerError
from tether.core.sweep.state import Cursor
from tether.ports import SweepStore
from tether.sweep.fence import DayContext, fence, live_owner


def advance(store: SweepStore, ctx: DayContext, expected: Cursor | None, now: datetime) -> Cursor:
    window = ctx.window
    with store.transaction() as tx:
        owner = fence(tx, ctx)
        if owner.timezone_name != window.timezone_name:
            raise SweepFencedError(ctx.owner, "timezone_changed_requires_reconciliation")
        current = tx.cursor(ctx.owner)
        if _ident(current) != _ident(expected):
            raise SweepFencedError(ctx.owner, "cursor_moved")
        due = owner.first_date if current is None else current.local_date + timedelta(days=1)
        if window.local_date != due:
            raise SweepFencedError(ctx.owner, "cursor_moved")
        if tx.stage(ctx.owner, window.local_date, ctx.source_generation, window.window_id) is None:
            raise SweepFencedError(ctx.owner, "stage_missing")
        pending = tx.pending_receipts(
            ctx.owner,
            ctx.namespace,
            window.local_date,
            ctx.account_generation,
            ctx.source_generation,
        )
        if pending:
            raise SweepFencedError(ctx.owner, "pending_receipts")
        new = Cursor(
            owner=ctx.owner,
            timezone_name=window.timezone_name,
            local_date=window.local_date,
            window_id=window.window_id,
            window_start_utc=window.start_utc,
            window_end_utc=window.end_utc,
            updated_at=now,
        )
        tx.put_cursor(new)
        return new


def _ident(cursor: Cursor | None) -> tuple[object, ...] | None:
    if cursor is None:
        return None
    return (cursor.local_date, cursor.window_id, cursor.timezone_name)


class Reconciled(msgspec.Struct, frozen=True):
    owner: str
    status: str  # "reconciled" | "nothing_to_reconcile"
    namespace: int
    timezone_name: str
    anchor_date: str | None


def reconcile(store: SweepStore, owner_id: str, now: datetime) -> Reconciled:
    """Accept the owner's new zone: increment the receipt namespace and move the cursor to
    the new zone, keeping its completed-day anchor (date and exact window). The source
    generation is untouched; nothing is replayed and nothing skipped."""
    with store.transaction() as tx:
        if tx.owner(owner_id) is None:
            raise UnknownOwnerError(owner_id)
        owner = live_owner(tx, owner_id)
        cursor = tx.cursor(owner_id)
        if cursor is None or cursor.timezone_name == owner.timezone_name:
            return Reconciled(
                owner_id,
                "nothing_to_reconcile",
                owner.receipt_namespace,
                owner.timezone_name,
                None if cursor is None else cursor.local_date.isoformat(),
            )
        owner = msgspec.structs.replace(owner, receipt_namespace=owner.receipt_namespace + 1)
        tx.put_owner(owner)
        tx.put_cursor(
            msgspec.structs.replace(cursor, timezone_name=owner.timezone_name, updated_at=now)
        )
        return Reconciled(
            owner_id,
            "reconciled",
            owner.receipt_namespace,
            owner.timezone_name,
            cursor.local_date.isoformat(),
        )
