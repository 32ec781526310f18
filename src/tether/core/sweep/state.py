"""The sweep's durable rows, as the SweepStore port hands them back and forth.

Receipts are content-free: ids, dates, generations, a digest and an outcome code. The
receipt id is derived from the owner, the receipt namespace, the local date, the source
key, the candidate's ordinal and both generations, so a generation rollover or a
reconciliation gives every candidate a fresh receipt without touching the old ones.
"""

from __future__ import annotations

import hashlib
from datetime import date, datetime
from typing import Literal

import msgspec

ReceiptKind = Literal["candidate", "source"]
ReceiptState = Literal["pending", "committed"]

#: ``SweepTx.facts_stamp`` where the sweep has no tables yet (and the mirror's stamp when
#: there is no sweep store at all): no facts.
NO_SWEEP = "none"


class Owner(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    timezone_name: str
    account_generation: int = 1
    source_generation: int = 1
    receipt_namespace: int = 1
    #: The first local date the sweep covers (the cursor starts before it).
    first_date: date
    created_at: datetime
    #: The durable deletion marker: once set, every sweep transaction fails closed.
    deleted_at: datetime | None = None


class Fact(msgspec.Struct, frozen=True, kw_only=True):
    owner: str
    subject: str
    entity: str
    text: str
    authority: str
    refs: str  # JSON list of metadata-only source refs
    origin_receipt: str | None
    created_at: datetime
    updated_at: datetime
    active: bool = True
    id: int = 0
    #: Who may see it: ``private`` (the default) stays in the home; ``world`` may also be
    #: shown to a remote MCP client (``tether mcp --http``), as a world page may.
    visibility: Literal["private", "world"] = "private"


class StandingTrigger(msgspec.Struct, frozen=True, kw_only=True):
    owner: str
    id: str
    condition: str  # canonical tether_trigger.v1 JSON
    authority: str
    provenance: str  # "standing_trigger" for owner-set triggers; repairs keep it
    active: bool
    updated_at: datetime


class JournalRow(msgspec.Struct, frozen=True, kw_only=True):
    """One canonical write. ``receipt_id`` is unique: one write per receipt, ever."""

    owner: str
    receipt_id: str | None
    time: datetime
    who: str
    action: str
    target: str
    before: str | None
    after: str | None
    #: Metadata only (date, window, source key, authority, refs): the sweep provenance.
    evidence: str
    id: int = 0


class Receipt(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    owner: str
    namespace: int
    local_date: date
    kind: ReceiptKind
    source_key: str
    ordinal: int
    account_generation: int
    source_generation: int
    digest: str
    state: ReceiptState
    claimant: str
    lease_until: datetime
    attempts: int
    outcome: str | None
    updated_at: datetime


class Cursor(msgspec.Struct, frozen=True, kw_only=True):
    """The last completed local day, with the zone it was completed in and its exact window."""

    owner: str
    timezone_name: str
    local_date: date
    window_id: str
    window_start_utc: datetime
    window_end_utc: datetime
    updated_at: datetime


class StagedPacket(msgspec.Struct, frozen=True, kw_only=True):
    """A day's packet as first produced; retries read it instead of producing again."""

    owner: str
    local_date: date
    source_generation: int
    window_id: str
    digest: str
    packet: bytes
    created_at: datetime


def receipt_id(
    *,
    owner: str,
    namespace: int,
    local_date: date,
    kind: ReceiptKind,
    source_key: str,
    ordinal: int,
    account_generation: int,
    source_generation: int,
) -> str:
    parts = (
        owner,
        str(namespace),
        local_date.isoformat(),
        kind,
        source_key,
        str(ordinal),
        str(account_generation),
        str(source_generation),
    )
    return "r1-" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]
