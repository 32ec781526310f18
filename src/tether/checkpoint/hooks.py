"""The harness hooks: PreCompact banks the window, SessionStart prints the pack (and is
the backstop after a compaction), SessionEnd banks what no boundary covered.

The guarantee: **bytes durable at the boundary, facts moments after, links at the next
boundary.** Every hook reads the harness's JSON from stdin, always exits 0 and never
returns a decision that could block the harness; what it did is one telemetry line
(``checkpoint.telemetry``), codes and counts only.

Banking is by content range: a window is read whole from its boundary
(``checkpoint.transcript``: a byte search from the end, then a parse of that window
alone), cut into parts of at most ``PART_CHARS`` on a grid fixed by the window's own turns
(``core.checkpoints.parts``), and each part the ledger does not already hold (by the
harness's record ids: a range inside a banked one adds nothing) is banked as one segment
and one ledger entry (``_bank``). All of it under the session's lock
(``orphans.session_lock``); a segment a crash left without its entry is adopted first
(``_adopt``), never banked twice.

- ``pre_compact``: the window since the last boundary, part by part inside ``[checkpoint]
  deadline_s``, each rendered, private spans out, secret-scanned in memory, written before
  any IPC. A part too big to scan in the time left is ``deadline_scan``, too tight to
  write after the scan ``deadline_write``: never an unscanned write. What the deadline
  leaves of a window of several parts (``segment_partial``, ``rest_bytes``) is finished by
  a detached child (``rest`` detached: ``pre-compact --rest-from OFFSET``); of a window of
  one part, or when no child starts, by the next hook (``rest`` next_hook: the backstop
  after the compaction, or session end). Then one round trip to the daemon per segment
  (``ipc.schedule_harvest``) gives the ``flush`` code; absent when no daemon answered.
- ``session_start``: with ``source`` compact (and from ``post_compact``) the backstop
  first: what the ledger lacks of every closed window that begins within the newest
  ``TAIL_BYTES`` (or spans its start) is banked (``backstop_banked``). Then the pack.
- ``session_end``: the whole transcript, streamed; when what the ledger lacks lies after
  the last boundary it is banked as ``remainder``, when nothing is left ``skip_covered``,
  else ``full_fallback`` banks what is missing of the whole transcript (as one window).
  The CLI runs it in a detached child: the harness gives SessionEnd little time.

``[checkpoint] auto_writeback`` false banks windows retired (never extracted) and asks the
daemon for nothing; a tether.toml that cannot be read holds them (banked, not scheduled).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import cast

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
from tether.checkpoint.orphans import adopt_orphan, orphans, session_lock
from tether.checkpoint.telemetry import Value, append_line
from tether.checkpoint.transcript import TranscriptFile
from tether.core.checkpoints.parts import Piece, covered, pieces
from tether.core.checkpoints.window import Turn, Window, render
from tether.errors import CorruptLedgerError
from tether.faults import pause_point
from tether.harnesses import claude_code, codex
from tether.harnesses.hooks import HookInput, parse_hook_input, session_start_output

#: The backstop looks at the windows that begin within (or span the start of) the newest
#: TAIL_BYTES of the transcript; older ones are session end's.
TAIL_BYTES = 2 * 1024 * 1024
#: The most rendered text one segment holds: a longer window is banked in parts.
PART_CHARS = 2 * 1024 * 1024
#: A deliberately low estimate of the scanner's speed (it runs at ~150 MB/s here): a
#: part whose scan would not fit the time left is a ``deadline_scan``.
SCAN_BYTES_PER_S = 20_000_000
#: Time kept for the segment's write after the scan (else ``deadline_write``).
WRITE_RESERVE_S = 0.05
#: The longest the hook waits for the daemon's answer (within the deadline).
IPC_TIMEOUT_S = 1.0
#: The time the recall step of a session end may take (it runs detached).
UNHURRIED_S = 60.0
#: The fault point between a segment's write and its ledger entry (crash tests).
CRASH_AFTER_WRITE = "hook-after-segment-write"
#: The pause point between a window's banking and its recall step (a test holds the hook
#: there past its deadline: the recall step is deferred, whatever the machine's speed).
PAUSE_BEFORE_RECALL = "hook-before-recall"
DEADLINE_CODES = ("deadline_scan", "deadline_write", "deadline_lock")

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
    #: PreCompact's detached child: bank what is left of the window that begins at this
    #: byte of the transcript, with no deadline (``--rest-from``).
    rest_from: int | None = None
    #: Starts that child (the CLI's); False when it could not be started.
    detach: Callable[[int], bool] | None = None
    #: ``[checkpoint] auto_writeback``: None unset (on), False off; ``config_ok`` False:
    #: tether.toml could not be read (hold: bank, schedule nothing).
    writeback: bool | None = None
    config_ok: bool = True
    #: Called with each window banked (the session, the segment's file name, the time
    #: left) to put its messages in recall at once; returns telemetry codes (``recall``,
    #: ``vectors``). Set by the CLI (it indexes, which a service may not); None: banking only.
    on_banked: (
        Callable[[HookSetting, str, str, Callable[[], float]], tuple[str, str | None]] | None
    ) = None

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
    vectors: str | None = None  # embedded, deferred (to the next recall), off, error
    trigger: str | None = None
    source: str | None = None
    reason: str | None = None
    size: int = 0
    redactions: int = 0
    links: int = 0
    pack_tokens: int = 0
    ms: int = 0
    error: str | None = None
    parts: int = 0  # segments written or recorded by this run
    rest: str | None = None  # detached, next_hook (the deadline left some), finished
    rest_bytes: int = 0  # rendered bytes of what the deadline left
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
            "vectors": self.vectors,
            "trigger": self.trigger,
            "source": self.source,
            "reason": self.reason,
            "bytes": self.size,
            "redactions": self.redactions,
            "links": self.links or None,
            "pack_tokens": self.pack_tokens or None,
            "ms": self.ms,
            "error": self.error,
            "parts": self.parts if self.parts > 1 or self.rest else None,
            "rest": self.rest,
            "rest_bytes": self.rest_bytes or None,
        }


# -- banking by range ------------------------------------------------------------------------


def _what(harness: str, window: Window, source: str) -> str:
    turns = window.turns
    span = f"{turns[0].time} .. {turns[-1].time}" if turns else "-"
    return f"{harness} window ({source}), {span}, {len(turns)} turns"


def _hashes(home: Path, session: str) -> tuple[list[Boundary], bool]:
    """The session's ledger, and whether it could be read."""
    try:
        return ledger(home, session), True
    except CorruptLedgerError:
        return [], False


def _bank(
    setting: HookSetting,
    out: Outcome,
    session: str,
    window: Window,
    source: str,
    *,
    deadline: bool,
    piece: Piece | None = None,
) -> BankReport | None:
    text = render(window.turns)
    if not text:
        out.segment = "empty_window"
        return None
    if deadline and setting.left() < len(text) / SCAN_BYTES_PER_S + WRITE_RESERVE_S:
        out.segment = "deadline_scan"
        return None
    red = redact_text(text, allow=setting.allow)
    if deadline and setting.left() < WRITE_RESERVE_S:
        out.segment = "deadline_write"
        return None
    report = bank_redacted(
        setting.home,
        session,
        red,
        what=_what(setting.harness, window, source),
        time=setting.now,
        source=source,
        first=window.first,
        last=window.last,
        turns=len(window.turns),
        retired=setting.retired,
        crash_at=CRASH_AFTER_WRITE,
        window=piece.key if piece is not None else "",
        part=piece.part if piece is not None else 0,
        parts=piece.parts if piece is not None else 0,
    )
    out.segment = report.code
    out.size += report.bytes
    out.redactions += sum(report.redactions.values())
    out.parts += 1
    out.banked.append(report)
    _recallable(setting, out, session, report)
    return report


def _recallable(setting: HookSetting, out: Outcome, session: str, report: BankReport) -> None:
    """Put the banked window in recall (``HookSetting.on_banked``); whatever fails here
    leaves the bytes banked (a later pass catches the segment up)."""
    if setting.on_banked is None or report.path is None:
        return
    pause_point(PAUSE_BEFORE_RECALL)
    # Session end runs detached (the harness waits for nothing): no deadline there.
    left = setting.left if out.event != "session-end" else lambda: UNHURRIED_S
    try:
        out.recall, out.vectors = setting.on_banked(setting, session, report.path.name, left)
    except Exception as exc:  # the bytes are banked: the recall step may only degrade
        out.recall = "recall_error"
        out.error = out.error or type(exc).__name__


def _flush(setting: HookSetting, out: Outcome, session: str, report: BankReport | None) -> None:
    if report is None or report.path is None or not setting.extract:
        return
    timeout = min(IPC_TIMEOUT_S, max(setting.left(), 0.2))
    code = schedule_harvest(setting.home, session, report.path.name, timeout)
    if code is not None:
        out.flush = code


def _adopt(setting: HookSetting, out: Outcome, session: str, turns: Sequence[Turn]) -> None:
    """Give every orphan of the session (a segment a crash left without its ledger entry)
    its entry: through ``_bank`` again when its range is in ``turns`` (the same text, a
    ``segment_dup``), else from its header."""
    at = {t.uid: i for i, t in enumerate(turns)}
    for o in orphans(setting.home, session):
        i, j = at.get(o.first), at.get(o.last)
        if i is not None and j is not None and i <= j:
            w = Window(0, tuple(turns[i : j + 1]), True, True)
            if text_hash(render(w.turns), allow=setting.allow) == o.hash:
                piece = Piece(w.turns, o.part, o.parts, o.window)
                if _bank(setting, out, session, w, o.source, deadline=False, piece=piece):
                    continue
        adopt_orphan(setting.home, session, o, at=setting.now, retired=setting.retired)


def _cover(
    setting: HookSetting,
    out: Outcome,
    session: str,
    turns: Sequence[Turn],
    windows: Sequence[Window],
) -> list[bool]:
    """Which ``turns`` the ledger holds (orphans adopted first): by range, and, for each of
    ``windows`` (their turns in order make ``turns``), by the whole window's hash (a
    ledger entry of a harness with no record ids)."""
    _adopt(setting, out, session, turns)
    held = ledger(setting.home, session)
    cover = covered(turns, [(b.first, b.last) for b in held if b.last])
    hashes = {b.hash for b in held}
    at = 0
    for w in windows:
        n = len(w.turns)
        if (
            not all(cover[at : at + n])
            and text_hash(render(w.turns), allow=setting.allow) in hashes
        ):
            cover[at : at + n] = [True] * n
        at += n
    return cover


def _bank_pieces(
    setting: HookSetting,
    out: Outcome,
    session: str,
    todo: Sequence[Piece],
    source: str,
    *,
    deadline: bool,
) -> list[Piece]:
    """Bank each piece, one segment and ledger entry each; what the deadline left."""
    for k, p in enumerate(todo):
        w = Window(0, p.turns, True, True)
        report = _bank(setting, out, session, w, source, deadline=deadline, piece=p)
        if report is None and out.segment in DEADLINE_CODES:
            return list(todo[k:])
    return []


def _holding(home: Path, session: str, turns: Sequence[Turn]) -> list[str]:
    """The segments whose ranges end in ``turns`` (what holds a window banked before)."""
    uids = {t.uid for t in turns}
    return [b.segment for b in ledger(home, session) if b.last in uids]


def _flush_all(setting: HookSetting, out: Outcome, session: str, names: Sequence[str] = ()) -> None:
    """``_flush`` each segment banked (or named), until the daemon stops answering."""
    folder = corpus_dir(setting.home)
    reports = [BankReport("segment_dup", path=folder / n) for n in names] or out.banked
    for report in reports:
        answered, out.flush = out.flush, None
        _flush(setting, out, session, report)
        code = cast("str | None", out.flush)  # what _flush set
        if code is None:  # no daemon: the maintenance pass finds the rest
            out.flush = answered
            return
        if code == "skip_queue_full":
            return


# -- the hooks ---------------------------------------------------------------------------


def _start(setting: HookSetting, event: str, data: bytes) -> tuple[Outcome, HookInput | None]:
    out = Outcome(event)
    inp = parse_hook_input(data)
    if isinstance(inp, str):
        out.segment = inp
        return out, None
    if not inp.session_id:
        out.segment = "no_session"
        return out, None
    out.session = SESSION_IDS[setting.harness](inp.session_id)
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


def pre_compact(setting: HookSetting, data: bytes) -> Outcome:
    out, inp = _start(setting, "pre-compact", data)
    if inp is None or out.session is None:
        return out
    out.trigger = inp.trigger if inp.trigger in ("manual", "auto") else None
    path = _transcript(inp, out)
    if path is None:
        return out
    finishing = setting.rest_from is not None
    banked_before: list[str] = []
    with TranscriptFile(path, setting.harness) as tf:
        read = (
            tf.window_at(setting.rest_from) if setting.rest_from is not None else tf.last_window()
        )
    turns = read.window.turns
    source = f"pre-compact:{out.trigger or 'unknown'}"
    with session_lock(
        setting.home, out.session, None if finishing else max(setting.left(), 0.0)
    ) as held:
        if held:
            todo = pieces(turns, _cover(setting, out, out.session, turns, ()), PART_CHARS)
            if not todo and not out.banked:
                out.segment = "segment_dup" if render(turns) else "empty_window"
                banked_before = _holding(setting.home, out.session, turns)
            rest = _bank_pieces(setting, out, out.session, todo, source, deadline=not finishing)
        else:  # another hook of the session is banking: all of it is left
            rest = pieces(turns, [False] * len(turns), PART_CHARS)
            out.segment = "deadline_lock"
    if finishing:
        out.rest = "finished"
    elif rest:
        _leave(setting, out, read.start, rest, several=not held or rest[0].parts > 1)
    out.ms = int((time.monotonic() - setting.started) * 1000)
    _flush_all(setting, out, out.session, banked_before)
    return out


def _leave(
    setting: HookSetting, out: Outcome, start: int, rest: list[Piece], *, several: bool
) -> None:
    """Record what the deadline left; a window of several parts is finished by a detached
    child, one of a single part (or when no child starts) by the next hook."""
    out.rest_bytes = sum(len(render(p.turns).encode()) for p in rest)
    if out.parts:
        out.segment = "segment_partial"
    detached = several and setting.detach is not None and setting.detach(start)
    out.rest = "detached" if detached else "next_hook"


def backstop(setting: HookSetting, out: Outcome, path: Path, session: str) -> None:
    """Bank what the ledger lacks of every closed window of the transcript's tail (each
    read whole, from its boundary)."""
    with TranscriptFile(path, setting.harness) as tf:
        windows = tf.windows(tf.tail_start(TAIL_BYTES))
    closed = [w for w in windows if w.closed and w.turns]
    turns = [t for w in closed for t in w.turns]
    out.backstop = "backstop_covered"
    with session_lock(setting.home, session, None):
        cover = _cover(setting, out, session, turns, closed)
        at = 0
        for w in closed:
            n = len(w.turns)
            todo = pieces(w.turns, cover[at : at + n], PART_CHARS)
            at += n
            _bank_pieces(setting, out, session, todo, "backstop", deadline=False)
    if out.banked:
        out.backstop = "backstop_banked"
        _flush_all(setting, out, session)


def session_start(setting: HookSetting, data: bytes) -> Outcome:
    out, inp = _start(setting, "session-start", data)
    session = out.session
    if inp is not None:
        out.source = inp.source
        path = _transcript(inp, out) if inp.source == "compact" else None
        if path is not None and session is not None:
            backstop(setting, out, path, session)
    pack = packs.context_pack(setting.home, session, budget=setting.pack_tokens)
    out.links = pack.links
    out.pack_tokens = pack.tokens
    out.stdout = session_start_output(pack.text)
    out.ms = int((time.monotonic() - setting.started) * 1000)
    return out


def post_compact(setting: HookSetting, data: bytes) -> Outcome:
    """PostCompact, where the harness has it: the backstop alone."""
    out, inp = _start(setting, "post-compact", data)
    if inp is not None and out.session is not None:
        path = _transcript(inp, out)
        if path is not None:
            backstop(setting, out, path, out.session)
    out.ms = int((time.monotonic() - setting.started) * 1000)
    return out


def session_end(setting: HookSetting, data: bytes) -> Outcome:
    out, inp = _start(setting, "session-end", data)
    if inp is None or out.session is None:
        return out
    out.reason = inp.reason
    path = _transcript(inp, out)
    if path is None:
        return out
    with TranscriptFile(path, setting.harness) as tf:
        windows = tf.windows(0)
    turns = tuple(t for w in windows for t in w.turns)
    with session_lock(setting.home, out.session, None):
        cover = _cover(setting, out, out.session, turns, [w for w in windows if w.closed])
        last = len(windows[-1].turns) if not windows[-1].closed else 0
        if all(cover) or not render([t for t, c in zip(turns, cover, strict=True) if not c]):
            out.mode = "skip_covered"
            return out
        if all(cover[: len(turns) - last]):
            out.mode = "remainder"
            todo = pieces(turns[len(turns) - last :], cover[len(turns) - last :], PART_CHARS)
        else:
            out.mode = "full_fallback"
            todo = pieces(turns, cover, PART_CHARS)
        source = "remainder" if out.mode == "remainder" else "full"
        _bank_pieces(setting, out, out.session, todo, source, deadline=False)
    out.ms = int((time.monotonic() - setting.started) * 1000)
    _flush_all(setting, out, out.session)
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
    with TranscriptFile(path, harness) as tf:
        turns = tuple(t for w in tf.windows(0) for t in w.turns)
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


def run_hook(setting: HookSetting, event: str, data: bytes) -> Outcome:
    """Run one hook; whatever it raises becomes the ``error`` of its outcome (the hook
    still exits 0). Its telemetry line is appended either way."""
    try:
        out = HOOKS[event](setting, data)
    except Exception as exc:  # a hook never fails its harness: the error is its line
        out = Outcome(event, error=type(exc).__name__)
        if event == "session-start":
            out.stdout = session_start_output("")
    if not out.ms:
        out.ms = int((time.monotonic() - setting.started) * 1000)
    fields = out.fields()
    fields["harness"] = setting.harness
    append_line(setting.home, setting.now, event, **fields)
    return out


def corpus_ready(home: Path) -> Path:
    folder = corpus_dir(home)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder
