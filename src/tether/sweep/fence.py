"""The check every sweep write transaction starts with: is this owner still the one the
work was planned for? Deletion marker, account and source generations, receipt namespace."""

from __future__ import annotations

import msgspec

from tether.core.sweep.errors import SweepFencedError
from tether.core.sweep.state import Owner
from tether.core.sweep.windows import Window
from tether.ports import SweepTx


class DayContext(msgspec.Struct, frozen=True, kw_only=True):
    """What a day's work was planned against; every write re-checks it."""

    owner: str
    namespace: int
    account_generation: int
    source_generation: int
    window: Window

    @classmethod
    def of(cls, owner: Owner, window: Window) -> DayContext:
        return cls(
            owner=owner.id,
            namespace=owner.receipt_namespace,
            account_generation=owner.account_generation,
            source_generation=owner.source_generation,
            window=window,
        )


def live_owner(tx: SweepTx, owner_id: str) -> Owner:
    owner = tx.owner(owner_id)
    if owner is None:
        raise SweepFencedError(owner_id, "unknown_owner")
    if owner.deleted_at is not None:
        raise SweepFencedError(owner_id, "owner_deleted")
    return owner


def fence(tx: SweepTx, ctx: DayContext) -> Owner:
    """Re-read the owner inside ``tx``; raise SweepFencedError if anything moved."""
    owner = live_owner(tx, ctx.owner)
    if owner.account_generation != ctx.account_generation:
        raise SweepFencedError(ctx.owner, "account_generation_changed")
    if owner.source_generation != ctx.source_generation:
        raise SweepFencedError(ctx.owner, "source_generation_changed")
    if owner.receipt_namespace != ctx.namespace:
        raise SweepFencedError(ctx.owner, "namespace_changed")
    return owner
