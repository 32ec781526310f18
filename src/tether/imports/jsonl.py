"""``tether sessions import``: bring conversation history in from a generic JSONL file.

One object a line: ``{"session", "role", "text", "time", "speaker"?, "owner"?}`` with ``role`` user
or assistant and ``time`` RFC 3339 with a zone (stored as UTC). The whole file is checked,
and every session it names opened, before anything is written: a bad line is an error
naming file and line, and nothing was imported. Then each session (in first-appearance
order) is created, or appended to in its current epoch, and the home is indexed.

The file is not held in memory: it is read twice (``imports.jsonl_file``), and the
write pass holds one session's records at a time.

An import is recorded in a ledger named by the file's sha256 (``imports.ledger``):
run again after a crash or Ctrl-C, it writes what is missing and nothing twice; run
again after it finished, it writes nothing and says when it was imported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import msgspec

from tether.config import Config, load_config
from tether.errors import ImportChangedError, ImportResumeError, SessionError
from tether.faults import crash_point, pause_point
from tether.imports.jsonl_file import ImportLine, ImportPlan, check, opened
from tether.imports.ledger import (
    Begin,
    Complete,
    ImportLedger,
    Journaled,
    Progress,
    Started,
)
from tether.memory.indexer import IndexReport, index_home
from tether.ports import Progress as Meter
from tether.ports import StoreOpener
from tether.records import Assistant, Baseline, JournalEntry, LogRecord, SessionMeta, User
from tether.sessions.session import Session

#: The system prompt of imported sessions when the home has no ``config/system.md``.
DEFAULT_SYSTEM = "You are tether, a personal assistant with a long memory."
#: Characters of text appended to a session at once (a long session takes several
#: appends, so what one append encodes stays bounded).
BATCH_CHARS = 8 * 1024 * 1024


@dataclass(frozen=True)
class ImportReport:
    sessions_created: int
    sessions_appended: int
    turns: int  # user lines
    records: int  # every line
    indexed_rows: int
    index_errors: tuple[tuple[str, str], ...] = ()
    #: When this file was imported before (nothing was written this time).
    already: datetime | None = None
    #: Records an interrupted run of this import had written (not written again).
    resumed: int = 0
    ledger: Path | None = None


def _record(line: ImportLine) -> LogRecord:
    if line.role == "user":
        return User(time=line.time, text=line.text, speaker=line.speaker)
    return Assistant(time=line.time, text=line.text)


def _system_prompt(home: Path) -> str:
    try:
        text = (home / "config" / "system.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return DEFAULT_SYSTEM
    return text if text.strip() else DEFAULT_SYSTEM


def _existing(home: Path, sessions: Iterable[str]) -> set[str]:
    """The sessions named that exist already, each opened once to be sure it can take
    the import: a corrupt or ended one stops the import here, with nothing written."""
    existing: set[str] = set()
    for sid in sessions:
        if Session.exists(home, sid):
            session = Session.open(home, sid)
            if session.ended:
                raise SessionError(
                    f"{session.log_path}: epoch {session.epoch} has ended and the next "
                    "has not started; open the session once to recover it, then import"
                )
            existing.add(sid)
    return existing


class _Writer:
    """The write pass: each session's records appended in batches of ``chars``; a new
    session is created at its first append, so a failed read leaves no empty one.

    Every session is in the ledger before its first append (the new ones all at once,
    in one durable write; an existing one just before it is written to), with its epoch
    and record count then. On a resumed run, the records after that count that equal
    the import's own, in order, were written by the interrupted run and are skipped."""

    def __init__(
        self,
        home: Path,
        plan: ImportPlan,
        ledger: ImportLedger,
        progress: Progress,
        *,
        config: Config,
        chars: int,
        meter: Meter | None = None,
    ) -> None:
        self.home = home
        self.plan = plan
        self.ledger = ledger
        self.progress = progress
        self.meter = meter
        self.baseline = Baseline(system=_system_prompt(home), memory="")
        self.slot = config.slots.main
        self.chars = chars
        self.written = 0
        self.resumed = 0

    def announce(self, new: Iterable[str]) -> None:
        """Put the sessions this import will create in the ledger, in one write."""
        entries = [Started(sid, 0, -1) for sid in new if sid not in self.progress.started]
        self.ledger.append(*entries)
        self.progress.started.update((e.session, e) for e in entries)

    def write(self) -> None:
        if self.meter is not None:
            self.meter.stage("importing records", self.plan.records)
        for sid, lines in self.plan.sessions_lines():
            session, already = self._start(sid)
            matched = 0
            batch: list[LogRecord] = []
            size = 0
            for line in lines:
                record = _record(line)
                if matched < len(already) and already[matched] == record:
                    matched += 1  # the interrupted run wrote it
                    continue
                already = ()  # past what was written: the rest all goes in
                batch.append(record)
                size += len(line.text)
                if size >= self.chars:
                    session = self._append(sid, session, batch)
                    batch, size = [], 0
                    crash_point("import-between-batches")
            if batch:
                self._append(sid, session, batch)
            self.resumed += matched
            if self.meter is not None and matched:
                self.meter.advance(matched)
            crash_point("import-after-session")

    def _start(self, sid: str) -> tuple[Session | None, Sequence[LogRecord]]:
        """The session as its write begins (None: not created yet), and the records an
        interrupted run of this import may have written to it."""
        session = Session.open(self.home, sid) if Session.exists(self.home, sid) else None
        started = self.progress.started.get(sid)
        if started is None:  # an existing session, reached now
            if session is None:
                raise ImportResumeError(f"session {sid!r} is gone since the import began")
            started = Started(sid, session.epoch, len(session.records) - 1)
            self.ledger.append(started)
            self.progress.started[sid] = started
            return session, ()
        if session is None:
            return None, ()
        if session.epoch != started.epoch:
            raise ImportResumeError(
                f"{session.log_path}: session {sid!r} moved to epoch {session.epoch} after "
                f"an interrupted import wrote to epoch {started.epoch}; cannot tell which "
                f"of its records were written (the ledger {self.ledger.path} has what "
                "was begun)"
            )
        return session, session.records[1 + max(started.before, 0) :]

    def _append(self, sid: str, session: Session | None, batch: list[LogRecord]) -> Session:
        if session is None:
            first = self.plan.sessions[sid]
            session = Session.create(
                self.home, sid, baseline=self.baseline, slot=self.slot, time=first, imported=True
            )
        session.append(*batch)
        self.written += len(batch)
        if self.meter is not None:
            self.meter.advance(len(batch))
        return session


def import_jsonl(
    home: Path,
    path: Path,
    *,
    now: datetime,
    store: StoreOpener,
    config: Config | None = None,
    batch_chars: int = BATCH_CHARS,
    meter: Meter | None = None,
) -> ImportReport:
    """Import ``path`` into the home's sessions, then index them (see the module doc).

    ``store`` opens the home's store, called only once there is something to write (a
    bad file leaves no database behind); ``config`` defaults to the home's tether.toml.
    The import is journalled at ``now``.
    """
    if batch_chars < 1:
        raise ValueError("batch_chars must be at least 1")
    with opened(path) as source:
        plan = check(source)
        cfg = config if config is not None else load_config(home)
        if not plan.records:  # nothing to write, nothing to remember having written
            return ImportReport(0, 0, 0, 0, indexed_rows=0)
        ledger = ImportLedger(home, plan.digest)
        with ledger.held() as progress:
            if progress.complete is not None:
                return ImportReport(
                    sessions_created=0,
                    sessions_appended=0,
                    turns=plan.turns,
                    records=plan.records,
                    indexed_rows=0,
                    already=progress.complete,
                    ledger=ledger.path,
                )
            fresh = [sid for sid in plan.sessions if sid not in progress.started]
            existing = _existing(home, fresh) | {
                sid for sid, s in progress.started.items() if s.before >= 0
            }
            writer = _Writer(
                home, plan, ledger, progress, config=cfg, chars=batch_chars, meter=meter
            )
            pause_point("import-after-check")
            if progress.begun is None:
                ledger.append(Begin(now, str(path.absolute()), plan.records, len(plan.sessions)))
            writer.announce(sid for sid in fresh if sid not in existing)
            try:
                writer.write()
            except ImportChangedError as exc:
                raise ImportChangedError(
                    path,
                    exc.line,
                    f"{exc.problem} (the file changed after it was checked; "
                    f"{writer.written} of its {plan.records} records were imported)",
                ) from None
            report = _journal_and_index(
                home,
                path,
                plan,
                ledger=ledger,
                progress=progress,
                now=now,
                store=store,
                meter=meter,
            )
            ledger.append(Complete(now))
    return ImportReport(
        sessions_created=len(plan.sessions) - len(existing),
        sessions_appended=len(existing),
        turns=plan.turns,
        records=plan.records,
        indexed_rows=report.rows,
        index_errors=report.errors,
        resumed=writer.resumed,
        ledger=ledger.path,
    )


def _journal_and_index(
    home: Path,
    path: Path,
    plan: ImportPlan,
    *,
    ledger: ImportLedger,
    progress: Progress,
    now: datetime,
    store: StoreOpener,
    meter: Meter | None = None,
) -> IndexReport:
    """Journal the import (once, however many runs it took) and index the home."""
    with store() as db:
        if plan.records and not progress.journaled:
            db.journal_append(
                JournalEntry(
                    time=now,
                    who="import",
                    session=None,
                    action="import",
                    target=f"file:{path.absolute()}",
                    before=None,
                    after=(
                        f"{plan.turns} turns, {plan.records} records, "
                        f"{len(plan.sessions)} sessions; sha256 {plan.digest}"
                    ),
                )
            )
            ledger.append(Journaled())
        for sid, owner in plan.session_owners.items():
            meta = db.session_meta(sid) or SessionMeta(session=sid)
            if meta.owner != owner:
                db.put_session_meta(msgspec.structs.replace(meta, owner=owner))
        return index_home(home, db, meter=meter)
