"""``tether sessions import``: bring conversation history in from a generic JSONL file.

One object a line: ``{"session", "role", "text", "time", "speaker"?}`` with ``role`` user
or assistant and ``time`` RFC 3339 with a zone (stored as UTC). The whole file is checked,
and every session it names opened, before anything is written: a bad line is an error
naming file and line, and nothing was imported. Then each session (in first-appearance
order) is created, or appended to in its current epoch, and the home is indexed.

The file is not held in memory: it is read twice (``sessions.import_file``), and the
write pass holds one session's records at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tether.config import Config, load_config
from tether.errors import SessionError
from tether.memory.indexer import index_home
from tether.ports import JournalEntry, Store
from tether.records import Assistant, Baseline, LogRecord, User
from tether.sessions.import_file import ImportChangedError, ImportLine, ImportPlan, check, opened
from tether.sessions.session import Session, session_dir
from tether.stores import open_store
from tether.testing.pause import pause_point

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
        directory = session_dir(home, sid)
        if directory.is_dir() and Session.epochs_on_disk(directory):
            session = Session.open(home, sid)
            if session.ended:
                raise SessionError(
                    f"{session.log_path}: epoch {session.epoch} has ended and the next "
                    "has not started; open the session once to recover it, then import"
                )
            existing.add(sid)
    return existing


class _Writer:
    """The write pass: each session's records appended in batches of ``batch_chars``; a
    new session is created at its first append, so a failed read leaves no empty one."""

    def __init__(
        self, home: Path, plan: ImportPlan, *, existing: set[str], config: Config, chars: int
    ) -> None:
        self.home = home
        self.plan = plan
        self.existing = existing
        self.baseline = Baseline(system=_system_prompt(home), memory="")
        self.slot = config.slots.main
        self.chars = chars
        self.written = 0

    def write(self) -> None:
        for sid, lines in self.plan.sessions_lines():
            session: Session | None = None
            batch: list[LogRecord] = []
            size = 0
            for line in lines:
                batch.append(_record(line))
                size += len(line.text)
                if size >= self.chars:
                    session = self._append(sid, session, batch)
                    batch, size = [], 0
            if batch:
                self._append(sid, session, batch)

    def _append(self, sid: str, session: Session | None, batch: list[LogRecord]) -> Session:
        if session is None:
            if sid in self.existing:
                session = Session.open(self.home, sid)
            else:
                first = self.plan.sessions[sid]
                session = Session.create(
                    self.home, sid, baseline=self.baseline, slot=self.slot, time=first
                )
        session.append(*batch)
        self.written += len(batch)
        return session


def import_jsonl(
    home: Path,
    path: Path,
    *,
    now: datetime,
    config: Config | None = None,
    store: Store | None = None,
    batch_chars: int = BATCH_CHARS,
) -> ImportReport:
    """Import ``path`` into the home's sessions, then index them (see the module doc).

    ``config`` defaults to the home's tether.toml; ``store`` to the home's store (opened
    and closed here). The import is journalled at ``now``.
    """
    if batch_chars < 1:
        raise ValueError("batch_chars must be at least 1")
    with opened(path) as source:
        plan = check(source)
        cfg = config if config is not None else load_config(home)
        writer = _Writer(
            home, plan, existing=_existing(home, plan.sessions), config=cfg, chars=batch_chars
        )
        pause_point("import-after-check")
        try:
            writer.write()
        except ImportChangedError as exc:
            raise ImportChangedError(
                path,
                exc.line,
                f"{exc.problem} (the file changed after it was checked; "
                f"{writer.written} of its {plan.records} records were imported)",
            ) from None

    own = store is None
    db = open_store(home, cfg) if store is None else store
    try:
        if plan.records:
            db.journal_append(
                JournalEntry(
                    time=now,
                    who="import",
                    session=None,
                    action="import",
                    target=f"file:{path.absolute()}",
                    before=None,
                    after=(
                        f"{plan.turns} turns, {plan.records} records, {len(plan.sessions)} sessions"
                    ),
                )
            )
        report = index_home(home, db)
    finally:
        if own:
            db.close()
    return ImportReport(
        sessions_created=len(plan.sessions) - len(writer.existing),
        sessions_appended=len(writer.existing),
        turns=plan.turns,
        records=plan.records,
        indexed_rows=report.rows,
        index_errors=report.errors,
    )
