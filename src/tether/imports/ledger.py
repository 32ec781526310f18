"""The import ledger ``<home>/imports/<sha256 of the file>.jsonl``: how far an import of
that exact file got, so that running it again after a crash or Ctrl-C finishes it
without writing anything twice, and running it after it finished writes nothing.

Lines, each durable before what it announces is done: ``begin`` (the file and its
counts), then per session ``session`` (its epoch and how many records its current epoch
held before the import: -1 when the import creates it) before anything is appended to
it; ``journaled`` once the import is in the memory journal, and ``complete`` at the end.
What an interrupted run wrote to a session is told by its records after that count. A
torn last line (a crash mid-append) is cut before the next append and ignored on read,
as in a session log.

While an import runs it holds the ledger's lock, so a second run of the same file
waits for the first and then finds it complete.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import msgspec

from tether import files
from tether.errors import ImportLedgerError

IMPORTS_DIR = "imports"


class Begin(msgspec.Struct, tag="begin", frozen=True):
    time: datetime
    file: str
    records: int
    sessions: int


class Started(msgspec.Struct, tag="session", frozen=True):
    session: str
    epoch: int
    before: int  # records of its current epoch before the import; -1: created by it


class Journaled(msgspec.Struct, tag="journaled", frozen=True):
    pass


class Complete(msgspec.Struct, tag="complete", frozen=True):
    time: datetime


Entry = Begin | Started | Journaled | Complete
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Entry)


@dataclass
class Progress:
    """What the ledger says was done."""

    begun: Begin | None = None
    started: dict[str, Started] = field(default_factory=dict)
    journaled: bool = False
    complete: datetime | None = None


class ImportLedger:
    """The ledger of one file's import, held open and locked by ``held``."""

    def __init__(self, home: Path, digest: str) -> None:
        self.path = home / IMPORTS_DIR / f"{digest}.jsonl"
        self._fd: int | None = None

    @contextlib.contextmanager
    def held(self) -> Iterator[Progress]:
        """Lock the ledger (waiting for another import of the same file) and read it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        os.close(files.open_home(self.path, os.O_RDWR | os.O_CREAT))
        with files.locked(self.path) as fd:
            try:
                files.repair_torn_tail(fd)
                self._fd = fd
                yield self._read(fd)
            finally:
                self._fd = None

    def _read(self, fd: int) -> Progress:
        data = files.read_from(fd, 0, os.fstat(fd).st_size)
        lines, _ = files.split_complete(data)
        progress = Progress()
        for number, raw in enumerate(lines, start=1):
            try:
                entry = _decoder.decode(raw)
            except msgspec.DecodeError as exc:
                raise ImportLedgerError(self.path, number, str(exc)) from None
            if isinstance(entry, Begin):
                progress.begun = entry
            elif isinstance(entry, Started):
                progress.started[entry.session] = entry
            elif isinstance(entry, Journaled):
                progress.journaled = True
            else:
                progress.complete = entry.time
        return progress

    def append(self, *entries: Entry) -> None:
        """Append ``entries`` durably, in one write (only inside ``held``)."""
        if self._fd is None:
            raise RuntimeError("the import ledger is appended to only while held")
        if entries:
            data = b"".join(_encoder.encode(e) + b"\n" for e in entries)
            files.append_durable(self._fd, data, self.path)
