"""One session directory: ``sessions/<id>/<n>.baseline.json`` and ``<n>.jsonl`` per epoch.

Opening loads the highest epoch that has both files and the carry from the previous
epoch's EpochEnd. Older epochs are read once for what spans the whole session (turn count,
taint); only the current epoch's records stay in memory.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from tether import files
from tether.core.context import replay
from tether.core.egress import urls_in
from tether.errors import (
    BaselineMismatchError,
    CorruptLogError,
    InvalidIdError,
    MissingCarryError,
    NotFoundError,
    SessionError,
)
from tether.faults import crash_point
from tether.ids import session_id
from tether.records import (
    Baseline,
    ChatMessage,
    EpochEnd,
    LogRecord,
    SessionStart,
    ToolResult,
    TurnError,
    Usage,
    User,
    is_utc,
)
from tether.sessions.integrity import TornTail, note_torn_tail, record_sum

SESSIONS_DIR = "sessions"
_EPOCH_FILE = re.compile(r"(0|[1-9][0-9]*)\.(baseline\.json|jsonl)")
_baseline_decoder = msgspec.json.Decoder(Baseline)
#: How much of a log's end ``may_have_open_turn`` reads (a turn's last records are
#: small: a Usage, an Assistant; a tail that decides nothing means a full open).
_TAIL_BYTES = 4096


def baseline_bytes(baseline: Baseline) -> bytes:
    """The canonical bytes of a baseline file (what its hash is taken over)."""
    return msgspec.json.format(msgspec.json.encode(baseline), indent=2) + b"\n"


def baseline_hash(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def session_dir(home: Path, sid: str) -> Path:
    return home / SESSIONS_DIR / session_id(sid)


def list_sessions(home: Path) -> list[str]:
    """Ids of the session directories under ``home``, sorted."""
    root = home / SESSIONS_DIR
    if not root.is_dir():
        return []
    out = []
    for entry in root.iterdir():
        try:
            session_id(entry.name)
        except InvalidIdError:
            continue
        if entry.is_dir():
            out.append(entry.name)
    return sorted(out)


#: The system prompt of a session an import creates when the home has no
#: ``config/system.md``.
DEFAULT_SYSTEM = "You are tether, a personal assistant with a long memory."


def imported_system(home: Path) -> str:
    """The system prompt of a session an import creates (``sessions import``, the
    checkpoint hooks): the home's ``config/system.md``, else ``DEFAULT_SYSTEM``."""
    try:
        text = (home / "config" / "system.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return DEFAULT_SYSTEM
    return text if text.strip() else DEFAULT_SYSTEM


@dataclass(frozen=True)
class _EpochStats:
    turns: int
    untrusted: bool
    #: URLs in the owner's messages (``User`` records): what a tainted session may fetch.
    owner_urls: frozenset[str] = frozenset()

    def __add__(self, other: _EpochStats) -> _EpochStats:
        return _EpochStats(
            self.turns + other.turns,
            self.untrusted or other.untrusted,
            self.owner_urls | other.owner_urls,
        )


def _scan(path: Path, epoch: int, records: Sequence[LogRecord], first_line: int = 1) -> _EpochStats:
    """Check an epoch log's shape and count what spans epochs, in one pass.

    SessionStart of this epoch first and only first; EpochEnd (to n+1) only last; every
    time UTC. One loop: this runs over every record of every epoch when a session opens.
    """
    if first_line == 1:
        if not records or type(records[0]) is not SessionStart:
            raise CorruptLogError(path, 1, "an epoch log must start with SessionStart")
        if records[0].epoch != epoch:
            raise CorruptLogError(
                path, 1, f"SessionStart says epoch {records[0].epoch}, file is epoch {epoch}"
            )
    turns = 0
    untrusted = False
    urls: set[str] = set()
    last = first_line + len(records) - 1
    for line, r in enumerate(records, start=first_line):
        if r.time.tzinfo is not UTC and not is_utc(r.time):
            raise CorruptLogError(path, line, "time must be UTC (Z or +00:00)")
        if isinstance(r, User):
            turns += not r.retry  # a retry after compaction is the same turn
            found = urls_in(r.text)
            if found:
                urls |= found
        elif isinstance(r, ToolResult):
            untrusted = untrusted or r.untrusted
        elif isinstance(r, SessionStart) and line != 1:
            raise CorruptLogError(path, line, "SessionStart after the first line")
        elif isinstance(r, EpochEnd):
            if line != last:
                raise CorruptLogError(path, line, "records after EpochEnd")
            if r.next != epoch + 1:
                raise CorruptLogError(path, line, f"EpochEnd.next is {r.next}, not {epoch + 1}")
    return _EpochStats(turns, untrusted, frozenset(urls))


class Session:
    """An open session: its current epoch in memory, appends durable and locked."""

    def __init__(
        self,
        *,
        sid: str,
        directory: Path,
        epoch: int,
        epochs: list[int],
        baseline: Baseline,
        carry: str | None,
        records: list[LogRecord],
        size: int,
        earlier: _EpochStats,
        current: _EpochStats,
    ) -> None:
        self.id = sid
        self.dir = directory
        self.epoch = epoch
        self.epochs = epochs
        self.baseline = baseline
        self.carry = carry
        self._records = records
        self._size = size
        self._earlier = earlier
        self._current = current

    # -- opening ----------------------------------------------------------------------

    @staticmethod
    def epochs_on_disk(directory: str | Path) -> list[int]:
        """Epochs that have both a baseline file and a log, ascending."""
        baselines: set[int] = set()
        logs: set[int] = set()
        for entry in os.listdir(directory):
            m = _EPOCH_FILE.fullmatch(entry)
            if m:
                (baselines if m.group(2) == "baseline.json" else logs).add(int(m.group(1)))
        return sorted(baselines & logs)

    @classmethod
    def exists(cls, home: Path, sid: str) -> bool:
        """Whether the session has a complete epoch on disk (a folder without one is a
        creation that never finished: no session yet)."""
        directory = session_dir(home, sid)
        return directory.is_dir() and bool(cls.epochs_on_disk(directory))

    @classmethod
    def may_have_open_turn(cls, home: Path, sid: str) -> bool:
        """A cheap look at the tail of the session's current log: False when its last
        turn surely ended, so a start-up check over many sessions opens only the few that
        may not have (``replay.open_turn`` depends on the last records alone)."""
        directory = os.path.join(home, SESSIONS_DIR, session_id(sid))
        try:
            epochs = cls.epochs_on_disk(directory)
        except FileNotFoundError:
            return False
        if not epochs:
            return False
        path = f"{directory}/{epochs[-1]}.jsonl"
        with os.fdopen(files.open_home(Path(path), os.O_RDONLY), "rb") as f:
            size = f.seek(0, os.SEEK_END)
            start = max(0, size - _TAIL_BYTES)
            f.seek(start)
            data = f.read()
        lines, _ = files.split_complete(data)
        if start > 0:
            lines = lines[1:]  # the first line may be cut by the window
        records = files.decode_lines(Path(path), lines)
        return replay.decides_turn(records) is not False

    @classmethod
    def open(cls, home: Path, sid: str) -> Session:
        directory = session_dir(home, sid)
        if not directory.is_dir():
            raise NotFoundError(f"no session {sid!r} in {home / SESSIONS_DIR}")
        epochs = cls.epochs_on_disk(directory)
        if not epochs:
            # A directory with no complete epoch 0 was never created (or its creation
            # crashed before the log appeared): it is not a session yet.
            raise NotFoundError(f"no session {sid!r} in {home / SESSIONS_DIR} (no epoch files)")
        if epochs != list(range(len(epochs))):
            missing = sorted(set(range(epochs[-1] + 1)) - set(epochs))
            raise SessionError(f"{directory}: epoch files missing for epoch(s) {missing}")
        current = epochs[-1]
        earlier = _EpochStats(0, False)
        carry: str | None = None
        for n in epochs[:-1]:
            path = directory / f"{n}.jsonl"
            records, _ = files.read_log(path)
            stats = _scan(path, n, records)
            last = records[-1]
            if not isinstance(last, EpochEnd):
                raise MissingCarryError(path, n + 1)
            earlier = earlier + stats
            carry = last.summary
        log_path = directory / f"{current}.jsonl"
        records, size = files.read_log(log_path)
        current_stats = _scan(log_path, current, records)
        start = records[0]
        assert isinstance(start, SessionStart)
        baseline_path = directory / f"{current}.baseline.json"
        data = files.read_home_bytes(baseline_path)
        actual = baseline_hash(data)
        if actual != start.baseline:
            raise BaselineMismatchError(baseline_path, start.baseline, actual)
        try:
            baseline = _baseline_decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise CorruptLogError(baseline_path, 1, str(exc)) from None
        return cls(
            sid=sid,
            directory=directory,
            epoch=current,
            epochs=epochs,
            baseline=baseline,
            carry=carry,
            records=records,
            size=size,
            earlier=earlier,
            current=current_stats,
        )

    @classmethod
    def create(
        cls,
        home: Path,
        sid: str,
        *,
        baseline: Baseline,
        slot: int,
        time: datetime,
        imported: bool = False,
    ) -> Session:
        """Create epoch 0: the baseline file, then the log holding its SessionStart
        (``imported`` for a session ``sessions import`` makes)."""
        directory = session_dir(home, sid)
        if cls.exists(home, sid):
            raise SessionError(f"{directory}: session {sid!r} already exists")
        directory.mkdir(parents=True, exist_ok=True)
        cls.write_epoch_files(directory, 0, baseline, slot, time, imported=imported)
        return cls.open(home, sid)

    @staticmethod
    def write_epoch_files(
        directory: Path,
        epoch: int,
        baseline: Baseline,
        slot: int,
        time: datetime,
        *,
        imported: bool = False,
    ) -> None:
        """Write ``<n>.baseline.json`` then ``<n>.jsonl``, each atomically, in that order,
        so a log never exists without its baseline."""
        data = baseline_bytes(baseline)
        files.write_atomic(directory / f"{epoch}.baseline.json", data)
        start = SessionStart(
            time=time, epoch=epoch, slot=slot, baseline=baseline_hash(data), imported=imported
        )
        files.write_atomic(directory / f"{epoch}.jsonl", files.encode_records([start]))

    # -- reading ----------------------------------------------------------------------

    def epoch_records(self) -> Iterator[tuple[int, Sequence[LogRecord]]]:
        """Every epoch's records in order, as (epoch, records): the earlier epochs read
        from their files again (``open`` keeps only what spans them), the current one as
        it was read."""
        for n in self.epochs[:-1]:
            yield n, files.read_log(self.dir / f"{n}.jsonl")[0]
        yield self.epoch, self.records

    @property
    def records(self) -> Sequence[LogRecord]:
        """The current epoch's records, SessionStart first."""
        return self._records

    @property
    def log_path(self) -> Path:
        return self.dir / f"{self.epoch}.jsonl"

    @property
    def slot(self) -> int:
        start = self._records[0]
        assert isinstance(start, SessionStart)
        return start.slot

    @property
    def ended(self) -> bool:
        """True when the current epoch's log already ends with EpochEnd."""
        return isinstance(self._records[-1], EpochEnd)

    def turns(self) -> int:
        """User records over every epoch (a ``retry`` one is the turn before it again):
        the first is turn 1 for the session's life."""
        return self._earlier.turns + self._current.turns

    def untrusted(self) -> bool:
        """True once any epoch has an untrusted ToolResult."""
        return self._earlier.untrusted or self._current.untrusted

    def owner_urls(self) -> frozenset[str]:
        """Every URL the owner's messages of any epoch hold, canonical
        (``core.egress.urls_in``): what a tainted session may still fetch."""
        return self._earlier.owner_urls | self._current.owner_urls

    def last_usage(self) -> Usage | None:
        for r in reversed(self._records):
            if isinstance(r, Usage):
                return r
        return None

    def messages(self) -> list[ChatMessage]:
        """The request for the current epoch as it stands."""
        return replay.messages(self.baseline, self.carry, self._records)

    def open_turn(self) -> bool:
        """True when the epoch's last turn has no answer and no TurnError."""
        return replay.open_turn(self._records)

    # -- writing ----------------------------------------------------------------------

    def append(self, *records: LogRecord) -> None:
        """Append records durably: flock, cut a torn tail, pick up others' appends, fsync."""
        if not records:
            return
        for r in records:
            if isinstance(r, SessionStart):
                raise SessionError("SessionStart is written only when an epoch is created")
            if not is_utc(r.time):
                raise SessionError(f"refusing to log a non-UTC time: {r.time.isoformat()}")
        if self.ended:
            raise SessionError(f"{self.log_path}: epoch {self.epoch} has ended")
        with files.locked(self.log_path) as fd:
            self._append_locked(fd, records)

    def close_interrupted(self, time: datetime) -> bool:
        """Close a turn a killed process left open (its User with nothing after it) with
        ``TurnError{kind: "interrupted"}``. Checked and appended under the log's lock, so
        of two processes opening the session at once one closes it; True if this did.
        The caller holds the session busy, so no live turn is mistaken for a dead one."""
        if not is_utc(time):
            raise SessionError(f"refusing to log a non-UTC time: {time.isoformat()}")
        if self.ended:
            return False
        with files.locked(self.log_path) as fd:
            size = self._repair_torn_tail(fd, time)
            if size != self._size:
                self._catch_up(fd, size)
            if self.ended or not self.open_turn() or self._imported_history():
                return False
            self._append_locked(fd, [TurnError(time=time, kind="interrupted")])
        return True

    def _imported_history(self) -> bool:
        """True while the current epoch is what ``sessions import`` wrote and no turn has
        run in it (no ``Usage``): its last owner line is history, not a dead turn."""
        start = self._records[0]
        return (
            isinstance(start, SessionStart)
            and start.imported
            and not any(isinstance(r, Usage) for r in self._records)
        )

    def _repair_torn_tail(self, fd: int, time: datetime) -> int:
        """Cut a torn last line, recording the cut (``sessions.integrity``); the size."""
        before = os.fstat(fd).st_size
        size = files.repair_torn_tail(fd)
        if size < before:
            cut = TornTail(time=time, session=self.id, epoch=self.epoch, bytes=before - size)
            note_torn_tail(self.dir.parent.parent, cut)
        return size

    def _append_locked(self, fd: int, records: Sequence[LogRecord]) -> None:
        size = self._repair_torn_tail(fd, records[0].time)
        if size != self._size:
            self._catch_up(fd, size)
        data = files.encode_records(records)
        self._size = files.append_durable(fd, data, self.log_path)
        record_sum(self.log_path, self._size - len(data), data)
        added = _scan(self.log_path, self.epoch, records, first_line=len(self._records) + 1)
        self._records.extend(records)
        self._current = self._current + added

    def end_epoch(self, *, summary: str, baseline: Baseline, time: datetime) -> None:
        """Close the current epoch with EpochEnd and start the next one on the same slot.

        Order matters for crash safety: EpochEnd is durable before the new baseline and
        log exist, and the new log appears (atomically) only after its baseline.
        """
        nxt = self.epoch + 1
        slot = self.slot
        if not self.ended:
            self.append(EpochEnd(time=time, next=nxt, summary=summary))
        crash_point("epoch-end-before-baseline")
        self.write_epoch_files(self.dir, nxt, baseline, slot, time)
        reopened = Session.open(self.dir.parent.parent, self.id)
        self.__dict__.update(reopened.__dict__)

    def _catch_up(self, fd: int, size: int) -> None:
        """Another writer appended since we read: take its records in before ours."""
        if size < self._size:
            raise SessionError(f"{self.log_path}: log shrank under us; reopen the session")
        data = files.read_from(fd, self._size, size)
        first_line = len(self._records) + 1
        lines, _ = files.split_complete(data)
        new = files.decode_lines(self.log_path, lines, first_line)
        added = _scan(self.log_path, self.epoch, new, first_line=first_line)
        self._records = self._records + new
        self._current = self._current + added
        self._size = size
        if self.ended:
            raise SessionError(f"{self.log_path}: epoch {self.epoch} was ended by another writer")
