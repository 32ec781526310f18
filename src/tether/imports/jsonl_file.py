"""Reading an import file (``tether sessions import``) in two passes without holding it.

The check pass (``check``) decodes and validates every line, and keeps, per record, only
where its line starts, its line number and its session (16 bytes). The write pass
(``ImportPlan.sessions_lines``) then reads each session's lines again by offset, one session at
a time in first-appearance order, so memory holds one session's records, not the file,
and no session is opened twice however its lines are interleaved.

Both passes read through one open handle, the second no further than the first did:
lines appended meanwhile wait for the next import, and a file replaced by rename is still
read from the handle. A file rewritten in place between the passes fails in the second
pass (``ImportChangedError``). A pipe cannot be read twice: it is read into memory once.

Reads are bounded while they happen: a line past ``MAX_LINE_BYTES`` (``/dev/zero`` has no
newline) and a pipe or device past ``MAX_STREAM_BYTES`` are refused (exit 2, naming the
file, the line and the limit) after reading that much, never after reading all of it.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, BinaryIO, Literal

import msgspec

from tether.errors import BadInputError, ImportChangedError, ImportFormatError, NotFoundError
from tether.files import MAX_LINE_BYTES
from tether.ids import SESSION_ID_GRAMMAR, is_session_id

#: The most a pipe or a device (not a regular file) is read into memory for an import.
MAX_STREAM_BYTES = 256 * 1024 * 1024
_MIB = 1024 * 1024


class ImportLine(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One line of an import file."""

    session: str
    role: Literal["user", "assistant"]
    text: str
    time: Annotated[datetime, msgspec.Meta(tz=True)]
    speaker: str | None = None
    #: Whose session it is (a sweep owner id); absent: the home's owner.
    owner: str | None = None


_decoder = msgspec.json.Decoder(ImportLine)
OWNER_GRAMMAR = "1 to 64 characters of a-z, 0-9, '-' and '_', starting with a letter or digit"
_OWNER = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def _problem(exc: msgspec.DecodeError) -> str:
    """msgspec's message, worded for someone editing the file."""
    text = str(exc)
    if "timezone" in text:
        return f"{text} (write a zone: ...Z or ...+02:00)"
    return text


def decode_line(path: Path, number: int, raw: bytes) -> ImportLine:
    """One non-blank line, validated, its time in UTC; ImportFormatError naming file and
    line."""
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
    if line.owner is not None and not _OWNER.fullmatch(line.owner):
        raise ImportFormatError(
            path, number, f"owner {line.owner!r} is not an owner id: {OWNER_GRAMMAR}"
        )
    return msgspec.structs.replace(line, time=line.time.astimezone(UTC))


def _unreadable(path: Path, exc: OSError) -> BadInputError:
    return BadInputError(f"{path}: cannot read: {exc.strerror or exc}")


def _long_line(path: Path, number: int) -> BadInputError:
    return BadInputError(
        f"{path}: line {number} is longer than {MAX_LINE_BYTES // _MIB} MiB, the most an "
        "import line may be"
    )


def _read_stream(path: Path, handle: BinaryIO) -> bytes:
    """A pipe or device read whole, refused past ``MAX_STREAM_BYTES`` or at a line past
    ``MAX_LINE_BYTES`` as soon as it gets there."""
    out = bytearray()
    number, line_start = 1, 0
    while block := handle.read(_MIB):
        start = len(out)
        out += block
        if len(out) > MAX_STREAM_BYTES:
            raise BadInputError(
                f"{path}: more than {MAX_STREAM_BYTES // _MIB} MiB from a pipe or device; "
                "write it to a file and import the file"
            )
        last = out.rfind(b"\n", start)
        if last >= 0:
            number += out.count(b"\n", start)
            line_start = last + 1
        if len(out) - line_start > MAX_LINE_BYTES:
            raise _long_line(path, number)
    return bytes(out)


class _Source:
    """The file through one handle (or a pipe's bytes), read within its first ``size``."""

    def __init__(self, path: Path, handle: BinaryIO, data: bytes | None, size: int) -> None:
        self.path = path
        self.handle = handle
        self.data = data
        self.size = size

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """(offset, raw line) from the start, up to ``size``."""
        offset = 0
        if self.data is not None:
            for raw in self.data.split(b"\n"):
                yield offset, raw
                offset += len(raw) + 1
            return
        self._seek(0)
        number = 0
        while offset < self.size:
            raw = self._readline(self.size - offset)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise _long_line(self.path, number)
            yield offset, raw
            offset += len(raw)

    def line_at(self, offset: int) -> bytes:
        if self.data is not None:
            end = self.data.find(b"\n", offset)
            return self.data[offset : None if end < 0 else end]
        self._seek(offset)
        return self._readline(self.size - offset)

    def _seek(self, offset: int) -> None:
        try:
            self.handle.seek(offset)
        except OSError as exc:
            raise _unreadable(self.path, exc) from None

    def _readline(self, limit: int) -> bytes:
        """A line, or its first ``MAX_LINE_BYTES`` + 1 bytes (the caller refuses it)."""
        try:
            return self.handle.readline(min(limit, MAX_LINE_BYTES + 1))
        except OSError as exc:
            raise _unreadable(self.path, exc) from None


@contextmanager
def opened(path: Path) -> Iterator[_Source]:
    """The import file, open for both passes."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise NotFoundError(f"no import file {path}") from None
    except OSError as exc:
        raise _unreadable(path, exc) from None
    with handle:
        try:
            info = os.fstat(handle.fileno())
            data = None if stat.S_ISREG(info.st_mode) else _read_stream(path, handle)
        except OSError as exc:
            raise _unreadable(path, exc) from None
        yield _Source(path, handle, data, info.st_size if data is None else len(data))


@dataclass
class ImportPlan:
    """What the check pass learned: the sessions in first-appearance order with their
    first line's time (a new session's start), the counts, and where each record is."""

    source: _Source
    sessions: dict[str, datetime] = field(default_factory=dict)
    turns: int = 0
    digest: str = ""  # sha256 of the bytes checked: the file's identity for the ledger
    #: Per record, in file order: where its line starts, its line number, and the index
    #: of its session in ``sessions``.
    offsets: array[int] = field(default_factory=lambda: array("q"))
    numbers: array[int] = field(default_factory=lambda: array("q"))
    owners: array[int] = field(default_factory=lambda: array("q"))
    #: Sessions whose lines name an owner, and that owner.
    session_owners: dict[str, str] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return len(self.offsets)

    def sessions_lines(self) -> Iterator[tuple[str, Iterator[ImportLine]]]:
        """Each session with its lines read again, in file order; ``ImportChangedError``
        when a line is no longer what the check pass read."""
        # Records grouped by session (a counting sort: one int a record).
        starts = array("q", [0]) * (len(self.sessions) + 1)
        for owner in self.owners:
            starts[owner + 1] += 1
        for i in range(len(self.sessions)):
            starts[i + 1] += starts[i]
        order = array("q", [0]) * self.records
        fill = array("q", starts)
        for record, owner in enumerate(self.owners):
            order[fill[owner]] = record
            fill[owner] += 1
        for index, sid in enumerate(self.sessions):
            yield sid, self._read(sid, order[starts[index] : starts[index + 1]])

    def _read(self, sid: str, records: array[int]) -> Iterator[ImportLine]:
        path = self.source.path
        for record in records:
            number = self.numbers[record]
            raw = self.source.line_at(self.offsets[record])
            try:
                line = decode_line(path, number, raw)
            except ImportFormatError as exc:
                raise ImportChangedError(path, number, exc.problem) from None
            if line.session != sid:
                raise ImportChangedError(path, number, f"session {line.session!r}, was {sid!r}")
            yield line


def check(source: _Source) -> ImportPlan:
    """Every line decoded and validated (the first bad one raises ImportFormatError);
    blank lines skipped."""
    plan = ImportPlan(source)
    index: dict[str, int] = {}
    # A pipe's bytes are hashed whole; a file's as its lines go by (the same bytes).
    digest = hashlib.sha256(source.data or b"")
    for number, (offset, raw) in enumerate(source.lines(), start=1):
        if source.data is None:
            digest.update(raw)
        if not raw.strip():
            continue
        line = decode_line(source.path, number, raw)
        owner = index.get(line.session)
        if owner is None:
            owner = index[line.session] = len(index)
            plan.sessions[line.session] = line.time
        if line.owner is not None:
            said = plan.session_owners.setdefault(line.session, line.owner)
            if said != line.owner:
                raise ImportFormatError(
                    source.path,
                    number,
                    f"session {line.session!r} has owner {said!r} on an earlier line",
                )
        plan.offsets.append(offset)
        plan.numbers.append(number)
        plan.owners.append(owner)
        plan.turns += line.role == "user"
    plan.digest = digest.hexdigest()
    return plan
