"""Bank the raw pre-compaction window before it is summarised.

Compaction replaces an epoch's records with a summary; whatever the summary drops is gone
from the model's context. So before the summary is asked for, the records since the last
boundary are rendered as a plain-text transcript, secret-scanned and redacted, and written
to ``corpus/<session>.seg-<hash24>.txt``; the next epoch's carry names the segment as a
``tether://corpus/<session>.seg-<hash24>`` link the agent can re-read (``read_segment``).

Contract:

- **Never unscanned, never in clear.** Redaction happens in memory before any byte reaches
  the disk, temporary files included (``write_atomic`` only ever sees redacted bytes).
- **Content-addressed.** ``hash24`` is the first 24 hex digits of SHA-256 over the redacted
  transcript (the segment file's header line is not hashed), so banking the same window
  twice writes one file (``segment_dup``), and a later pass can recompute a window's hash
  from the log alone (``window_hash``) to check coverage. The hash depends on the allow
  list: changing ``.tether-scan-allow`` changes the hash of a window holding an allowed hit.
- **Ledger.** ``corpus/<session>.ledger.json`` lists every boundary (epoch, hash, segment,
  time, bytes, redaction counts, which lane banked it, the harness's first and last record
  ids, and for a window banked in parts its ``window``, ``part`` and ``parts``; never
  content), appended once per (epoch, hash) under a lock on the corpus folder and rewritten
  atomically. For a harness's session (``bank_redacted``) ``epoch`` is the entry's ordinal
  in the ledger.
- **Private.** ``<private>...</private>`` text is ``[private]`` in every segment
  (``core.checkpoints.window.strip_private``), in tether's own sessions as in a harness's.
- **One corpus folder.** ``corpus_dir`` is where the hooks, the daemon's harvest and the
  maintenance pass all look: ``<home>/corpus``. The segment is written first: a crash
  in between leaves a segment without its boundary, and the retry (a ``segment_dup``)
  records it.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from tether.core.checkpoints.window import strip_private
from tether.errors import (
    BadInputError,
    CheckpointError,
    CorruptLedgerError,
    InvalidIdError,
    NotFoundError,
)
from tether.faults import crash_point
from tether.files import write_atomic
from tether.ids import session_id
from tether.records import (
    Assistant,
    EpochEnd,
    LogRecord,
    NonNegative,
    SessionStart,
    ToolCall,
    ToolResult,
    ToolSummary,
    TurnError,
    Usage,
    User,
    UtcTime,
    is_utc,
)
from tether.scan import redact_bytes

CORPUS_DIR = "corpus"
LINK_PREFIX = "tether://corpus/"
SEGMENT_GRAMMAR = "tether://corpus/<session>.seg-<24 lowercase hex> (session: [a-z0-9-]{1,64})"
_SEGMENT = re.compile(r"(?:tether://corpus/)?([a-z0-9-]{1,64})\.seg-([0-9a-f]{24})(?:\.txt)?")

BankCode = Literal["segment_banked", "segment_dup", "empty_window"]
Hash24 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{24}$")]


class Boundary(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One compaction boundary whose window is banked: counts and names, never content."""

    epoch: NonNegative
    hash: Hash24
    segment: str
    time: UtcTime
    bytes: NonNegative
    redactions: dict[str, NonNegative] = {}
    #: Which lane banked it: ``tether`` (the runtime's compaction), ``pre-compact:auto``,
    #: ``pre-compact:manual``, ``backstop``, ``remainder``, ``full``, ``ingest``.
    source: str = "tether"
    #: The harness's ids of the window's first and last records ("" when it has none).
    first: str = ""
    last: str = ""
    turns: NonNegative = 0
    #: Banked while ``[checkpoint] auto_writeback`` was false: never extracted.
    retired: bool = False
    #: A window too long for one segment is banked in parts: ``part`` of ``parts`` (from
    #: 1, in the window's order) of the window whose first record id is ``window``; 0
    #: when it was banked whole before parts existed.
    window: str = ""
    part: NonNegative = 0
    parts: NonNegative = 0


class _Ledger(msgspec.Struct, forbid_unknown_fields=True):
    session: str
    boundaries: list[Boundary] = msgspec.field(default_factory=list)


_ledger_decoder = msgspec.json.Decoder(_Ledger)


@dataclass(frozen=True)
class BankReport:
    """What ``bank_window`` did; ``code`` is the telemetry reason code."""

    code: BankCode
    hash: str | None = None
    path: Path | None = None
    link: str | None = None
    bytes: int = 0
    redactions: dict[str, int] = field(default_factory=dict)


# -- names ------------------------------------------------------------------------------


def segment_name(session: str, hash24: str) -> str:
    """``<session>.seg-<hash24>``: the segment's link name (the file adds ``.txt``)."""
    return f"{session_id(session)}.seg-{hash24}"


def segment_link(session: str, hash24: str) -> str:
    return LINK_PREFIX + segment_name(session, hash24)


def corpus_dir(home: Path) -> Path:
    """The corpus folder: the one place the hooks, the harvest and the maintenance pass
    resolve it from."""
    return home / CORPUS_DIR


def ledger_path(home: Path, session: str) -> Path:
    return corpus_dir(home) / f"{session_id(session)}.ledger.json"


def parse_segment_link(link_or_name: str) -> tuple[str, str]:
    """(session, hash24) of a ``tether://corpus/...`` link or a bare segment (file) name.

    The grammar admits no ``/`` and no ``..``, so a link can only name a file directly in
    ``corpus/``.
    """
    m = _SEGMENT.fullmatch(link_or_name)
    if m is None:
        raise InvalidIdError("segment link", link_or_name, SEGMENT_GRAMMAR)
    return m.group(1), m.group(2)


# -- rendering --------------------------------------------------------------------------


def _ts(time: datetime) -> str:
    return time.isoformat().replace("+00:00", "Z")


def _trust(untrusted: bool) -> str:
    return "untrusted" if untrusted else "trusted"


def _block(record: LogRecord, ts: str) -> str | None:
    """One record's block (not yet indented), or None for bookkeeping records."""
    kind = type(record)
    if kind is User:
        assert isinstance(record, User)
        who = f" ({record.speaker})" if record.speaker else ""
        return f"[{ts}] USER{who}: {strip_private(record.text)}"
    if kind is Assistant:
        assert isinstance(record, Assistant)
        return f"[{ts}] ASSISTANT: {strip_private(record.text)}"
    if kind is ToolCall:
        assert isinstance(record, ToolCall)
        args = msgspec.json.encode(record.args, order="sorted").decode()
        return f"[{ts}] TOOL CALL {record.name}({args}) id={record.id}"
    if kind is ToolResult:
        assert isinstance(record, ToolResult)
        trust = _trust(record.untrusted)
        content = strip_private(record.content)
        return f"[{ts}] TOOL RESULT id={record.tool_call_id} ({record.class_}, {trust}): {content}"
    if kind is ToolSummary:
        assert isinstance(record, ToolSummary)
        trust = _trust(record.untrusted)
        return (
            f"[{ts}] TOOL SUMMARY id={record.tool_call_id} of {record.call}"
            f" ({record.class_}, {trust}): {record.content}"
        )
    if kind is TurnError:
        assert isinstance(record, TurnError)
        return f"[{ts}] TURN ERROR: {record.kind}"
    if kind is EpochEnd:
        assert isinstance(record, EpochEnd)
        return f"[{ts}] EPOCH END (next epoch {record.next}): {record.summary}"
    assert isinstance(record, SessionStart | Usage)
    return None


_times = msgspec.json.Decoder(list[str])


def render_window(records: Sequence[LogRecord]) -> str:
    """A readable, deterministic transcript of ``records``: one block per record.

    ``[time] USER (speaker): text``, ``ASSISTANT: text``, ``TOOL CALL name({args}) id=..``
    (arguments as compact JSON with sorted keys), ``TOOL RESULT id=.. (class, untrusted):
    content``, ``TOOL SUMMARY``, ``TURN ERROR``, ``EPOCH END``. SessionStart and Usage are
    bookkeeping (epoch, slot, token counts) and are left out; the segment header names the
    epoch. Continuation lines are indented by two spaces, so a line starting with ``[`` at
    column 0 is always a record of ours: a tool result cannot forge a ``USER:`` line.
    Blocks are separated by a blank line; empty when nothing is left to render.
    """
    # One msgspec call formats every time (RFC 3339, "Z"): datetime.isoformat per record
    # was a third of the rendering time. Exact type dispatch, not an isinstance chain.
    times = _times.decode(msgspec.json.encode([r.time for r in records]))
    blocks: list[str] = []
    for r, ts in zip(records, times, strict=True):
        block = _block(r, ts)
        if block is not None:
            blocks.append(block.replace("\n", "\n  "))
    return "\n\n".join(blocks) + "\n" if blocks else ""


def _redacted(records: Sequence[LogRecord], allow: frozenset[str]) -> tuple[bytes, dict[str, int]]:
    red = redact_bytes(render_window(records).encode(), allow=allow)
    return red.data, red.counts


def window_hash(records: Sequence[LogRecord], *, allow: frozenset[str] = frozenset()) -> str | None:
    """The hash24 ``bank_window`` gives these records (None for an empty window)."""
    body, _ = _redacted(records, allow)
    return hashlib.sha256(body).hexdigest()[:24] if body else None


# -- banking ----------------------------------------------------------------------------


@contextmanager
def _corpus_lock(corpus: Path) -> Iterator[None]:
    """Serialise ledger read-modify-writes across processes (flock on the folder)."""
    fd = os.open(corpus, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read_ledger(path: Path, session: str) -> _Ledger:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return _Ledger(session=session)
    try:
        doc = _ledger_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise CorruptLedgerError(path, str(exc)) from None
    if doc.session != session:
        raise CorruptLedgerError(path, f"it names session {doc.session!r}, not {session!r}")
    return doc


def _record_boundary(
    home: Path, session: str, boundary: Boundary, *, by_hash: bool = False
) -> Boundary:
    """Append ``boundary`` unless the ledger has it (same epoch and hash; with ``by_hash``
    the hash alone); the entry the ledger holds."""
    path = ledger_path(home, session)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _corpus_lock(path.parent):
        doc = _read_ledger(path, session)
        for b in doc.boundaries:
            if b.hash == boundary.hash and (by_hash or b.epoch == boundary.epoch):
                return b
        if by_hash:
            boundary = msgspec.structs.replace(boundary, epoch=len(doc.boundaries))
        doc.boundaries.append(boundary)
        data = msgspec.json.format(msgspec.json.encode(doc), indent=2) + b"\n"
        write_atomic(path, data)
        return boundary


def _header(session: str, epoch: int, records: Sequence[LogRecord], hash24: str) -> bytes:
    span = f"{_ts(records[0].time)} .. {_ts(records[-1].time)}"
    return (
        f"# tether segment {hash24}: session {session}, epoch {epoch}, {span}, "
        f"{len(records)} records (secrets redacted)\n\n"
    ).encode()


def _same_body(path: Path, body: bytes) -> bool | None:
    """Whether the segment at ``path`` holds ``body`` (None: there is no such file)."""
    try:
        existing = path.read_bytes()
    except FileNotFoundError:
        return None
    _, sep, rest = existing.partition(b"\n\n")
    return bool(sep) and rest == body


def bank_window(
    home: Path,
    session: str,
    records: Sequence[LogRecord],
    *,
    epoch: int,
    time: datetime,
    allow: frozenset[str] = frozenset(),
) -> BankReport:
    """Render, redact and bank the window ``records``; record the boundary in the ledger.

    ``time`` is the boundary's time (UTC); ``allow`` the allow-list fingerprints. A file of
    that name whose body differs (edited by hand) is rewritten: the name is the truth.
    """
    session_id(session)
    if time.tzinfo is None or not is_utc(time):
        raise BadInputError(f"boundary time must be UTC, got {time.isoformat()}")
    body, counts = _redacted(records, allow)
    if not body:
        return BankReport("empty_window")
    hash24 = hashlib.sha256(body).hexdigest()[:24]
    name = segment_name(session, hash24)
    path = home / CORPUS_DIR / f"{name}.txt"
    same = _same_body(path, body)
    if same:
        code: BankCode = "segment_dup"
    else:
        write_atomic(path, _header(session, epoch, records, hash24) + body)
        code = "segment_banked"
    size = path.stat().st_size
    boundary = Boundary(
        epoch=epoch, hash=hash24, segment=path.name, time=time, bytes=size, redactions=counts
    )
    _record_boundary(home, session, boundary)
    return BankReport(code, hash24, path, LINK_PREFIX + name, size, counts)


@dataclass(frozen=True)
class Redacted:
    """A window's text as it will be banked: private spans out, secrets redacted, hashed."""

    body: bytes
    counts: dict[str, int]
    hash: str | None  # None: nothing to bank


def redact_text(text: str, *, allow: frozenset[str] = frozenset()) -> Redacted:
    """The scan of a rendered window: what ``bank_redacted`` writes, and its hash24."""
    red = redact_bytes(strip_private(text).encode(), allow=allow)
    body = red.data
    if not body.strip():
        return Redacted(b"", {}, None)
    return Redacted(body, red.counts, hashlib.sha256(body).hexdigest()[:24])


def bank_redacted(
    home: Path,
    session: str,
    red: Redacted,
    *,
    what: str,
    time: datetime,
    source: str,
    first: str = "",
    last: str = "",
    turns: int = 0,
    retired: bool = False,
    crash_at: str | None = None,
    window: str = "",
    part: int = 0,
    parts: int = 0,
) -> BankReport:
    """Bank a window of a harness's session, scanned by ``redact_text``; ``what``
    describes it in the segment's header line. The ledger entry is keyed by hash, and by
    its range of record ids (``first``, ``last``) when it has one: the header line names
    the range too, so a segment whose ledger entry a crash lost is adopted by the next
    hook (``adopt_orphans``) instead of banked again. ``crash_at`` names the fault point
    between the segment write and its ledger entry."""
    session_id(session)
    if time.tzinfo is None or not is_utc(time):
        raise BadInputError(f"boundary time must be UTC, got {time.isoformat()}")
    if red.hash is None:
        return BankReport("empty_window")
    name = segment_name(session, red.hash)
    path = corpus_dir(home) / f"{name}.txt"
    if _same_body(path, red.body):
        code: BankCode = "segment_dup"
    else:
        rng = _range_note(first, last, window, part, parts)
        header = (
            f"# tether segment {red.hash}: session {session}, {what}{rng} (secrets redacted)\n\n"
        )
        write_atomic(path, header.encode() + red.body)
        code = "segment_banked"
    if crash_at is not None:
        crash_point(crash_at)
    size = path.stat().st_size
    boundary = Boundary(
        epoch=0,
        hash=red.hash,
        segment=path.name,
        time=time,
        bytes=size,
        redactions=red.counts,
        source=source,
        first=first,
        last=last,
        turns=turns,
        retired=retired,
        window=window,
        part=part,
        parts=parts,
    )
    _record_boundary(home, session, boundary, by_hash=True)
    return BankReport(code, red.hash, path, LINK_PREFIX + name, size, red.counts)


_IDS = re.compile(r"[A-Za-z0-9@:_-]{1,128}")


def _range_note(first: str, last: str, window: str, part: int, parts: int) -> str:
    """The range a header line names (for ``adopt_orphans``): ids of the grammar only."""
    if not (_IDS.fullmatch(first) and _IDS.fullmatch(last)):
        return ""
    note = f", records {first} .. {last}"
    if part and _IDS.fullmatch(window):
        note += f", part {part} of {parts} of window {window}"
    return note


def record_entry(home: Path, session: str, boundary: Boundary) -> Boundary:
    """Append a harness window's entry unless the ledger holds its hash."""
    return _record_boundary(home, session, boundary, by_hash=True)


def text_hash(text: str, *, allow: frozenset[str] = frozenset()) -> str | None:
    """The hash24 ``bank_redacted`` gives ``text`` (None when nothing would be banked)."""
    return redact_text(text, allow=allow).hash


def sessions_banked(home: Path) -> list[str]:
    """Every session with a ledger in the corpus folder, by name."""
    folder = corpus_dir(home)
    if not folder.is_dir():
        return []
    return sorted(p.name.removesuffix(".ledger.json") for p in folder.glob("*.ledger.json"))


def retire(home: Path, session: str, hashes: frozenset[str]) -> int:
    """Mark the ledger entries of ``hashes`` retired (never to be extracted); how many
    changed."""
    path = ledger_path(home, session)
    with _corpus_lock(path.parent):
        doc = _read_ledger(path, session)
        changed = 0
        for i, b in enumerate(doc.boundaries):
            if b.hash in hashes and not b.retired:
                doc.boundaries[i] = msgspec.structs.replace(b, retired=True)
                changed += 1
        if changed:
            write_atomic(path, msgspec.json.format(msgspec.json.encode(doc), indent=2) + b"\n")
    return changed


# -- reading ----------------------------------------------------------------------------


def read_segment(home: Path, link_or_name: str) -> str:
    """The text of a banked segment named by its ``tether://`` link or its (file) name:
    the header line, a blank line, then the redacted transcript.

    This is what the page-read tool resolves ``tether://corpus/...`` links with. The name
    is checked against its grammar before any path is built, and a symbolic link planted
    in ``corpus/`` is refused rather than followed out of the home.
    """
    session, hash24 = parse_segment_link(link_or_name)
    path = home / CORPUS_DIR / f"{session}.seg-{hash24}.txt"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise NotFoundError(f"no banked segment {LINK_PREFIX}{session}.seg-{hash24}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CheckpointError(f"{path}: refusing to follow a symbolic link") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        data = handle.read()
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path}: not UTF-8 text ({exc.reason})") from None


def ledger(home: Path, session: str) -> list[Boundary]:
    """The session's banked boundaries, oldest first; empty when nothing was banked."""
    return list(_read_ledger(ledger_path(home, session), session_id(session)).boundaries)
