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
  next run appends exactly the others;
- run after the checkpoint hooks banked windows of the same session (``checkpoint.recallable``
  put their messages in it): only what no window held is appended.

A message's text is stored *clean* (``checkpoint.recallable.clean_text``): ``<private>`` spans are
``[private]`` and secrets redacted, exactly as a banked segment holds them, so the hook
path and this one store, and compare, the same text; a session an earlier tether
imported with raw text is compared by the clean form of its records too.

The new messages are written as a generic import file under ``<home>/imports/`` and
imported by ``import_jsonl`` (the same checks, batching, indexing and journal), then the
file and its ledger are removed. One lock (``imports/.transcripts.lock``) serialises
transcript imports, so two runs cannot both decide the same messages are new.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import msgspec

from tether import files
from tether.checkpoint.recallable import clean_texts, digest, held_digests
from tether.config import Config
from tether.errors import BadInputError, NotFoundError
from tether.faults import crash_point
from tether.harnesses import claude_code, codex
from tether.harnesses.transcript import Message, Transcript
from tether.imports.jsonl import ImportReport, import_jsonl
from tether.imports.ledger import IMPORTS_DIR, ImportLedger
from tether.ports import Progress, StoreOpener
from tether.scan.allow import home_allow

LOCK_FILE = ".transcripts.lock"


@dataclass(frozen=True)
class TranscriptReport:
    messages: int  # in the transcript
    new: int  # imported by this run
    sessions: tuple[str, ...]  # the tether sessions the transcript's messages are in
    skipped: dict[str, int] = field(default_factory=dict)  # lines, by reason
    imported: ImportReport | None = None  # None when nothing was new


def _line(message: Message, text: str) -> bytes:
    return msgspec.json.encode(
        {
            "session": message.session,
            "role": message.role,
            "text": text,
            "time": message.time.isoformat(),
        }
    )


def _lines(path: Path) -> Iterator[bytes]:
    """The transcript's lines, read as they are used (a long session's transcript runs to
    hundreds of MB, mostly tool output the readers skip); errors name the file."""
    with files.user_file(path) as handle:
        if handle is None:
            raise NotFoundError(f"no transcript {path}")
        yield from files.bounded_lines(handle, path)


#: The transcript formats ``sessions import --format`` takes, and their readers.
READERS: dict[str, Callable[[Iterable[bytes]], Transcript]] = {
    "claude-code": claude_code.read_transcript,
    "codex": codex.read_rollout,
}


def transcripts_in(path: Path) -> list[Path]:
    """``path`` itself, or every ``*.jsonl`` below it (in name order) when it is a folder:
    a Claude Code project folder, ``~/.claude/projects``, ``~/.codex/sessions``."""
    if not path.is_dir():
        with contextlib.suppress(OSError):
            if stat.S_ISCHR(path.stat().st_mode) or stat.S_ISBLK(path.stat().st_mode):
                # /dev/zero never ends, and has no line to stop at: not a transcript.
                raise BadInputError(f"{path}: a device, not a transcript")
        return [path]
    found = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
    if not found:
        raise BadInputError(f"{path}: holds no .jsonl transcript")
    return found


def import_transcript(
    home: Path,
    paths: Path | Sequence[Path],
    *,
    harness: str,
    now: datetime,
    store: StoreOpener,
    config: Config | None = None,
    meter: Progress | None = None,
) -> TranscriptReport:
    """Import what the transcripts ``paths`` (of ``harness``, a key of ``READERS``) hold
    that their sessions lack, in one import. Transcripts are read one at a time; what
    is kept across them is a 32-byte digest per message of the sessions they touch."""
    chosen = [paths] if isinstance(paths, Path) else list(paths)
    read = READERS[harness]
    folder = home / IMPORTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_FILE
    lock.touch(exist_ok=True)
    names = "\n".join(str(p.absolute()) for p in chosen)
    pending = folder / f"transcript-{hashlib.sha256(names.encode()).hexdigest()[:16]}.jsonl"
    part = pending.with_suffix(".part")
    messages = new = 0
    skipped: Counter[str] = Counter()
    seen: dict[str, set[bytes]] = {}  # by session, in first-appearance order
    allow = home_allow(home)
    with files.locked(lock):
        _clear(home, pending)  # a run killed before it cleared up: the sessions hold it
        # Private, like every file of the home that holds conversation (write_atomic's 0600).
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out, _removed_on_error(part):
            if meter is not None and len(chosen) > 1:
                meter.stage("reading transcripts", len(chosen))
            for path in chosen:
                transcript = read(_lines(path))
                if meter is not None and len(chosen) > 1:
                    meter.advance()
                messages += transcript.messages
                skipped.update(transcript.skipped)
                for sid, ms in transcript.sessions.items():
                    known = seen.get(sid)
                    if known is None:
                        known = seen[sid] = held_digests(home, sid, allow)
                    clean = clean_texts([(m.role, m.text) for m in ms], allow)
                    for m, text in zip(ms, clean, strict=True):
                        d = digest(m.role, m.time, text)
                        if text and d not in known:
                            known.add(d)
                            out.write(_line(m, text) + b"\n")
                            new += 1
            out.flush()
            os.fsync(out.fileno())
        report = TranscriptReport(
            messages=messages,
            new=new,
            sessions=tuple(seen),
            skipped=dict(sorted(skipped.items())),
        )
        if not messages:
            part.unlink()
            raise BadInputError(_unreadable(chosen, harness, skipped))
        if not new:
            part.unlink()
            return report
        os.replace(part, pending)
        imported = import_jsonl(home, pending, now=now, config=config, store=store, meter=meter)
        crash_point("transcript-after-import")
        _clear(home, pending)
    return dataclasses.replace(report, imported=imported)


def _unreadable(paths: Sequence[Path], harness: str, skipped: Counter[str]) -> str:
    """Why an import that found no message at all is refused: what its lines were."""
    if len(paths) == 1:
        where = str(paths[0])
    else:
        where = f"{os.path.commonpath([p.absolute() for p in paths])}: {len(paths)} transcripts"
    found = skipped_words(dict(skipped)) or "no line at all"
    return (
        f"{where}: no {harness} message in it ({found}); is it a {harness} transcript? "
        "nothing was imported"
    )


@contextlib.contextmanager
def _removed_on_error(path: Path) -> Iterator[None]:
    """Remove ``path`` if the block raises (a transcript that cannot be read: nothing of
    the import is left behind)."""
    try:
        yield
    except BaseException:
        path.unlink(missing_ok=True)
        raise


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
