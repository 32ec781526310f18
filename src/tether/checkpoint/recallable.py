"""Banked means recallable: a harness window the hooks bank goes into its tether session.

A checkpoint hook (PreCompact, the SessionStart / PostCompact backstop, SessionEnd) banks
a window of a harness transcript as ``corpus/<session>.seg-<hash24>.txt``. That alone is
not searchable: recall indexes session logs. So right after the bytes are banked
(``remember_segment``, which the CLI hands the hooks as ``HookSetting.on_banked``), the
segment's turns (``core.checkpoints.window.parse_rendered``: private spans already ``[private]``,
secrets already redacted) are appended to the harness's tether session (``cc-<id>``,
``codex-<id>``: the one ``sessions import --format`` fills) as User / Assistant records;
the caller then indexes that session (``memory.indexer``, which this service may not
import). No daemon, no model.

Nothing is added twice, by the transcript import's rule (``imports.transcript``, which
uses ``digest`` and ``held_digests`` from here): a message is in a session when a record
of the same role, time and text is, the text compared *clean* (``clean_text``: private
spans out, secrets redacted, exactly as a segment holds it). So two hooks banking
overlapping windows, a hook after ``sessions import`` of the same transcript, an import
after the hooks, and a run killed part-way and run again each leave every message once.
Both paths hold one lock (``imports/.transcripts.lock``), so two of them cannot both
decide that a message is new.

``corpus/<session>.recalled.jsonl`` records each segment whose messages reached the
session: its name and the time span of its turns, one JSON line each (names, times and
counts, never words), appended durably. It is what

- ``pending`` / ``catch_up`` read to find segments banked but not yet in their session (a
  hook out of time or beaten to the lock by a long import: ``recall_deferred``; a crash
  between the segment's write and the append): the ledger's harness segments less the ones
  named here. The next hook of the session, ``memory recall`` (CLI, MCP, UI), ``memory
  reindex`` and ``transcripts ingest`` run it;
- a recall hit's ``link`` comes from (``Links``): the narrowest recorded span that holds
  the hit's time.

A torn last line is ignored on read; a segment recorded twice is harmless (messages are
deduplicated by the session, not by this file).

``corpus/caught-up.json`` keeps, per banked session, the state of its ledger (size,
modification time, inode) when every harness segment it named was found in the session,
so a ``catch_up`` (every recall runs one) with nothing new reads that one file and stats
each ledger instead of reading every ledger and ``.recalled.jsonl`` (benchmarks/
recall_catch_up.py). A mark is written only after the appends it vouches for are
recorded (``mark_recalled`` fsyncs first), and the ledger is stat-ed before it is read,
so a mark never covers a window it did not see; any change to the ledger (a new window,
a retirement: written by rename) changes its state and the session is read again. The
file is replaced atomically; a lost or unreadable one only costs one full read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import msgspec

from tether import files
from tether.checkpoint.bank import (
    LINK_PREFIX,
    Boundary,
    corpus_dir,
    ledger,
    ledger_path,
)
from tether.core.checkpoints.window import Turn, parse_rendered, render
from tether.errors import NotFoundError, TetherError
from tether.faults import crash_point
from tether.harnesses.transcript import utc_time
from tether.ids import session_id
from tether.records import Assistant, Baseline, User
from tether.scan.secrets import redact_many
from tether.sessions.session import Session, imported_system

SUFFIX = ".recalled.jsonl"
#: The caught-up marks, in ``corpus/`` (see the module's doc).
MARKS = "caught-up.json"
#: Ledger lanes whose windows are a harness's transcript (tether's own compaction, lane
#: ``tether``, banks records its sessions already hold).
HARNESS_SOURCES = ("pre-compact", "backstop", "remainder", "full", "ingest")
#: The lock transcript imports hold (``imports.transcript``), under the home.
LOCK_PATH = ("imports", ".transcripts.lock")
#: The longest a hook waits for the lock an import holds (then ``recall_deferred``):
#: a hook must not slow its harness for an import that may run for minutes.
LOCK_WAIT_S = 0.5
#: How often a hook tries again for the lock an import holds.
LOCK_POLL_S = 0.02
#: The time a hook keeps after this step (indexing, the daemon's schedule call).
RESERVE_S = 0.25
_STAMP = "0000-00-00T00:00:00Z"
#: Fault points around a segment's append to its session (crash tests).
CRASH_BEFORE_APPEND = "recall-before-append"
CRASH_AFTER_APPEND = "recall-after-append"


class Recalled(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One segment whose messages are in its session."""

    segment: str  # the file name, ``<session>.seg-<hash24>.txt``
    first: datetime | None
    last: datetime | None
    messages: int = 0  # turns the segment holds
    new: int = 0  # of which were not in the session yet

    @property
    def link(self) -> str:
        return LINK_PREFIX + self.segment.removesuffix(".txt")


_decoder = msgspec.json.Decoder(Recalled)
_encoder = msgspec.json.Encoder()


def recalled_path(home: Path, session: str) -> Path:
    return corpus_dir(home) / f"{session_id(session)}{SUFFIX}"


def recalled(home: Path, session: str) -> list[Recalled]:
    """The segments of ``session`` in recall, in the order they got there (a line that
    cannot be read, a torn one, is skipped: its segment is simply done again)."""
    try:
        data = recalled_path(home, session).read_bytes()
    except FileNotFoundError:
        return []
    out: list[Recalled] = []
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            out.append(_decoder.decode(raw))
        except msgspec.DecodeError:
            continue
    return out


def mark_recalled(home: Path, session: str, entry: Recalled) -> None:
    """Append ``entry`` durably (one write on an ``O_APPEND`` descriptor, then fsync)."""
    path = recalled_path(home, session)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        os.write(fd, (b"\n" if torn else b"") + _encoder.encode(entry) + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)


def _harness_window(boundary: Boundary) -> bool:
    return boundary.source.startswith(HARNESS_SOURCES)


#: A ledger's state: size, modification time (ns), inode.
State = tuple[int, int, int]


@dataclass(frozen=True)
class Pending:
    session: str
    segments: tuple[str, ...]  # file names, oldest first
    state: State | None = None  # the ledger's, stat-ed before it was read


def marks_path(home: Path) -> Path:
    return corpus_dir(home) / MARKS


def read_marks(home: Path) -> dict[str, State]:
    """The caught-up marks; empty when the file is absent or cannot be read (every
    session is then read once, and the marks written again)."""
    try:
        doc = msgspec.json.decode(marks_path(home).read_bytes(), type=dict[str, State])
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return {}
    return doc


def _write_marks(
    home: Path, before: dict[str, State], found: dict[str, State], banked: Collection[str]
) -> None:
    """``before`` with ``found`` over it, sessions no longer ``banked`` dropped, written
    when something changed. Best effort: a mark is an optimisation (a full disk, a
    read-only home: the next pass reads again)."""
    merged = {sid: state for sid, state in {**before, **found}.items() if sid in banked}
    if merged == before:
        return
    with contextlib.suppress(OSError, TetherError):
        files.write_atomic(marks_path(home), _encoder.encode(dict(sorted(merged.items()))))


def _state(home: Path, sid: str) -> State | None:
    try:
        st = os.stat(ledger_path(home, sid))
    except (OSError, TetherError):
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


_LEDGER = ".ledger.json"


def _ledger_states(home: Path) -> dict[str, State | None]:
    """Every banked session (``sessions_banked``) and its ledger's state, in one pass
    over the folder (no ``Path`` per file: at thousands of sessions, what a recall with
    nothing new costs)."""
    out: dict[str, State | None] = {}
    try:
        entries = os.scandir(corpus_dir(home))
    except (FileNotFoundError, NotADirectoryError):
        return out
    with entries:
        for entry in entries:
            if not entry.name.endswith(_LEDGER):
                continue
            try:
                st = entry.stat()
                out[entry.name[: -len(_LEDGER)]] = (st.st_size, st.st_mtime_ns, st.st_ino)
            except OSError:
                out[entry.name[: -len(_LEDGER)]] = None  # read below: its error decides
    return dict(sorted(out.items()))


def _scan(
    home: Path, sessions: list[str] | None, marks: dict[str, State]
) -> tuple[list[Pending], dict[str, State], Collection[str]]:
    """(what is pending, the state of each session read and found caught up, every
    session looked at)."""
    out: list[Pending] = []
    caught: dict[str, State] = {}
    states = _ledger_states(home) if sessions is None else {s: _state(home, s) for s in sessions}
    for sid, state in states.items():
        if state is not None and marks.get(sid) == state:
            continue  # caught up at this very ledger: nothing to read
        try:
            held = ledger(home, sid)
        except TetherError:
            continue
        names = [b.segment for b in held if _harness_window(b)]
        done = {r.segment for r in recalled(home, sid)} if names else set()
        missing = tuple(n for n in dict.fromkeys(names) if n not in done)
        if missing:
            out.append(Pending(sid, missing, state))
        elif state is not None:
            caught[sid] = state
    return out, caught, states.keys()


def pending(home: Path, sessions: list[str] | None = None) -> list[Pending]:
    """Harness segments banked but not yet in their session (``sessions``: only those;
    default every session with a ledger), sessions marked caught up at their ledger's
    current state skipped unread. A ledger that cannot be read is skipped: the hooks
    report it, and a later pass retries."""
    return _scan(home, sessions, read_marks(home))[0]


def link_for(entries: list[Recalled], time: datetime | None) -> str | None:
    """The link of the narrowest recorded segment whose turns span ``time``."""
    if time is None:
        return None
    best: Recalled | None = None
    for e in entries:
        if e.first is None or e.last is None or not e.first <= time <= e.last:
            continue
        if best is None or (e.last - e.first) < (best.last - best.first):  # type: ignore[operator]
            best = e
    return best.link if best is not None else None


class Links:
    """Segment links for recall hits, each session's file read once."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._cache: dict[str, list[Recalled]] = {}

    def of(self, session: str | None, time: datetime | None) -> str | None:
        if session is None or time is None:
            return None
        entries = self._cache.get(session)
        if entries is None:
            try:
                entries = recalled(self.home, session)
            except TetherError:
                entries = []
            self._cache[session] = entries
        return link_for(entries, time)


@dataclass(frozen=True)
class Remembered:
    """What ``remember_segment`` did: ``code`` ``recall_appended`` (the messages are in
    the session; indexing it is the caller's), or ``recall_deferred`` (nothing written:
    ``catch_up`` does it later). ``messages``: the segment's turns; ``new``: of which the
    session lacked."""

    code: str
    messages: int = 0
    new: int = 0


def clean_text(role: str, text: str, allow: frozenset[str]) -> str:
    """``text`` as a banked segment holds it: rendered as a turn, private spans out,
    secret-redacted, read back. What the session stores and what messages are compared
    by, whichever path (hook or import) brings them."""
    return clean_texts([(role, text)], allow)[0]


def clean_texts(said: Sequence[tuple[str, str]], allow: frozenset[str]) -> list[str]:
    """``clean_text`` of many (role, text), in one scan."""
    blocks = [render([Turn("user" if r == "user" else "assistant", t, _STAMP)]) for r, t in said]
    out: list[str] = []
    for block in redact_many(blocks, allow=allow):
        turns = parse_rendered(block)
        out.append(turns[0].text if turns else "")
    return out


@contextlib.contextmanager
def transcripts_lock(home: Path, *, wait_s: float | None) -> Iterator[bool]:
    """The lock transcript imports take; True when held. ``wait_s`` None waits for it;
    else tries until ``wait_s`` has passed, then yields False."""
    path = home.joinpath(*LOCK_PATH)
    path.parent.mkdir(parents=True, exist_ok=True)
    with files.locked_within(path, wait_s, LOCK_POLL_S) as held:
        yield held


def _segment_turns(home: Path, name: str) -> list[Turn]:
    path = corpus_dir(home) / name
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise NotFoundError(f"no banked segment {path}") from None
    _, _, body = data.decode(errors="replace").partition("\n\n")
    return parse_rendered(body)


def digest(role: str, time: datetime, text: str) -> bytes:
    """What makes a message the same message, in 32 bytes: role, time (to the
    microsecond) and clean text (``clean_text``)."""
    return hashlib.sha256(f"{role}\0{time.isoformat()}\0{text}".encode()).digest()


def held_digests(
    home: Path, sid: str, allow: frozenset[str], *, times: Collection[datetime] | None = None
) -> set[bytes]:
    """The digests of the user and assistant records of a session, every epoch, over
    their clean text: a session an earlier tether imported with its raw text still
    matches the same messages brought in clean. ``times``: only the records written at
    one of those times (a message can only be a record of its own time), so a long
    session's text is not all scanned again for one window."""
    if not Session.exists(home, sid):
        return set()
    held = [
        r
        for _, records in Session.open(home, sid).epoch_records()
        for r in records
        if isinstance(r, User | Assistant) and (times is None or r.time in times)
    ]
    roles = ["user" if isinstance(r, User) else "assistant" for r in held]
    texts = clean_texts(list(zip(roles, (r.text for r in held), strict=True)), allow)
    return {digest(role, r.time, t) for role, r, t in zip(roles, held, texts, strict=True)}


class _Appender:
    """Appends segments' turns to one session, the lock held: per segment, the session's
    records of the segment's times are compared (their digests), and what is appended is
    remembered for the next segment."""

    def __init__(self, home: Path, sid: str, *, allow: frozenset[str], slot: int) -> None:
        self.home, self.sid, self.allow, self.slot = home, sid, allow, slot
        self.added: set[bytes] = set()  # digests appended by this appender

    def segment(self, name: str) -> Recalled:
        """Append what segment ``name`` holds that the session lacks; record it."""
        try:
            turns = _segment_turns(self.home, name)
        except NotFoundError:
            turns = []  # its ledger entry outlived the file: nothing to recall, nor retry
        timed = [(t, when) for t in turns if (when := utc_time(t.time)) is not None]
        # a turn without a readable time (a hand-edited segment) cannot be placed
        known = held_digests(self.home, self.sid, self.allow, times={w for _, w in timed})
        known |= self.added
        records: list[User | Assistant] = []
        for t, when in timed:
            d = digest(t.role, when, t.text)
            if d in known:
                continue
            known.add(d)
            self.added.add(d)
            records.append(
                User(time=when, text=t.text)
                if t.role == "user"
                else Assistant(time=when, text=t.text)
            )
        crash_point(CRASH_BEFORE_APPEND)
        if records:
            self._session(records[0].time).append(*records)
        crash_point(CRASH_AFTER_APPEND)
        entry = Recalled(
            segment=name,
            first=min((w for _, w in timed), default=None),
            last=max((w for _, w in timed), default=None),
            messages=len(turns),
            new=len(records),
        )
        mark_recalled(self.home, self.sid, entry)
        return entry

    def _session(self, first: datetime) -> Session:
        if Session.exists(self.home, self.sid):
            return Session.open(self.home, self.sid)
        base = Baseline(system=imported_system(self.home), memory="")
        return Session.create(
            self.home, self.sid, baseline=base, slot=self.slot, time=first, imported=True
        )


def remember_segment(
    home: Path,
    sid: str,
    name: str,
    *,
    allow: frozenset[str],
    left: Callable[[], float],
    slot: int = 0,
) -> Remembered:
    """Append the turns of the banked segment ``name`` (a file of ``corpus/``) to session
    ``sid`` within the time ``left()`` says remains, keeping ``RESERVE_S``; then, time
    allowing, the session's earlier segments that never got there (see the module doc)."""
    if left() <= RESERVE_S:
        return Remembered("recall_deferred")
    with transcripts_lock(home, wait_s=min(LOCK_WAIT_S, max(0.0, left() - RESERVE_S))) as held:
        if not held or left() <= RESERVE_S:
            return Remembered("recall_deferred")
        appender = _Appender(home, sid, allow=allow, slot=slot)
        entry = appender.segment(name)
        for p in pending(home, [sid]):
            for other in p.segments:
                if left() <= RESERVE_S:
                    break
                appender.segment(other)
    return Remembered("recall_appended", entry.messages, entry.new)


def catch_up(home: Path, *, allow: frozenset[str], slot: int = 0, wait: bool = False) -> list[str]:
    """Append every harness segment banked but not yet in its session (``pending``);
    the sessions changed, for the index pass that follows. Without ``wait`` it does
    nothing while an import holds the lock (the next pass will)."""
    marks = read_marks(home)
    todo, caught, banked = _scan(home, None, marks)
    if not todo:
        _write_marks(home, marks, caught, banked)
        return []
    changed: list[str] = []
    with transcripts_lock(home, wait_s=None if wait else 0.0) as held:
        if not held:
            _write_marks(home, marks, caught, banked)
            return []
        todo, caught, banked = _scan(home, None, marks)  # again, under the lock
        try:
            for p in todo:
                appender = _Appender(home, p.session, allow=allow, slot=slot)
                for name in p.segments:
                    appender.segment(name)  # recorded (fsynced) before it returns
                changed.append(p.session)
                if p.state is not None:
                    caught[p.session] = p.state  # the ledger as read: every window in
        finally:
            _write_marks(home, marks, caught, banked)  # what was done stands, failure or not
    return changed
