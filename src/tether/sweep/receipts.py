"""Content-free receipts: claimed (unique claimant, short lease) before the canonical
write, committed after it.

A live claim of another runner is never stolen (``busy``); an expired one with the same
digest is taken over, even days later, so a crash between apply and completion is
recovered by the next run. Claim and completion each re-read the deletion marker and the
live generations in the same transaction (``fence``) and fail closed.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Literal

import msgspec

from tether.core.sweep.errors import SweepFencedError
from tether.core.sweep.state import Receipt, ReceiptKind, receipt_id
from tether.ports import SweepStore
from tether.sweep.fence import DayContext, fence

#: Short: a live runner renews it with every step; a dead one's expires quickly.
DEFAULT_LEASE = timedelta(seconds=120)

ClaimStatus = Literal["claimed", "taken_over", "committed", "busy"]


class Claim(msgspec.Struct, frozen=True):
    receipt_id: str
    status: ClaimStatus


def key_for(ctx: DayContext, local_date: date, kind: ReceiptKind, source: str, ordinal: int) -> str:
    return receipt_id(
        owner=ctx.owner,
        namespace=ctx.namespace,
        local_date=local_date,
        kind=kind,
        source_key=source,
        ordinal=ordinal,
        account_generation=ctx.account_generation,
        source_generation=ctx.source_generation,
    )


def claim(
    store: SweepStore,
    ctx: DayContext,
    *,
    kind: ReceiptKind,
    source_key: str,
    ordinal: int,
    digest: str,
    claimant: str,
    now: datetime,
    lease: timedelta = DEFAULT_LEASE,
) -> Claim:
    rid = key_for(ctx, ctx.window.local_date, kind, source_key, ordinal)
    with store.transaction() as tx:
        fence(tx, ctx)
        old = tx.receipt(rid)
        if old is None:
            tx.put_receipt(
                Receipt(
                    id=rid,
                    owner=ctx.owner,
                    namespace=ctx.namespace,
                    local_date=ctx.window.local_date,
                    kind=kind,
                    source_key=source_key,
                    ordinal=ordinal,
                    account_generation=ctx.account_generation,
                    source_generation=ctx.source_generation,
                    digest=digest,
                    state="pending",
                    claimant=claimant,
                    lease_until=now + lease,
                    attempts=1,
                    outcome=None,
                    updated_at=now,
                )
            )
            return Claim(rid, "claimed")
        if old.digest != digest:
            raise SweepFencedError(ctx.owner, "digest_mismatch")
        if old.state == "committed":
            return Claim(rid, "committed")
        if old.claimant != claimant and old.lease_until > now:
            return Claim(rid, "busy")
        status: ClaimStatus = "claimed" if old.claimant == claimant else "taken_over"
        tx.put_receipt(
            msgspec.structs.replace(
                old,
                claimant=claimant,
                lease_until=now + lease,
                attempts=old.attempts + (status == "taken_over"),
                updated_at=now,
            )
        )
        return Claim(rid, status)


def complete(
    store: SweepStore, ctx: DayContext, rid: str, *, claimant: str, outcome: str, now: datetime
) -> None:
    """Mark our claimed receipt committed; fail closed if it is no longer ours."""
    with store.transaction() as tx:
        fence(tx, ctx)
        held = tx.receipt(rid)
        if held is None or held.claimant != claimant:
            raise SweepFencedError(ctx.owner, "claim_lost")
        if held.state == "committed":
            return
        tx.put_receipt(
            msgspec.structs.replace(held, state="committed", outcome=outcome, updated_at=now)
        )
