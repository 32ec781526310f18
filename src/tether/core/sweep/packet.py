"""The immutable day packet (``DailySweepInput``) and its bounds.

One packet per owner and completed local day. It names the exact window and the
generations observed while it was produced, says ``complete = true`` explicitly (an empty
candidate list is only a valid day when a complete packet says so), and carries at most
32 candidates, each with bounded text, at most 8 metadata-only source references and one
of the three authorities. ``sources`` lists the source identities the day consumed,
separately from the candidates (a source may yield no candidate at all).
"""

from __future__ import annotations

import hashlib
import re
from datetime import date, datetime
from typing import Annotated, Any, Literal

import msgspec

from tether.core.sweep.errors import ConditionError, PacketError
from tether.core.sweep.triggers import compile_condition
from tether.core.sweep.windows import Window

PACKET_SCHEMA: Literal["tether_sweep_packet.v1"] = "tether_sweep_packet.v1"
MAX_CANDIDATES = 32
MAX_CANONICAL_WRITES = 16
MAX_REFS = 8
MAX_SOURCES = 32
MAX_TEXT = 1000

Authority = Literal["direct_user_statement", "agent_reusable_conclusion", "sweep_inference"]
AUTHORITIES: tuple[Authority, ...] = (
    "sweep_inference",
    "agent_reusable_conclusion",
    "direct_user_statement",
)
KEY_PATTERN = r"^[a-z0-9][a-z0-9._:-]{0,63}$"
_KEY = re.compile(KEY_PATTERN)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
Key = Annotated[str, msgspec.Meta(pattern=KEY_PATTERN)]


class SourceRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Where a candidate came from: ids only, never text."""

    kind: Literal["session", "epoch_summary", "turn"]
    session: Key
    epoch: int | None = None
    turn: int | None = None


class FactCandidate(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, tag="fact"
):
    source_key: Key
    subject: Key
    entity: Key
    text: str
    authority: Authority
    refs: tuple[SourceRef, ...] = ()
    #: ``world`` only when the fact may be shown to a remote MCP client; private otherwise.
    visibility: Literal["private", "world"] = "private"


class TriggerRepair(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, tag="trigger_repair"
):
    """Repair of an existing standing trigger's condition (never a new trigger)."""

    source_key: Key
    trigger_id: Key
    condition: dict[str, Any]
    authority: Authority
    refs: tuple[SourceRef, ...] = ()


Candidate = FactCandidate | TriggerRepair


class DailySweepInput(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    owner: Key
    local_date: date
    account_generation: int
    source_generation: int
    timezone_name: str
    window_id: str
    window_start_utc: datetime
    window_end_utc: datetime
    complete: bool
    candidates: tuple[Candidate, ...] = ()
    sources: tuple[Key, ...] = ()
    schema: Literal["tether_sweep_packet.v1"] = PACKET_SCHEMA


_encoder = msgspec.json.Encoder(order="sorted")
_decoder = msgspec.json.Decoder(DailySweepInput)


def encode_packet(packet: DailySweepInput) -> bytes:
    return _encoder.encode(packet)


def decode_packet(data: bytes) -> DailySweepInput:
    """Strict decode; raise PacketError(stage_malformed) on anything else."""
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise PacketError("stage_malformed", str(exc)[:200]) from None


def digest(value: DailySweepInput | FactCandidate | TriggerRepair) -> str:
    """Content hash (sorted-key JSON): receipts keep this, never the content."""
    return hashlib.sha256(_encoder.encode(value)).hexdigest()


def validate_packet(
    packet: DailySweepInput,
    *,
    owner: str,
    window: Window,
    account_generation: int,
    source_generation: int,
) -> None:
    """Raise PacketError with a reason code unless ``packet`` is a complete, in-bounds
    packet for exactly this owner, window and generations."""
    if packet.schema != PACKET_SCHEMA or not packet.complete:
        raise PacketError("incomplete_packet")
    if packet.owner != owner:
        raise PacketError("owner_mismatch")
    if (
        packet.account_generation != account_generation
        or packet.source_generation != source_generation
    ):
        raise PacketError("stale_generation")
    if (
        packet.local_date != window.local_date
        or packet.timezone_name != window.timezone_name
        or packet.window_id != window.window_id
        or packet.window_start_utc != window.start_utc
        or packet.window_end_utc != window.end_utc
    ):
        raise PacketError("window_mismatch")
    if len(packet.candidates) > MAX_CANDIDATES:
        raise PacketError("too_many_candidates")
    if len(packet.sources) > MAX_SOURCES or len(set(packet.sources)) != len(packet.sources):
        raise PacketError("too_many_sources")
    for key in packet.sources:
        _key(key)
    for candidate in packet.candidates:
        validate_candidate(candidate)
        if candidate.source_key not in packet.sources:
            raise PacketError("unknown_source")


def validate_candidate(candidate: Candidate) -> None:
    if candidate.authority not in AUTHORITIES:
        raise PacketError("bad_content", "unknown authority")
    if len(candidate.refs) > MAX_REFS:
        raise PacketError("too_many_refs")
    _key(candidate.source_key)
    for ref in candidate.refs:
        _key(ref.session)
    if isinstance(candidate, FactCandidate):
        _key(candidate.subject)
        _key(candidate.entity)
        if not candidate.text.strip():
            raise PacketError("bad_content", "empty text")
        if len(candidate.text) > MAX_TEXT:
            raise PacketError("content_too_long")
        if _CONTROL.search(candidate.text):
            raise PacketError("bad_content", "control characters")
        return
    _key(candidate.trigger_id)
    try:
        compile_condition(candidate.condition)
    except ConditionError as exc:
        raise PacketError(exc.reason) from None


def _key(value: str) -> None:
    if not _KEY.fullmatch(value):
        raise PacketError("bad_content", "key outside [a-z0-9._:-]{1,64}")


class Incomplete(msgspec.Struct, frozen=True):
    """A day a producer cannot give yet (its rows are still settling): why, as a reason code."""

    reason: str
