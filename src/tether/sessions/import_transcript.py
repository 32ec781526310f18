"""``tether sessions import --format claude-code|codex``: a harness transcript (a Claude
Code transcript, a Codex rollout), and what it gained since, into tether sessions.

A transcript grows as its session goes on, and a harness may copy a session's earlier
messages into the transcript of a session resumed from it, so importing must add only
what a session lacks. Each harness session lands in its own tether session (``cc-<id>``,
``codex-<id>``: ``harnesses``), and a message is in it when a record of the same role,
time (to the microsecond) and text is:

- run again on the same transcript: nothing is written;
- run after the transcript grew: only the new messages are appended;
- two transcripts holding the same session's messages: each message lands once;
- run after a kill part-way: the messages that reached the session are there, so the
  next run appends exactly the others.

The new messages are written as a generic import file under ``<home>/imports/`` and
imported by ``import_jsonl`` (the same checks, batching, indexing and journal), then the
file and its ledger are removed. One lock (``imports/.transcripts.lock``) serialises
transcript imports, so two runs cannot both decide the same messages are new.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import msgspec

from tether.config import Config
from tether.errors import NotFoundError
from tether.harnesses import claude_code, codex
from tether.harnesses.transcript import Message, Transcript
from tether.ports import Store
from tether.records import Assistant, LogRecord, User
from tether.sessions import files
from tether.sessions.import_ledger import IMPORTS_DIR, ImportLedger
from tether.sessions.importer import ImportReport, import_jsonl
from tether.sessions.session import Session, session_dir
from tether.testing.crash import crash_point

LOCK_FILE = ".transcripts.lock"


@dataclass(frozen=True)
class TranscriptReport:
    messages: int  # in the transcript
    new: int  # imported by this run
    sessions: tuple[str, ...]  # the tether sessions the transcript's messages are in
    skipped: dict[str, int] = field(default_factory=dict)  # lines, by reason
    imported: ImportReport | None = None  # None when nothing was new


def _record(m: Message) -> LogRecord:
    if m.role == "user":
        return User(time=m.time, text=m.text)
    return Assistant(time=m.time, text=m.text)


def _held(home: Path, sid: str) -> list[LogRecord]:
    """The user and assistant records of a session, every epoch, in order."""
    if not Session.exists(home, sid):
        return []
    session = Session.open(home, sid)
    out: list[LogRecord] = []
    for n in session.epochs:
        records, _ = files.read_log(session_dir(home, sid) / f"{n}.jsonl")
        out.extend(r for r in records if isinstance(r, User | Assistant))
    return out


def _key(record: LogRecord) -> tuple[str, str, str]:
    assert isinstance(record, User | Assistant)
    role = "user" if isinstance(record, User) else "assistant"
    return (role, record.time.isoformat(), record.text)


def _new(home: Path, sid: str, messages: list[Message]) -> list[Message]:
    """The messages of ``sid`` it does not hold yet, in transcript order, each once."""
    seen = {_key(r) for r in _held(home, sid)}
    out: list[Message] = []
    for m in messages:
        key = _key(_record(m))
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


def _line(m: Message) -> bytes:
    return msgspec.json.encode(
        {"session": m.session, "role": m.role, "text": m.text, "time": m.time.isoformat()}
    )


def _read(path: Path) -> bytes:
    data = files.read_user_bytes(path)
    if data is None:
        raise NotFoundError(f"no transcript {path}")
    return data


#: The transcript formats ``sessions import --format`` takes, and their readers.
READERS: dict[str, Callable[[Iterable[bytes]], Transcript]] = {
    "claude-code": claude_code.read_transcript,
    "codex": codex.read_rollout,
}


def import_transcript(
    home: Path,
    path: Path,
    *,
    harness: str,
    now: datetime,
    config: Config | None = None,
    store: Store | None = None,
) -> TranscriptReport:
    """Import what ``path`` (a transcript of ``harness``, a key of ``READERS``) holds that
    its sessions lack."""
    transcript = READERS[harness](_read(path).split(b"\n"))
    skipped = dict(sorted(transcript.skipped.items()))
    folder = home / IMPORTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_FILE
    lock.touch(exist_ok=True)
    name = hashlib.sha256(str(path.absolute()).encode()).hexdigest()[:16]
    pending = folder / f"transcript-{name}.jsonl"
    with files.locked(lock):
        _clear(home, pending)  # a run killed before it cleared up: the sessions hold it
        new = [m for sid, ms in transcript.sessions.items() for m in _new(home, sid, ms)]
        report = TranscriptReport(
            messages=transcript.messages,
            new=len(new),
            sessions=tuple(transcript.sessions),
            skipped=skipped,
        )
        if not new:
            return report
        files.write_atomic(pending, b"\n".join(_line(m) for m in new) + b"\n")
        imported = import_jsonl(home, pending, now=now, config=config, store=store)
        crash_point("transcript-after-import")
        _clear(home, pending)
    return TranscriptReport(
        messages=report.messages,
        new=report.new,
        sessions=report.sessions,
        skipped=skipped,
        imported=imported,
    )


def _clear(home: Path, pending: Path) -> None:
    """Remove a transcript's generic import file and its ledger. What is in the sessions
    is the record of what was imported, and a run that was killed part-way is finished
    by comparing with them, not by the ledger."""
    try:
        data = pending.read_bytes()
    except FileNotFoundError:
        return
    ImportLedger(home, hashlib.sha256(data).hexdigest()).path.unlink(missing_ok=True)
    pending.unlink()


def skipped_words(skipped: dict[str, int]) -> str:
    """``3 lines skipped (2 tool_result, 1 not_json)``, or "" when none were."""
    total = sum(skipped.values())
    if not total:
        return ""
    parts = ", ".join(f"{n} {why}" for why, n in Counter(skipped).most_common())
    return f"{total} line{'s' if total != 1 else ''} skipped ({parts})"
