"""The run ledger ``<home>/jobs/runs.jsonl``: ``{time, name, session, status}`` a line
(and ``reason`` on a run the budget skipped).

Appends are durable and locked like a session log's (a torn last line from a crash is
cut before the next append and ignored on read). On start the daemon closes a
``started`` left by a dead process as ``failed``.

The ledger is bounded: under the append's lock, once it has grown ``keep // 2`` lines
(and at least 16) past what the last pruning left, it is rewritten (atomically, by a
rename) to its newest ``keep`` runs plus what the scheduler reads whatever its age
(``core.timing.scheduling.retained_runs``). So it holds about ``2 * keep`` lines, and pruning
costs one read and one write per ``keep // 2`` appends.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import msgspec

from tether import files
from tether.config import JobsConfig
from tether.core.timing.scheduling import RunRecord, RunStatus, open_runs, retained_runs
from tether.errors import TetherError
from tether.records import is_utc
from tether.scheduler.jobs import jobs_dir

LEDGER_FILE = "runs.jsonl"
#: Fewest lines appended between two prunings (a small ``keep`` prunes no more often).
MIN_SLACK = 16
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(RunRecord)


class LedgerError(TetherError):
    """A line of the run ledger that is not a run record (and not a torn last line)."""

    def __init__(self, path: Path, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: malformed run record: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


class RunLedger:
    def __init__(self, home: Path, keep: int | None = None) -> None:
        """``keep``: ``[jobs] keep_runs`` (its default when None)."""
        self.path = jobs_dir(home) / LEDGER_FILE
        self.keep = JobsConfig().keep_runs if keep is None else keep
        #: Lines in the file as this process last knew them (None: not counted yet).
        self._lines: int | None = None
        #: Lines the last pruning left (the next one waits for ``slack`` more).
        self._floor = 2 * self.keep

    @property
    def slack(self) -> int:
        return max(self.keep // 2, MIN_SLACK)

    def read(self) -> list[RunRecord]:
        try:
            data = files.read_home_bytes(self.path)
        except FileNotFoundError:
            return []
        return self._decode(data)

    def _decode(self, data: bytes) -> list[RunRecord]:
        lines, _ = files.split_complete(data)
        out = []
        for n, line in enumerate(lines, start=1):
            try:
                out.append(_decoder.decode(line))
            except msgspec.DecodeError as exc:
                raise LedgerError(self.path, n, str(exc)) from None
        return out

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        """The ledger's lock, on the file the path names now: a pruning replaces the file,
        and a lock taken on the old one while it did would guard nothing."""
        while True:
            os.close(files.open_home(self.path, os.O_RDWR | os.O_CREAT))
            with files.locked(self.path) as locked:
                try:
                    current = os.stat(self.path).st_ino
                except FileNotFoundError:
                    current = -1
                if os.fstat(locked).st_ino == current:
                    yield locked
                    return

    def append(
        self,
        time: datetime,
        name: str,
        session: str,
        status: RunStatus,
        reason: str | None = None,
    ) -> RunRecord:
        if not is_utc(time):
            raise TetherError(f"refusing to log a non-UTC time: {time.isoformat()}")
        record = RunRecord(time=time, name=name, session=session, status=status, reason=reason)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked() as locked:
            size = files.repair_torn_tail(locked)
            if self._lines is None:
                self._lines = files.read_from(locked, 0, size).count(b"\n")
            files.append_durable(locked, _encoder.encode(record) + b"\n")
            self._lines += 1
            if self._lines > max(self._floor, 2 * self.keep) + self.slack:
                self._prune(locked)
        return record

    def _prune(self, locked: int) -> None:
        """Rewrite the ledger to what ``retained_runs`` keeps (under the append's lock)."""
        size = os.fstat(locked).st_size
        records = self._decode(files.read_from(locked, 0, size))
        kept = retained_runs(records, self.keep)
        if len(kept) < len(records):
            files.write_atomic(self.path, b"".join(_encoder.encode(r) + b"\n" for r in kept))
        self._lines = self._floor = len(kept)

    def close_leftovers(self, time: datetime) -> list[RunRecord]:
        """Mark every ``started`` with no end as ``failed`` (its process is gone)."""
        return [self.append(time, r.name, r.session, "failed") for r in open_runs(self.read())]
