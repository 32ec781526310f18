"""``tether memory scan``: find, and on request redact, secrets already in durable memory.

Writers of memory screen what they write (``tether.scan.screen``), but a home can hold
text that never went through them: memory.md edited by hand, notes, pages and sweep facts
written by a version of tether that did not screen, a journal that kept the text before
and after each edit, a fingerprint removed from the allow-list since. This scans all of
it with the same rules and the home's allow-list:

- ``memory.md`` (the identity, in every prompt: shown redacted, but kept as written);
- in the store (``Store.read_cells``): notes, page titles and bodies, the memory journal;
- in the sweep's store (``SweepStore.read_cells``, when one is given): sweep facts, the
  sweep journal, standing-trigger conditions, staged day packets.

A place is reported by name, line, rule and fingerprint, never with the secret. With
``redact``, each place is rewritten with ``[REDACTED:<rule>]`` where it still holds the
text that was scanned (a write meanwhile is left alone and reported as left), the store's
freed pages are zeroed and its write-ahead log truncated, and one journal entry says how
many were replaced. Two places are left on purpose, each with its reason: a staged day the
sweep is in the middle of (its receipts keep the stage's digests; the sweep redacts those
candidates when it applies them) and a stage whose ids hold a secret (the sweep refuses
that day). Session logs are not memory: they keep what was said (see docs/cli.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from tether.core.sweep.errors import ConditionError, PacketError
from tether.core.sweep.packet import decode_packet, encode_packet
from tether.core.sweep.triggers import compile_text
from tether.memory.identity import Identity
from tether.ports import Progress, ScanStore, SweepStore
from tether.records import JournalEntry, TextCell
from tether.scan import packets
from tether.scan.secrets import Finding, redact, scan

BUSY_STAGE = "the sweep is in the middle of this day; it redacts the candidates as it applies them"
KEY_STAGE = "an id of this packet holds a secret; the sweep refuses the day (secret_in_key)"
CHANGED = "it changed while the scan ran; scan again"
IN_KEY = "it is in a key or an id, which cannot be redacted in place"
MALFORMED = "it is not valid JSON of its kind, so it cannot be rewritten in place"


@dataclass(frozen=True)
class SecretPlace:
    """Where one secret is: never the secret itself."""

    kind: str  # identity, note, page, journal, fact, sweep-journal, trigger, stage
    where: str  # "memory.md", "note 7", "page people/ada (body)", ...
    line: int
    rule: str
    fingerprint: str
    redacted: bool = False
    left: str | None = None  # why it is still in clear after a redacting scan


@dataclass(frozen=True)
class ScanReport:
    places: tuple[SecretPlace, ...]
    #: After a redacting scan: whether the store's write-ahead log was truncated (None
    #: when nothing in the store was rewritten).
    log_truncated: bool | None = None

    @property
    def remaining(self) -> int:
        return sum(not p.redacted for p in self.places)


def _where(cell: TextCell) -> str:
    if cell.kind == "page":
        return f"page {cell.name} ({cell.column})"
    if cell.kind in ("journal", "sweep-journal"):
        return f"{cell.kind.replace('-', ' ')} {cell.name} ({cell.column})"
    return f"{cell.kind} {cell.name}"


def _places(kind: str, where: str, text: str, found: list[Finding]) -> list[SecretPlace]:
    return [
        SecretPlace(kind, where, text.count("\n", 0, f.start) + 1, f.rule, f.fingerprint_in(text))
        for f in found
    ]


def _redacted(cell: TextCell, allow: frozenset[str]) -> tuple[str | None, str]:
    """The cell's text with its secrets redacted, or None and why it must stay as it is."""
    if cell.kind == "stage":
        try:
            packet = decode_packet(cell.text.encode())
        except PacketError:
            return None, MALFORMED
        try:
            clean, _ = packets.redact_packet(packet, allow)
        except PacketError:
            return None, KEY_STAGE
        return encode_packet(clean).decode(), ""
    if cell.kind == "trigger":
        try:
            raw: Any = json.loads(cell.text)
        except ValueError:
            return None, MALFORMED
        redacted, _ = packets.redact_condition(raw, allow)
        try:
            return compile_text(redacted), ""
        except ConditionError as exc:
            return None, f"the redacted condition is not a valid trigger ({exc.reason})"
    return redact(cell.text, allow=allow).text, ""


def scan_memory(
    identity: Identity,
    store: ScanStore,
    *,
    allow: frozenset[str],
    fix: bool,
    time: datetime,
    who: str = "owner",
    sweep: SweepStore | None = None,
    meter: Progress | None = None,
) -> ScanReport:
    """Every secret in durable memory (see the module doc); with ``fix``, redacted."""
    places: list[SecretPlace] = []
    text = identity.text()
    found = scan(text, allow=allow)
    mine = _places("identity", "memory.md", text, found)
    if fix and found:
        done = identity.redact(allow, who=who, time=time, expect=text) > 0
        mine = [replace(p, redacted=done, left=None if done else CHANGED) for p in mine]
    places += mine

    found_in: list[tuple[TextCell, str, list[SecretPlace]]] = []  # cell, new text, places

    if meter is not None:
        meter.stage("scanning memory")

    def visit(cell: TextCell) -> None:
        if meter is not None:
            meter.advance()
        hits = scan(cell.text, allow=allow)
        if not hits:
            return
        at = _places(cell.kind, _where(cell), cell.text, hits)
        if not fix:
            places.extend(at)
            return
        if cell.busy:
            places.extend(replace(p, left=BUSY_STAGE) for p in at)
            return
        new, why = _redacted(cell, allow)
        if new is None or new == cell.text:
            places.extend(replace(p, left=why or IN_KEY) for p in at)
            return
        found_in.append((cell, new, at))

    store.read_cells(visit)
    in_store = len(found_in)  # the store's cells come first, then the sweep's
    if sweep is not None:
        sweep.read_cells(visit)
    if not found_in:
        return ScanReport(tuple(places))
    edits = [(cell, new) for cell, new, _ in found_in]
    # The sweep's first: when both are one file (SQLite), the store's truncation of the
    # write-ahead log comes after every rewrite.
    made_sweep: list[bool] = []
    truncated: list[bool] = []
    if sweep is not None and edits[in_store:]:
        made_sweep, log = sweep.rewrite_cells(edits[in_store:])
        truncated.append(log)
    made_store: list[bool] = []
    if edits[:in_store]:
        made_store, log = store.rewrite_cells(edits[:in_store])
        truncated.append(log)
    made = made_store + made_sweep
    secrets = 0
    for (_, _, at), ok in zip(found_in, made, strict=True):
        places.extend(replace(p, redacted=ok, left=None if ok else CHANGED) for p in at)
        secrets += len(at) if ok else 0
    store.journal_append(
        JournalEntry(
            time=time,
            who=who,
            session=None,
            action="redact",
            target="memory",
            before=None,
            after=f"{secrets} secrets redacted in {sum(made)} places",
        )
    )
    return ScanReport(tuple(places), log_truncated=all(truncated))
