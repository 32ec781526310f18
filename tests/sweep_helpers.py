"""Helpers shared by the sweep tests: real stores, real packets, a list producer."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Any

import msgspec

from tether.core.sweep.packet import DailySweepInput, FactCandidate, Incomplete, encode_packet
from tether.core.sweep.state import Owner, Receipt
from tether.core.sweep.windows import Window, window_for
from tether.ports import SweepStore
from tether.sweep.producer import StagingPacketReader, empty_packet


def fact(
    entity: str, authority: Any = "sweep_inference", text: str | None = None, source: str = "s1"
) -> FactCandidate:
    return FactCandidate(
        source_key=source,
        subject="owner",
        entity=entity,
        text=text or f"{entity} by {authority}",
        authority=authority,
    )


def day_packet(
    owner: Owner, day: date, candidates: tuple[Any, ...] = (), sources: tuple[str, ...] = ("s1",)
) -> DailySweepInput:
    w = window_for(owner.timezone_name, day)
    return msgspec.structs.replace(empty_packet(owner, w), candidates=candidates, sources=sources)


class DictProducer:
    """Packets by local date; a missing date is incomplete. A real Producer, not a mock."""

    def __init__(self, packets: dict[date, DailySweepInput] | None = None) -> None:
        self.packets = packets or {}
        self.calls: list[date] = []

    def produce(self, owner: Owner, window: Window) -> DailySweepInput | Incomplete:  # noqa: ARG002
        self.calls.append(window.local_date)
        p = self.packets.get(window.local_date)
        return Incomplete("stage_missing") if p is None else p


def write_stage(home: Path, packet: DailySweepInput) -> Path:
    reader = StagingPacketReader(home)
    w = window_for(packet.timezone_name, packet.local_date)
    path = reader.path(packet.owner, w)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_packet(packet))
    return path


def snapshot(store: SweepStore, owner: str) -> dict[str, Any]:
    with store.transaction(write=False) as tx:
        return {
            "owner": tx.owner(owner),
            "facts": tx.facts(owner),
            "journal": tx.journal(owner),
            "receipts": tx.receipts(owner),
            "cursor": tx.cursor(owner),
            "triggers": tx.triggers(owner),
        }


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text)


def pending_receipt(
    day: date, digest: str, *, claimant: str, at: datetime, rid: str = "r1"
) -> Receipt:
    """alice's first candidate of ``day``, claimed by ``claimant`` and not completed: what
    a runner leaves between its claim and the canonical write."""
    return Receipt(
        id=rid,
        owner="alice",
        namespace=1,
        local_date=day,
        kind="candidate",
        source_key="s1",
        ordinal=0,
        account_generation=1,
        source_generation=1,
        digest=digest,
        state="pending",
        claimant=claimant,
        lease_until=at,
        attempts=1,
        outcome=None,
        updated_at=at,
    )
