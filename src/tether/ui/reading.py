"""What the session pages show: a session's epochs (summary, banked segments, where each
began) and one page of its turns, every text secret-redacted, each line with its trust.

A page reads the session's logs once and keeps only the lines of the turns it shows, so a
session of 100k turns opens in well under a second (benchmarks/ui_pages.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from tether.checkpoint.bank import Boundary, ledger
from tether.core.checkpoints.window import strip_private
from tether.records import (
    Assistant,
    EpochEnd,
    LogRecord,
    SessionStart,
    ToolCall,
    ToolResult,
    ToolSummary,
    TurnError,
    User,
)
from tether.scan.secrets import redact
from tether.sessions import Session, list_sessions
from tether.sessions.session import session_dir

#: Turns on one page of a session.
TURNS_PER_PAGE = 50
#: Rows on one page of any other list.
ROWS_PER_PAGE = 100


def stamp(time: datetime) -> str:
    return time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def shown(text: str, allow: frozenset[str] = frozenset()) -> str:
    """Memory text as the page shows it: ``<private>`` spans ``[private]``, every secret
    redacted (it is escaped on output)."""
    return redact(strip_private(text), allow=allow).text


@dataclass(frozen=True)
class Line:
    """One entry of the conversation. ``trust``: ``trusted``, ``untrusted`` (a tool's
    untrusted output) or ``tainted`` (written after the session read untrusted content)."""

    epoch: int
    turn: int
    time: str
    role: str  # owner, agent, tool_call, tool_result, tool_summary, error, compaction, epoch
    text: str
    trust: str
    first_of_turn: bool = False


@dataclass(frozen=True)
class EpochView:
    n: int
    began: str
    first_turn: int  # the first turn number the epoch holds (or would hold)
    turns: int
    carry: str | None  # what it began with (the previous epoch's summary)
    summary: str | None  # its own summary, when it was compacted
    segments: tuple[Boundary, ...] = ()


@dataclass(frozen=True)
class Paged:
    """Which slice of a list of ``total`` rows page ``page`` (from 1) shows."""

    page: int
    pages: int
    total: int
    start: int = 0
    stop: int = 0
    numbers: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class SessionPage:
    id: str
    slot: int
    turns: int
    untrusted: bool
    epochs: tuple[EpochView, ...]
    lines: tuple[Line, ...]
    nav: Paged


@dataclass(frozen=True)
class SessionRow:
    id: str
    epoch: int = 0
    turns: int = 0
    untrusted: bool = False
    error: str | None = None


def paged(total: int, page: int, per: int = ROWS_PER_PAGE) -> Paged:
    pages = max(1, -(-total // per))
    page = min(max(1, page), pages)
    start = (page - 1) * per
    near = sorted({1, pages, *range(max(1, page - 2), min(pages, page + 2) + 1)})
    return Paged(page, pages, total, start, min(total, start + per), near)


#: A listed session's row, by (home, id), with the stamp of its log files when it was read:
#: the page lists again without reading a log that did not change (sizes and mtimes).
_ROWS: dict[tuple[str, str], tuple[tuple[tuple[str, int, int], ...], SessionRow]] = {}
_ROWS_LOCK = threading.Lock()


def _stamp(home: Path, sid: str) -> tuple[tuple[str, int, int], ...]:
    out = []
    for f in sorted(session_dir(home, sid).iterdir()):
        if f.suffix == ".jsonl" or f.name.endswith(".baseline.json"):
            st = f.stat()
            out.append((f.name, st.st_size, st.st_mtime_ns))
    return tuple(out)


def _row(home: Path, sid: str) -> SessionRow:
    from tether.errors import TetherError

    try:
        stamp = _stamp(home, sid)
    except OSError as exc:
        return SessionRow(sid, error=shown(str(exc)))
    key = (str(home), sid)
    with _ROWS_LOCK:
        known = _ROWS.get(key)
    if known is not None and known[0] == stamp:
        return known[1]
    try:
        s = Session.open(home, sid)
    except TetherError as exc:
        return SessionRow(sid, error=shown(str(exc)))
    row = SessionRow(sid, s.epoch, s.turns(), s.untrusted())
    with _ROWS_LOCK:
        _ROWS[key] = (stamp, row)
    return row


def session_rows(home: Path, page: int) -> tuple[Paged, list[SessionRow]]:
    """One page of the home's sessions (only that page's sessions are read, and only
    those whose logs changed since this process last read them)."""
    ids = list_sessions(home)
    p = paged(len(ids), page)
    return p, [_row(home, sid) for sid in ids[p.start : p.stop]]


def _line(
    record: LogRecord, epoch: int, turn: int, tainted: bool, allow: frozenset[str]
) -> Line | None:
    trust = "tainted" if tainted else "trusted"
    t = stamp(record.time)
    if isinstance(record, User):
        return Line(epoch, turn, t, "owner", shown(record.text, allow), trust, first_of_turn=True)
    if isinstance(record, Assistant):
        return Line(epoch, turn, t, "agent", shown(record.text, allow), trust)
    if isinstance(record, ToolCall):
        args = msgspec.json.encode(record.args).decode()
        return Line(epoch, turn, t, "tool_call", shown(f"{record.name} {args}", allow), trust)
    if isinstance(record, ToolResult):
        label = "untrusted" if record.untrusted else trust
        said = f"{record.class_}, {len(record.content)} chars (not shown)"
        return Line(epoch, turn, t, "tool_result", said, label)
    if isinstance(record, ToolSummary):
        label = "untrusted" if record.untrusted else trust
        return Line(epoch, turn, t, "tool_summary", shown(record.content, allow), label)
    if isinstance(record, TurnError):
        return Line(epoch, turn, t, "error", record.kind, trust)
    if isinstance(record, EpochEnd):
        return Line(epoch, turn, t, "compaction", f"compacted into epoch {record.next}", trust)
    return None


def _marker(start: SessionStart, turn: int, carry: str | None, allow: frozenset[str]) -> Line:
    if start.epoch == 0:
        text = "session began (epoch 0)"
    else:
        text = f"epoch {start.epoch} began after compaction, carrying: " + shown(carry or "", allow)
    return Line(start.epoch, turn, stamp(start.time), "epoch", text, "trusted")


def session_page(
    home: Path, sid: str, page: int, allow: frozenset[str] = frozenset()
) -> SessionPage:
    """The session's epochs and the lines of turns on ``page`` (from 1; clamped)."""
    session = Session.open(home, sid)
    total = session.turns()
    p = paged(total, page, TURNS_PER_PAGE)
    lo, hi = p.start + 1, p.stop  # turns shown, inclusive

    def visible(at_turn: int) -> bool:
        return total == 0 or lo <= min(max(at_turn, 1), total) <= hi

    lines: list[Line] = []
    epochs: list[EpochView] = []
    banked: dict[int, list[Boundary]] = {}
    for b in ledger(home, sid):
        banked.setdefault(b.epoch, []).append(b)
    turn = 0
    tainted = False
    carry: str | None = None
    for n, records in session.epoch_records():
        first = turn + 1
        summary: str | None = None
        began = ""
        for r in records:
            if isinstance(r, User) and not r.retry:
                turn += 1
            if isinstance(r, SessionStart):
                began = stamp(r.time)
                if visible(turn + 1):  # it stands before the epoch's first turn
                    lines.append(_marker(r, turn + 1, carry, allow))
                continue
            if isinstance(r, EpochEnd):
                summary = r.summary
            if visible(turn):
                line = _line(r, n, turn, tainted, allow)
                if line is not None:
                    lines.append(line)
            if isinstance(r, ToolResult) and r.untrusted:
                tainted = True
        epochs.append(
            EpochView(
                n=n,
                began=began,
                first_turn=first,
                turns=turn - first + 1,
                carry=None if carry is None else shown(carry, allow),
                summary=None if summary is None else shown(summary, allow),
                segments=tuple(banked.get(n, ())),
            )
        )
        carry = summary
    return SessionPage(
        id=sid,
        slot=session.slot,
        turns=total,
        untrusted=session.untrusted(),
        epochs=tuple(epochs),
        lines=tuple(lines),
        nav=p,
    )


def page_of_turn(turn: int) -> int:
    return max(1, -(-turn // TURNS_PER_PAGE))


def epoch_pages(epochs: Sequence[EpochView]) -> dict[int, int]:
    """The page each epoch begins on."""
    return {e.n: page_of_turn(max(e.first_turn, 1)) for e in epochs}
