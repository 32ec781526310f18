"""Keep the full-text index in step with the session logs on disk.

Each log file has a cursor in the store: the byte offset indexed so far, plus the
session's turn number and taint at that offset, and the file's state (size, mtime in ns,
inode) when it was last looked at. A pass loads every cursor in one query and stats each
log: a log whose state is the cursor's is not opened, so a pass with nothing new costs a
stat per log, not a read. A log that changed is read from the cursor's offset, and only
its complete lines (a torn tail, a crash mid-append, waits for the next pass), turned into
rows; the cursor moves in the same transaction, so a crash never indexes a line twice or
skips one. A log that was rewritten rather than appended to (another inode, shorter than
what was indexed, the same size with another mtime, or the bytes before the offset no
longer those indexed) has its session dropped from the index and read again from its
first epoch (``IndexReport.rewritten``): the cost of a pass follows what changed.

Raw ToolResult content is never indexed: only what the agent was shown as a summary
(ToolSummary) is, carrying its own trust. A row's text is indexed
secret-redacted (``tether.scan``, with the home's allow-list): the logs keep what was
said, but recall, which hands rows to the agent in any session, never shows a key
pasted in one of them.

Turn numbers span epochs: the k-th User record of the session is turn k, the rows after
it belong to it, rows before the first User are turn 0. A ``User{retry: true}`` (the same
message retried in the next epoch after compaction) is neither indexed nor counted: its
reply belongs to the turn it retries. Taint is monotone: once an
untrusted ToolResult has been read, every later row of the session is tainted.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import msgspec

from tether import files
from tether.core.checkpoints.window import strip_private
from tether.core.recall import summaries
from tether.errors import SessionError, TetherError
from tether.files import open_home
from tether.ids import is_session_id, session_id
from tether.ports import IndexStore, Progress
from tether.records import (
    Assistant,
    EpochEnd,
    EpochSummary,
    IndexCursor,
    LogField,
    LogRecord,
    LogRow,
    SessionStart,
    SessionState,
    ToolCall,
    ToolResult,
    ToolSummary,
    TurnError,
    User,
)
from tether.scan.allow import home_allow
from tether.scan.secrets import redact_many
from tether.sessions.session import SESSIONS_DIR, Session

#: Rows gathered before one store transaction (whole sessions are never split).
BATCH_ROWS = 20_000
#: A pass that adds at least this many rows compacts the index afterwards.
OPTIMIZE_AFTER_ROWS = 200_000
#: The bytes before a cursor's offset it keeps a checksum of (``IndexCursor.tail``).
TAIL_BYTES = 64
#: Inodes are kept in a signed 64-bit column (compared for equality only).
_INO_MASK = (1 << 63) - 1

_json = msgspec.json.Encoder()


@dataclass
class _Seen:
    """What a pass learns of one session beside its rows (``Store.track_sessions``):
    the first record's time, an open turn, an import, the epoch summaries read."""

    first_time: datetime | None = None
    open_since: datetime | None = None
    open_known: bool = False
    imported: bool = False
    history: bool = False  # the epoch being read was written by an import
    summaries: list[EpochSummary] = field(default_factory=list)

    def state(self, sid: str) -> SessionState | None:
        if self.first_time is None:
            return None
        return SessionState(
            session=sid,
            first_time=self.first_time,
            open_since=self.open_since,
            open_known=self.open_known,
            imported=self.imported,
        )

    def see(self, record: LogRecord) -> None:
        if self.first_time is None:
            self.first_time = record.time
        if isinstance(record, SessionStart):
            self.imported = self.imported or (record.epoch == 0 and record.imported)
            self.history = record.imported
        if self.history:
            return  # an imported epoch is history: its last owner line opens no turn
        # A turn is open from its message until a reply without tool calls, an error or
        # the epoch's end; a tool call opens it again (the loop goes on).
        opens = isinstance(record, User) and not record.retry
        if opens or (isinstance(record, ToolCall) and self.open_since is None):
            self.open_since, self.open_known = record.time, True
        elif isinstance(record, (Assistant, TurnError, EpochEnd)):
            self.open_since, self.open_known = None, True


@dataclass(frozen=True)
class IndexReport:
    """What a pass did. ``errors``: (session, message) of sessions skipped as malformed;
    their earlier-indexed rows stay, and they are retried on the next pass. ``damaged``:
    (session, ``file:line: problem``) of malformed lines read past: the session's other
    lines are indexed, and the pass that met the line reports it once (``tether doctor``
    names it every time: runbook session-log-corrupt)."""

    sessions: int = 0
    files: int = 0
    rows: int = 0
    errors: tuple[tuple[str, str], ...] = field(default=())
    damaged: tuple[tuple[str, str], ...] = field(default=())
    #: Sessions whose logs were rewritten since they were indexed, indexed again whole.
    rewritten: tuple[str, ...] = field(default=())


def _log_key(sid: str, epoch: int) -> str:
    """The cursor's name for a log: relative to ``sessions/``, so a moved home still fits."""
    return f"{sid}/{epoch}.jsonl"


class _Rewritten(Exception):
    """A log of the session was rewritten, not appended to: its session is read again."""


def _read_from(path: Path, start: int, size: int) -> bytes:
    """Bytes ``start..size`` of the log; fewer than that: it shrank since its stat."""
    with os.fdopen(open_home(path, os.O_RDONLY), "rb") as f:
        f.seek(start)
        data = f.read(size - start)
    if len(data) < size - start:
        raise _Rewritten
    return data


def _session_ids(home: Path) -> list[str]:
    """Session directories, sorted. ``scandir`` knows directories without a stat each:
    an up-to-date pass over 20,000 sessions is mostly this walk."""
    try:
        with os.scandir(home / SESSIONS_DIR) as entries:
            return sorted(e.name for e in entries if is_session_id(e.name) and e.is_dir())
    except FileNotFoundError:
        return []


def _rows(
    sid: str,
    epoch: int,
    records: Sequence[LogRecord],
    turn: int,
    tainted: bool,
    *,
    allow: frozenset[str],
    seen: _Seen | None = None,
) -> tuple[list[LogRow], int, bool]:
    """Rows of ``records``, given the turn and taint before them; and those after them."""
    rows: list[LogRow] = []
    for r in records:
        if seen is not None:
            seen.see(r)
            if isinstance(r, EpochEnd) and r.summary.strip():
                said = redact_many([strip_private(r.summary)], allow=allow)[0]
                seen.summaries.append(
                    EpochSummary(session=sid, epoch=epoch, time=r.time, text=said)
                )
        text: str
        kind: LogField
        row_tainted = tainted
        if isinstance(r, User):
            if r.retry:
                continue  # the turn's message again after compaction: indexed once
            turn += 1
            kind, text = "user", strip_private(r.text)
        elif isinstance(r, Assistant):
            kind, text = "assistant", strip_private(r.text)
        elif isinstance(r, ToolCall):
            kind, text = "tool_call", strip_private(f"{r.name} {_json.encode(r.args).decode()}")
        elif isinstance(r, ToolSummary):
            kind, text, row_tainted = "summary", strip_private(r.content), tainted or r.untrusted
        else:
            if isinstance(r, ToolResult):
                tainted = tainted or r.untrusted  # read for its trust, never indexed
            continue
        if text.strip():
            rows.append(
                LogRow(
                    session=sid,
                    epoch=epoch,
                    turn=turn,
                    field=kind,
                    text=text,
                    tainted=row_tainted,
                    time=r.time,
                )
            )
    clean = redact_many([row.text for row in rows], allow=allow)
    rows = [
        row if text is row.text else msgspec.structs.replace(row, text=text)
        for row, text in zip(rows, clean, strict=True)
    ]
    return rows, turn, tainted


def _known_epochs(cursors: dict[str, IndexCursor]) -> dict[str, int]:
    """Session -> how many epochs the cursors cover, from epoch 0 without a gap."""
    seen: dict[str, set[int]] = {}
    for key in cursors:
        sid, _, name = key.partition("/")
        number = name.removesuffix(".jsonl")
        if number.isdigit():
            seen.setdefault(sid, set()).add(int(number))
    return {sid: len(epochs) for sid, epochs in seen.items() if max(epochs) == len(epochs) - 1}


def _epochs(directory: str, known: int) -> list[int]:
    """The epochs of a session on disk. When the cursors know ``known`` epochs and no
    log of the next exists, those are all (a new epoch's log appears only after the
    previous one ended), and the folder need not be listed: on an up-to-date home the
    listing was a third of a pass."""
    if known and not os.path.exists(f"{directory}/{known}.jsonl"):
        return list(range(known))
    epochs = Session.epochs_on_disk(directory)
    if epochs != list(range(len(epochs))):
        raise SessionError(f"{directory}: epoch files missing; found epochs {epochs}")
    return epochs


@dataclass
class _Read:
    """What a pass found in one session's logs: the files read, each with its new rows
    and cursor; and the cursors of files whose state moved with nothing to index (a
    torn tail, a cursor from before states were kept), written with the batch."""

    items: list[tuple[list[LogRow], IndexCursor]] = field(default_factory=list)
    marks: list[IndexCursor] = field(default_factory=list)


def _session_rows(
    root: str,
    sid: str,
    cursors: dict[str, IndexCursor],
    known: int = 0,
    allow: frozenset[str] = frozenset(),
    *,
    seen: _Seen | None = None,
    damaged: list[str] | None = None,
) -> _Read | None:
    """New rows of every epoch of one session, in order, with each file's new cursor
    (None: no log changed, the common case, with nothing allocated for it).

    ``root`` is the sessions folder and ``sid`` a valid id; ``known``: how many of its
    epochs the cursors cover (``_known_epochs``). A log whose stat is its cursor's state
    is not opened; paths stay strings until a file has something new (on an up-to-date
    home of 20,000 sessions, pathlib objects were half the cost of a pass). ``allow``:
    fingerprints left unredacted. A malformed line is read past and named in ``damaged``
    (``file:line: problem``). Raises ``_Rewritten`` when a log was not just appended to
    (the module's doc)."""
    directory = f"{root}/{sid}"
    epochs = _epochs(directory, known)
    turn, tainted = 0, False
    out: _Read | None = None
    for epoch in epochs:
        key = _log_key(sid, epoch)
        cursor = cursors.get(key)
        offset, lines = 0, 0
        if cursor is not None:
            offset, lines, turn, tainted = cursor.offset, cursor.lines, cursor.turn, cursor.tainted
        name = f"{directory}/{epoch}.jsonl"
        try:
            st = os.stat(name)
        except FileNotFoundError:
            raise SessionError(f"{directory}: the log of epoch {epoch} is missing") from None
        size, mtime_ns, ino = st.st_size, st.st_mtime_ns, st.st_ino & _INO_MASK
        if cursor is not None:
            if (cursor.size, cursor.mtime_ns, cursor.ino) == (size, mtime_ns, ino):
                continue  # the common case: as the last pass left it, unread
            if size < offset or cursor.ino not in (None, ino) or cursor.size == size:
                raise _Rewritten  # shorter, replaced, or changed at the same size
        # The bytes before the offset come along: their checksum says the file grew
        # rather than was rewritten, and the next cursor keeps theirs.
        back = min(offset, TAIL_BYTES)
        data = _read_from(Path(name), offset - back, size)
        if cursor is not None and cursor.tail not in (None, zlib.crc32(data[:back])):
            raise _Rewritten
        complete, end = files.split_complete(data[back:])
        moved = IndexCursor(
            path=key,
            offset=offset + end,
            turn=turn,
            tainted=tainted,
            lines=lines + len(complete),
            size=size,
            mtime_ns=mtime_ns,
            ino=ino,
            tail=zlib.crc32(data[: back + end][-TAIL_BYTES:]),
        )
        out = out or _Read()
        if not complete:
            out.marks.append(moved)  # a torn tail: read again once the file changes
            continue
        path = Path(name)
        records, bad = files.decode_lenient(complete, first_line=lines + 1)
        if damaged is not None:
            damaged += [f"{path}:{line}: malformed record: {problem}" for line, problem in bad]
        rows, turn, tainted = _rows(sid, epoch, records, turn, tainted, allow=allow, seen=seen)
        out.items.append((rows, msgspec.structs.replace(moved, turn=turn, tainted=tainted)))
    return out


def _turns_before(cursors: dict[str, IndexCursor], sid: str, known: int, epoch: int) -> int:
    """The session's turn count at the end of ``epoch`` as the cursors held it before
    this pass (0 before epoch 0, or for an epoch they do not cover)."""
    if epoch < 0 or epoch >= known:
        return 0
    cursor = cursors.get(_log_key(sid, epoch))
    return 0 if cursor is None else cursor.turn


def _units(
    store: IndexStore,
    sid: str,
    items: Sequence[tuple[list[LogRow], IndexCursor]],
    *,
    cursors: dict[str, IndexCursor],
    known: int,
    ended: Sequence[EpochSummary],
) -> tuple[list[summaries.Unit], list[str]]:
    """The summary units of a session that grew in this pass (``core.recall.summaries``): its
    digest again and a unit per epoch that ended, and the ref of its digest as the last
    pass left it (replaced). The digest's rows are this pass's new rows and, for the turns
    indexed before, the store's (its first turn and the newest ``DIGEST_TURNS``): a
    fresh session (an import) reads nothing back. Nothing new: no change."""
    if not items:
        return [], []
    before = _turns_before(cursors, sid, known, known - 1)
    total = items[-1][1].turn
    if total < 1:
        return [], []
    start = max(1, total - summaries.DIGEST_TURNS + 1)
    new = [r for rows, _ in items for r in rows if r.turn >= 1]
    old_recent = store.session_turns(sid, start, before) if before >= start else []
    old_first = store.session_turns(sid, 1, 1) if start > 1 and before >= 1 else []
    first = [r for r in (*old_first, *new) if r.turn == 1] if start > 1 else []
    recent = [*old_recent, *(r for r in new if r.turn >= start)]
    units: list[summaries.Unit] = []
    digest = summaries.session_unit(sid, first, recent, total)
    if digest is not None:
        units.append(digest)
    ends = {int(cur.path.rpartition("/")[2].removesuffix(".jsonl")): cur for _, cur in items}
    for ended_summary in ended:
        e = ended_summary.epoch
        end = ends.get(e)
        if end is None:
            continue
        prior = ends[e - 1].turn if e - 1 in ends else _turns_before(cursors, sid, known, e - 1)
        span = summaries.Span(sid, e, prior + 1, end.turn)
        unit = summaries.epoch_unit(
            span, ended_summary.text, ended_summary.time, tainted=end.tainted
        )
        if unit is not None:
            units.append(unit)
    gone = [summaries.Span(sid, None, 1, before).ref] if before >= 1 else []
    return units, gone


@dataclass
class _Batch:
    """What a pass has read and not written yet."""

    items: list[tuple[list[LogRow], IndexCursor]] = field(default_factory=list)
    rows: int = 0
    states: list[SessionState] = field(default_factory=list)
    ended: list[EpochSummary] = field(default_factory=list)
    units: list[summaries.Unit] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)

    def flush(self, store: IndexStore) -> _Batch:
        """Write it all; an empty batch."""
        # Before the rows and cursors: these writes are idempotent, so a crash between
        # them is repaired by the next pass re-reading the same lines.
        store.put_epoch_summaries(self.ended)
        store.track_sessions(self.states)
        store.put_summary_units(self.units, self.gone)
        if self.items:
            store.index_logs(self.items)
        return _Batch()


@dataclass
class _OneSession:
    """What a pass read of one session and makes of it."""

    read: _Read
    seen: _Seen
    damaged: list[str]
    units: list[summaries.Unit]
    gone: list[str]
    rewritten: bool


def _one_session(
    store: IndexStore,
    root: str,
    sid: str,
    cursors: dict[str, IndexCursor],
    *,
    known: int,
    allow: frozenset[str],
) -> _OneSession | None:
    """One session's new rows and summary units (None: no log changed); a session
    whose logs were rewritten is dropped from the index and read whole (the module's
    doc)."""
    seen, bad = _Seen(), list[str]()
    rewritten = False
    try:
        found = _session_rows(root, sid, cursors, known, allow, seen=seen, damaged=bad)
    except _Rewritten:
        seen, bad, cursors, known, rewritten = _Seen(), [], {}, 0, True
        found = _session_rows(root, sid, cursors, known, allow, seen=seen, damaged=bad)
        # Its rows and cursors go now, the rows just read with the batch (a crash
        # between leaves no cursor: the next pass reads the session whole again).
        store.forget_session_index(sid)
    if found is None and not rewritten:
        return None
    read = found or _Read()
    made, old = _units(store, sid, read.items, cursors=cursors, known=known, ended=seen.summaries)
    return _OneSession(read, seen, bad, made, old, rewritten)


def index_home(
    home: Path,
    store: IndexStore,
    *,
    batch_rows: int = BATCH_ROWS,
    only: Sequence[str] | None = None,
    meter: Progress | None = None,
) -> IndexReport:
    """Index what was appended to the home's session logs since the last pass.

    ``only`` limits the pass to those sessions: the agent indexes the session it just
    appended to, which stays cheap however many sessions the home holds. A malformed
    session is skipped and reported; the others are indexed regardless. A session that
    grew gets its summary units again (``_units``).
    """
    cursors = store.index_cursors()
    known = _known_epochs(cursors)
    allow = home_allow(home)
    batch = _Batch()
    sessions = files_read = rows = 0
    errors: list[tuple[str, str]] = []
    damaged: list[tuple[str, str]] = []
    rewritten: list[str] = []
    root = os.fspath(home / SESSIONS_DIR)
    # _session_ids yields valid ids only; ids in ``only`` are checked here.
    listed = only is None
    ids = _session_ids(home) if only is None else only
    if meter is not None:
        meter.stage("indexing sessions")
    for sid in ids:
        sessions += 1
        if meter is not None:
            meter.advance()
        try:
            checked = sid if listed else session_id(sid)
            had = known.get(checked, 0)
            one = _one_session(store, root, checked, cursors, known=had, allow=allow)
        except (TetherError, OSError) as exc:
            errors.append((sid, str(exc)))
            continue
        if one is None:
            continue  # nothing changed: the common case
        if one.rewritten:
            rewritten.append(checked)
        damaged += [(sid, problem) for problem in one.damaged]
        state = one.seen.state(checked)
        if state is not None:
            batch.states.append(state)
        batch.ended += one.seen.summaries
        batch.units += one.units
        batch.gone += one.gone
        items = one.read.items
        added = sum(len(item_rows) for item_rows, _ in items)
        batch.rows += added
        rows += added
        files_read += len(items)
        batch.items += items
        batch.items += [([], mark) for mark in one.read.marks]
        if batch.rows >= batch_rows:
            batch = batch.flush(store)
    batch.flush(store)
    if rows >= OPTIMIZE_AFTER_ROWS:
        store.optimize_index()
    return IndexReport(
        sessions=sessions,
        files=files_read,
        rows=rows,
        errors=tuple(errors),
        damaged=tuple(damaged),
        rewritten=tuple(rewritten),
    )


def reindex(home: Path, store: IndexStore, *, meter: Progress | None = None) -> IndexReport:
    """Drop the log index and build it again from the files (notes, pages, the journal
    and recall counts are kept: recall counts are keyed by session and turn, not rows)."""
    store.reset_index()
    return index_home(home, store, meter=meter)


def turn_rows(home: Path, sid: str, first: int, last: int) -> list[LogRow]:
    """The rows of turns ``first`` to ``last`` (inclusive) of session ``sid``, numbered
    and redacted as the index holds them, read from the session's logs (every epoch):
    what a ``tether://turn:<session>:<first>-<last>`` link reads."""
    session = Session.open(home, session_id(sid))
    allow = home_allow(home)
    turn, tainted = 0, False
    out: list[LogRow] = []
    for epoch, records in session.epoch_records():
        rows, turn, tainted = _rows(sid, epoch, records, turn, tainted, allow=allow)
        out += [r for r in rows if first <= r.turn <= last]
        if turn > last:
            break
    return out
