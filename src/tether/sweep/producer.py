"""Where a day's packet comes from. The model pass over a day's sessions is a later
issue; here are the interface, a deterministic producer (tests, benchmarks) and the reader
of backend-staged packets (``<home>/sweep/staging/<owner>/<YYYY-MM-DD>.json``).

A producer either returns a ``DailySweepInput`` or says the day is ``Incomplete`` with a
reason code; an incomplete day never advances the cursor.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec

from tether.core.sweep.errors import PacketError
from tether.core.sweep.packet import (
    AUTHORITIES,
    DailySweepInput,
    FactCandidate,
    Incomplete,
    SourceRef,
    decode_packet,
)
from tether.core.sweep.state import Owner
from tether.core.sweep.windows import Window

STAGING_DIR = ("sweep", "staging")


def empty_packet(owner: Owner, window: Window) -> DailySweepInput:
    """The explicit complete-zero packet of a day with nothing to remember."""
    return DailySweepInput(
        owner=owner.id,
        local_date=window.local_date,
        account_generation=owner.account_generation,
        source_generation=owner.source_generation,
        timezone_name=window.timezone_name,
        window_id=window.window_id,
        window_start_utc=window.start_utc,
        window_end_utc=window.end_utc,
        complete=True,
    )


class DeterministicProducer:
    """``per_day`` fact candidates a day, drawn by hash from ``slots`` slots of one
    subject, so later days meet the same slots again (and must not duplicate them)."""

    def __init__(self, per_day: int = 4, slots: int = 6, sources: int = 2) -> None:
        self.per_day = per_day
        self.slots = slots
        self.sources = sources

    def produce(self, owner: Owner, window: Window) -> DailySweepInput:
        sources = tuple(f"s{window.local_date:%Y%m%d}-{i}" for i in range(self.sources))
        candidates = []
        for i in range(self.per_day):
            h = hashlib.sha256(f"{owner.id}|{window.local_date}|{i}".encode()).digest()
            slot = h[0] % self.slots
            candidates.append(
                FactCandidate(
                    source_key=sources[i % len(sources)],
                    subject="owner",
                    entity=f"topic-{slot}",
                    text=f"fact {slot} as of {window.local_date}",
                    authority=AUTHORITIES[h[1] % len(AUTHORITIES)],
                    refs=(SourceRef(kind="session", session=f"chat-{h[2] % 9}"),),
                )
            )
        return msgspec.structs.replace(
            empty_packet(owner, window), candidates=tuple(candidates), sources=sources
        )


class StagingPacketReader:
    """Reads backend-staged packets from files; not a memory authority by itself: the
    runner validates the packet against the exact window and live generations."""

    def __init__(self, home: Path) -> None:
        self.root = home.joinpath(*STAGING_DIR)

    def path(self, owner: str, window: Window) -> Path:
        return self.root / owner / f"{window.local_date.isoformat()}.json"

    def produce(self, owner: Owner, window: Window) -> DailySweepInput | Incomplete:
        try:
            data = self.path(owner.id, window).read_bytes()
        except FileNotFoundError:
            return Incomplete("stage_missing")
        except OSError:
            return Incomplete("stage_malformed")
        if len(data) > 1_000_000:
            return Incomplete("stage_malformed")
        try:
            return decode_packet(data)
        except PacketError:
            return Incomplete("stage_malformed")
