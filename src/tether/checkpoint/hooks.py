"""The harness hooks: PreCompact banks the window, SessionStart prints the pack (and is
the backstop after a compaction), SessionEnd banks what no boundary covered.

The guarantee: **bytes durable at the boundary, facts moments after, links at the next
boundary.** Every hook reads the harness's JSON from stdin, always exits 0 and never
returns a decision that could block the harness; what it did is one telemetry line
(``checkpoint.telemetry``), codes and counts only.

- ``pre_compact``: the newest ``TAIL_BYTES`` of the transcript (never nothing: beyond it
  only the tail is read), cut to the window since the last boundary, rendered, private
  spans out, secret-scanned in memory, then written as ``corpus/<session>.seg-<hash24>.txt``
  with its ledger entry, all inside ``[checkpoint] deadline_s`` and before any IPC. A
  deadline too tight to scan is ``deadline_scan``, too tight to write after the scan
  ``deadline_write``: never an unscanned write. Then one round trip to the daemon
  (``ipc.schedule_harvest``) gives the ``flush`` code; absent when no daemon answered.
- ``session_start``: with ``source`` compact (and from ``post_compact``) the backstop
  first: any closed window of the tail the ledger lacks (PreCompact is not always fired)
  is banked (``backstop_banked``). Then the pack (``pack.context_pack``).
- ``session_end``: a full parse (``PARSE_BYTES``; beyond it the newest tail) recomputes
  every boundary window's hash; when the ledger holds each, the open window is banked
  (``remainder``) or nothing is left (``skip_covered``), else the whole parse is banked
  (``full_fallback``). The CLI runs it in a detached child: the harness gives SessionEnd
  little time.

``[checkpoint] auto_writeback`` false banks windows retired (never extracted) and asks the
daemon for nothing; a tether.toml that cannot be read holds them (banked, not scheduled).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tether.checkpoint import pack as packs
from tether.checkpoint.bank import (
    BankReport,
    Boundary,
    bank_redacted,
    corpus_dir,
    ledger,
    redact_text,
    text_hash,
)
from tether.checkpoint.ipc import schedule_harvest
from tether.checkpoint.telemetry import Value, append_line
from tether.core.checkpoint import Entry, Window, coverage, render, split_windows
from tether.errors import CorruptLedgerError
from tether.harnesses import claude_code, codex
from tether.harnesses.hooks import HookInput, parse_hook_input, session_start_output

TAIL_BYTES = 2 * 1024 * 1024
PARSE_BYTES = 10 * 1024 * 1024
#: A deliberately low estimate of the scanner's speed (it runs at ~150 MB/s here): a
#: window whose scan would not fit the time left is a ``deadline_scan``.
SCAN_BYTES_PER_S = 20_000_000
#: Time kept for the segment's write after the scan (else ``deadline_write``).
WRITE_RESERVE_S = 0.05
#: The longest the hook waits for the daemon's answer (within the deadline).
IPC_TIMEOUT_S = 1.0
#: The time the recall step of a session end may take (it runs detached).
UNHURRIED_S = 60.0
#: The fault point between a segment's write and its ledger entry (crash tests).
CRASH_AFTER_WRITE = "hook-after-segment-write"

READERS: dict[str, Callable[[bytes], Entry | str]] = {
    "claude-code": claude_code.window_entry,
    "codex": codex.window_entry,
}
SESSION_IDS: dict[str, Callable[[str], str]] = {
    "claude-code": claude_code.session_id_for,
    "codex": codex.session_id_for,
}


@dataclass(frozen=True)
class HookSetting:
    """What a hook run knows of the home: given by the caller (the CLI)."""

    home: Path
    harness: str
    now: datetime
    started: float  # time.monotonic() when the process started its work
    deadline_s: float = 3.0
    pack_tokens: int = 1500
    allow: frozenset[str] = frozenset()
    #: ``[checkpoint] auto_writeback``: None unset (on), False off; ``config_ok`` False:
    #: tether.toml could not be read (hold: bank, schedule nothing).
    writeback: bool | None = None
    config_ok: bool = True
    #: Called with each window banked (the session, the segment's file name, the time
    #: left) to put its messages in recall at once; returns a telemetry code
    #: (``recall``). Set by the CLI (it indexes, which a service may not); None: banking only.
    on_banked: Callable[[HookSetting, str, str, Callable[[], float]], str] | None = None

    @property
    def retired(self) -> bool:
        return self.writeback is False

    @property
    def extract(self) -> bool:
        return self.config_ok and self.writeback is not False

    def left(self) -> float:
        return self.deadline_s - (time.monotonic() - self.started)


@dataclass
class Outcome:
    """What a hook run did: its telemetry codes, and what it prints."""

    event: str
    session: str | None = None
    segment: str | None = None  # segment_banked, segment_dup, empty_window, deadline_*, ...
    flush: str | None = None  # the daemon's schedule code; None when none answered
    mode: str | None = None  # session end: remainder, skip_covered, full_fallback
    backstop: str | None = None  # backstop_banked, backstop_covered
    recall: str | None = None  # recall_indexed, recall_appended, recall_deferred, recall_error
    trigger: str | None = None
    source: str | None = None
    reason: str | None = None
    size: int = 0
    redactions: int = 0
    links: int = 0
    pack_tokens: int = 0
    ms: int = 0
    error: str | None = None
    stdout: bytes = b""
    banked: list[BankReport] = field(default_factory=list)

    def fields(self) -> dict[str, Value]:
        return {
            "harness": None,
            "session": self.session,
            "segment": self.segment,
            "flush": self.flush,
            "mode": self.mode,
            "backstop": self.backstop,
            "recall": self.recall,
            "trigger": self.trigger,
            "source": self.source,
            "reason": self.reason,
            "bytes": self.size,
            "redactions": self.redactions,
            "links": self.links or None,
            "pack_tokens": self.pack_tokens or None,
            "ms": self.ms,
            "error": self.error,
        }


# -- reading the transcript --------------------------------------------------------------


def read_entries(path: Path, harness: str, limit: int) -> tuple[list[Entry], bool]:
    """The entries of the newest ``limit`` bytes of the transcript, and whether that is
    the whole of it (a tail's first, cut line is dropped; so is a torn last line)."""
    with path.open("rb") as handle:
        size = handle.seek(0, 2)
        start = max(0, size - limit)
        handle.seek(start)
        data = handle.read()
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]
    read = READERS[harness]
    entries = [e for e in map(read, lines) if not isinstance(e, str)]
    return entries, start == 0


def _what(harness: str, w: Window, source: str) -> str:
    turns = w.turns
    span = f"{turns[0].time} .. {turns[-1].time}" if turns else "-"
    return f"{harness} window ({source}), {span}, {len(turns)} turns"


def _hashes(home: Path, session: str) -> tuple[list[Boundary], bool]:
    """The session's ledger, and whether it could be read."""
    try:
        return ledger(home, session), True
    except CorruptLedgerError:
        return [], False


def _bank(
    s: HookSetting, out: Outcome, session: str, w: Window, source: str, *, deadline: bool
) -> BankReport | None:
    text = render(w.turns)
    if not text:
        out.segment = "empty_window"
        return None
    if deadline and s.left() < len(text) / SCAN_BYTES_PER_S + WRITE_RESERVE_S:
        out.segment = "deadline_scan"
        return None
    red = redact_text(text, allow=s.allow)
    if deadline and s.left() < WRITE_RESERVE_S:
        out.segment = "deadline_write"
        return None
    report = bank_redacted(
        s.home,
        session,
        red,
        what=_what(s.harness, w, source),
        time=s.now,
        source=source,
        first=w.first,
        last=w.last,
        turns=len(w.turns),
        retired=s.retired,
        crash_at=CRASH_AFTER_WRITE,
    )
    out.segment = report.code
    out.size += report.bytes
    out.redactions += sum(report.redactions.values())
    out.banked.append(report)
    _recallable(s, out, session, report)
    return report


def _recallable(s: HookSetting, out: Outcome, session: str, report: BankReport) -> None:
    """Put the banked window in recall (``HookSetting.on_banked``); whatever fails here
    leaves the bytes banked (a later pass catches the segment up)."""
    if s.on_banked is None or report.path is None:
        return
    # Session end runs detached (the harness waits for nothing): no deadline there.
    left = s.left if out.event != "session-end" else lambda: UNHURRIED_S
    try:
        out.recall = s.on_banked(s, session, report.path.name, left)
    except Exception as exc:  # the bytes are banked: the recall step may only degrade
        out.recall = "recall_error"
        out.error = out.error or type(exc).__name__


def _flush(s: HookSetting, out: Outcome, session: str, report: BankReport | None) -> None:
    if report is None or report.path is None or not s.extract:
        return
    timeout = min(IPC_TIMEOUT_S, max(s.left(), 0.2))
    code = schedule_harvest(s.home, session, report.path.name, timeout)
    if code is not None:
        out.flush = code


# -- the hooks ---------------------------------------------------------------------------


def _start(s: HookSetting, event: str, data: bytes) -> tuple[Outcome, HookInput | None]:
    out = Outcome(event)
    inp = parse_hook_input(data)
    if isinstance(inp, str):
        out.segment = inp
        return out, None
    if not inp.session_id:
        out.segment = "no_session"
        return out, None
    out.session = SESSION_IDS[s.harness](inp.session_id)
    return out, inp


def _transcript(inp: HookInput, out: Outcome) -> Path | None:
    if not inp.transcript_path:
        out.segment = "no_transcript"
        return None
    path = Path(inp.transcript_path)
    if not path.is_file():
        out.segment = "no_transcript"
        return None
    return path


def pre_compact(s: HookSetting, data: bytes) -> Outcome:
    out, inp = _start(s, "pre-compact", data)
    if inp is None or out.session is None:
        return out
    out.trigger = inp.trigger if inp.trigger in ("manual", "auto") else None
    path = _transcript(inp, out)
    if path is None:
        return out
    entries, whole = read_entries(path, s.harness, TAIL_BYTES)
    windows = split_windows(entries, from_start=whole)
    window = windows[-1]
    if not window.turns and len(windows) > 1:  # called after the boundary was written
        window = windows[-2]
    source = f"pre-compact:{out.trigger or 'unknown'}"
    report = _bank(s, out, out.session, window, source, deadline=True)
    out.ms = int((time.monotonic() - s.started) * 1000)
    _flush(s, out, out.session, report)
    return out


def backstop(s: HookSetting, out: Outcome, path: Path, session: str) -> None:
    """Bank every closed window of the transcript's tail the ledger lacks (by hash; a
    window cut by the tail, by its last record's id)."""
    entries, whole = read_entries(path, s.harness, TAIL_BYTES)
    held, _ = _hashes(s.home, session)
    hashes = {b.hash for b in held}
    lasts = {b.last for b in held if b.last}
    out.backstop = "backstop_covered"
    for w in split_windows(entries, from_start=whole):
        if not w.closed or not w.turns:
            continue
        if (w.last and w.last in lasts) or text_hash(render(w.turns), allow=s.allow) in hashes:
            continue
        report = _bank(s, out, session, w, "backstop", deadline=False)
        if report is not None:
            out.backstop = "backstop_banked"
            _flush(s, out, session, report)


def session_start(s: HookSetting, data: bytes) -> Outcome:
    out, inp = _start(s, "session-start", data)
    session = out.session
    if inp is not None:
        out.source = inp.source
        path = _transcript(inp, out) if inp.source == "compact" else None
        if path is not None and session is not None:
            backstop(s, out, path, session)
    pack = packs.context_pack(s.home, session, budget=s.pack_tokens)
    out.links = pack.links
    out.pack_tokens = pack.tokens
    out.stdout = session_start_output(pack.text)
    out.ms = int((time.monotonic() - s.started) * 1000)
    return out


def post_compact(s: HookSetting, data: bytes) -> Outcome:
    """PostCompact, where the harness has it: the backstop alone."""
    out, inp = _start(s, "post-compact", data)
    if inp is not None and out.session is not None:
        path = _transcript(inp, out)
        if path is not None:
            backstop(s, out, path, out.session)
    out.ms = int((time.monotonic() - s.started) * 1000)
    return out


def session_end(s: HookSetting, data: bytes) -> Outcome:
    out, inp = _start(s, "session-end", data)
    if inp is None or out.session is None:
        return out
    out.reason = inp.reason
    path = _transcript(inp, out)
    if path is None:
        return out
    entries, whole = read_entries(path, s.harness, PARSE_BYTES)
    windows = split_windows(entries, from_start=whole)
    held, readable = _hashes(s.home, out.session)
    banked = frozenset(b.hash for b in held)

    def hash_of(w: Window) -> str | None:
        return text_hash(render(w.turns), allow=s.allow)

    mode = coverage(windows, banked, hash_of) if readable else "full_fallback"
    out.mode = mode
    if mode == "skip_covered":
        return out
    if mode == "remainder":
        window = windows[-1]
    else:
        turns = tuple(t for w in windows for t in w.turns)
        window = Window(0, turns, closed=False, complete=whole)
    source = "remainder" if mode == "remainder" else "full"
    report = _bank(s, out, out.session, window, source, deadline=False)
    out.ms = int((time.monotonic() - s.started) * 1000)
    _flush(s, out, out.session, report)
    return out


def transcript_session(path: Path, harness: str) -> str:
    """The tether session of a transcript: its first ``sessionId`` (Claude Code) or
    ``session_meta`` id (Codex), else the file's name."""
    import json

    with path.open("rb") as handle:
        for _, raw in zip(range(200), handle, strict=False):
            try:
                doc = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(doc, dict):
                continue
            if harness == "claude-code" and isinstance(doc.get("sessionId"), str):
                return SESSION_IDS[harness](doc["sessionId"])
            payload = doc.get("payload")
            meta = doc.get("type") == "session_meta" and isinstance(payload, dict)
            if meta and isinstance(payload, dict) and isinstance(payload.get("id"), str):
                return SESSION_IDS[harness](payload["id"])
    return SESSION_IDS[harness](path.stem)


def bank_transcript(
    home: Path, path: Path, harness: str, now: datetime, allow: frozenset[str]
) -> tuple[str, BankReport]:
    """Bank the whole transcript at ``path`` as one segment (``source`` ingest): what
    ``tether transcripts ingest`` extracts. Never retired: the owner asked for it."""
    session = transcript_session(path, harness)
    entries, whole = read_entries(path, harness, path.stat().st_size + 1)
    turns = tuple(t for w in split_windows(entries, from_start=whole) for t in w.turns)
    window = Window(0, turns, closed=False, complete=True)
    red = redact_text(render(turns), allow=allow)
    report = bank_redacted(
        home,
        session,
        red,
        what=_what(harness, window, "ingest"),
        time=now,
        source="ingest",
        first=window.first,
        last=window.last,
        turns=len(turns),
    )
    return session, report


HOOKS: dict[str, Callable[[HookSetting, bytes], Outcome]] = {
    "pre-compact": pre_compact,
    "session-start": session_start,
    "session-end": session_end,
    "post-compact": post_compact,
}


def run_hook(s: HookSetting, event: str, data: bytes) -> Outcome:
    """Run one hook; whatever it raises becomes the ``error`` of its outcome (the hook
    still exits 0). Its telemetry line is appended either way."""
    try:
        out = HOOKS[event](s, data)
    except Exception as exc:  # a hook never fails its harness: the error is its line
        out = Outcome(event, error=type(exc).__name__)
        if event == "session-start":
            out.stdout = session_start_output("")
    if not out.ms:
        out.ms = int((time.monotonic() - s.started) * 1000)
    fields = out.fields()
    fields["harness"] = s.harness
    append_line(s.home, s.now, event, **fields)
    return out


def corpus_ready(home: Path) -> Path:
    folder = corpus_dir(home)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder
