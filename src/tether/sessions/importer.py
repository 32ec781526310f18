"""``tether sessions import``: bring conversation history in from a generic JSONL file.

One object a line: ``{"session", "role", "text", "time", "speaker"?}`` with ``role`` user
or assistant and ``time`` RFC 3339 with a zone (stored as UTC). The whole file is checked,
and every session it names opened, before anything is written: a bad line is an error
naming file and line, and nothing was imported. Then each session (in first-appearance
order) is created, or appended to in its current epoch, and the home is indexed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from tether.config import Config, load_config
from tether.errors import BadInputError, ImportFormatError, NotFoundError, SessionError
from tether.ids import SESSION_ID_GRAMMAR, is_session_id
from tether.memory.indexer import index_home
from tether.ports import JournalEntry, Store
from tether.records import Assistant, Baseline, LogRecord, User
from tether.sessions.session import Session, session_dir
from tether.stores import open_store

#: The system prompt of imported sessions when the home has no ``config/system.md``.
DEFAULT_SYSTEM = "You are tether, a personal assistant with a long memory."


class ImportLine(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One line of an import file."""

    session: str
    role: Literal["user", "assistant"]
    text: str
    time: Annotated[datetime, msgspec.Meta(tz=True)]
    speaker: str | None = None


_decoder = msgspec.json.Decoder(ImportLine)


@dataclass(frozen=True)
class ImportReport:
    sessions_created: int
    sessions_appended: int
    turns: int  # user lines
    records: int  # every line
    indexed_rows: int
    index_errors: tuple[tuple[str, str], ...] = ()


def _problem(exc: msgspec.DecodeError) -> str:
    """msgspec's message, worded for someone editing the file."""
    text = str(exc)
    if "timezone" in text:
        return f"{text} (write a zone: ...Z or ...+02:00)"
    return text


def parse_import(path: Path) -> list[ImportLine]:
    """Every line of ``path``, validated; the first bad one raises ImportFormatError.

    Blank lines are skipped. Times come back in UTC.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise NotFoundError(f"no import file {path}") from None
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    out: list[ImportLine] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            line = _decoder.decode(raw)
        except msgspec.DecodeError as exc:
            raise ImportFormatError(path, number, _problem(exc)) from None
        if not is_session_id(line.session):
            raise ImportFormatError(
                path, number, f"session {line.session!r} is not an id: {SESSION_ID_GRAMMAR}"
            )
        if line.speaker is not None and line.role != "user":
            raise ImportFormatError(path, number, "speaker is only for role user")
        out.append(msgspec.structs.replace(line, time=line.time.astimezone(UTC)))
    return out


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


def import_jsonl(
    home: Path,
    path: Path,
    *,
    now: datetime,
    config: Config | None = None,
    store: Store | None = None,
) -> ImportReport:
    """Import ``path`` into the home's sessions, then index them (see the module doc).

    ``config`` defaults to the home's tether.toml; ``store`` to the home's store (opened
    and closed here). The import is journalled at ``now``.
    """
    lines = parse_import(path)
    groups: dict[str, list[ImportLine]] = {}
    for line in lines:
        groups.setdefault(line.session, []).append(line)
    cfg = config if config is not None else load_config(home)

    # Open every existing session before writing anything: a corrupt or ended one stops
    # the import here, with nothing written.
    existing: dict[str, Session] = {}
    for sid in groups:
        directory = session_dir(home, sid)
        if directory.is_dir() and Session.epochs_on_disk(directory):
            session = Session.open(home, sid)
            if session.ended:
                raise SessionError(
                    f"{session.log_path}: epoch {session.epoch} has ended and the next "
                    "has not started; open the session once to recover it, then import"
                )
            existing[sid] = session

    baseline = Baseline(system=_system_prompt(home), memory="")
    for sid, group in groups.items():
        session = existing.get(sid) or Session.create(
            home, sid, baseline=baseline, slot=cfg.slots.main, time=group[0].time
        )
        session.append(*(_record(line) for line in group))

    own = store is None
    db = open_store(home, cfg) if store is None else store
    try:
        turns = sum(1 for line in lines if line.role == "user")
        if lines:
            db.journal_append(
                JournalEntry(
                    time=now,
                    who="import",
                    session=None,
                    action="import",
                    target=f"file:{path.absolute()}",
                    before=None,
                    after=f"{turns} turns, {len(lines)} records, {len(groups)} sessions",
                )
            )
        report = index_home(home, db)
    finally:
        if own:
            db.close()
    return ImportReport(
        sessions_created=len(groups) - len(existing),
        sessions_appended=len(existing),
        turns=turns,
        records=len(lines),
        indexed_rows=report.rows,
        index_errors=report.errors,
    )
