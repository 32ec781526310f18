"""Receipts and manifests of the harvest: what was extracted from a segment, and the links
the next context pack shows.

- **Receipt** (``corpus/receipts/<segment>.json``): written once the facts of a segment are
  committed (or the segment was retired): the segment, its hash, the lane, the outcome, the
  counters, the verified links and the facts' texts (redacted: they come from a redacted
  segment). A segment with a receipt is never extracted again, by any lane; the maintenance
  pass extracts every segment that has none.
- **Manifest** (``corpus/<session>.manifest.json``): the session's published receipts
  (``published``), what ``pack.context_pack`` reads. Publishing is separate from the
  receipt: a failed publish keeps the receipt and the next pass re-publishes it without
  re-extracting (``unpublished``).

Both are written atomically; a manifest is rewritten under the corpus lock.
"""

from __future__ import annotations

import fcntl
import os
from datetime import datetime
from pathlib import Path

import msgspec

from tether.checkpoint.bank import corpus_dir, parse_segment_link
from tether.errors import CheckpointError
from tether.files import write_atomic

RECEIPTS_DIR = "receipts"


class Receipt(msgspec.Struct, frozen=True, kw_only=True):
    segment: str  # the file name in corpus/
    session: str
    hash: str
    lane: str  # harvest, maintenance, ingest
    outcome: str  # inserted (facts committed), retired, empty
    time: datetime
    inserted: int = 0
    duplicate: int = 0
    links: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    #: What made the facts: "model", "extractive" (no model call), "model+extractive".
    path: str = "model"
    #: Model calls made (ok) for this segment.
    model_calls: int = 0
    #: Why no model ran (``model_absent``), when none did.
    cause: str | None = None


class Manifest(msgspec.Struct, kw_only=True):
    session: str
    published: list[Receipt] = msgspec.field(default_factory=list)


def receipt_path(home: Path, segment: str) -> Path:
    parse_segment_link(segment.removesuffix(".txt"))
    return corpus_dir(home) / RECEIPTS_DIR / f"{segment.removesuffix('.txt')}.json"


def manifest_path(home: Path, session: str) -> Path:
    return corpus_dir(home) / f"{session}.manifest.json"


def read_receipt(home: Path, segment: str) -> Receipt | None:
    path = receipt_path(home, segment)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return msgspec.json.decode(data, type=Receipt)
    except msgspec.DecodeError as exc:
        raise CheckpointError(f"{path}: unreadable receipt ({exc})") from None


def write_receipt(home: Path, receipt: Receipt) -> None:
    write_atomic(receipt_path(home, receipt.segment), msgspec.json.encode(receipt) + b"\n")


def _read_manifest(path: Path, session: str) -> Manifest:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Manifest(session=session)
    try:
        return msgspec.json.decode(data, type=Manifest)
    except msgspec.DecodeError as exc:
        raise CheckpointError(f"{path}: unreadable manifest ({exc})") from None


def publish(home: Path, receipt: Receipt) -> bool:
    """Put ``receipt`` in its session's manifest (once; a newer receipt of the same
    segment, from the owner's explicit re-extraction, replaces it); whether it changed."""
    path = manifest_path(home, receipt.session)
    folder = corpus_dir(home)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        doc = _read_manifest(path, receipt.session)
        held = [i for i, r in enumerate(doc.published) if r.segment == receipt.segment]
        if held and doc.published[held[0]].time >= receipt.time:
            return False
        if held:
            doc.published[held[0]] = receipt
        else:
            doc.published.append(receipt)
        write_atomic(path, msgspec.json.format(msgspec.json.encode(doc), indent=2) + b"\n")
        return True
    finally:
        os.close(fd)


def read_manifests(home: Path, session: str) -> list[Receipt]:
    """The session's published receipts, newest first."""
    doc = _read_manifest(manifest_path(home, session), session)
    return list(reversed(doc.published))


def published(home: Path, session: str) -> set[str]:
    return {r.segment for r in _read_manifest(manifest_path(home, session), session).published}
