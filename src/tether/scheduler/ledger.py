"""The run ledger ``<home>/jobs/runs.jsonl``: ``{time, name, session, status}`` a line
(and ``reason`` on a run the budget skipped).

Appends are durable and locked like a session log's (a torn last line from a crash is
cut before the next append and ignored on read). On start the daemon closes a
``started`` left by a dead process as ``failed``.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import msgspec

from tether import files
from tether.core.scheduling import RunRecord, RunStatus, open_runs
from tether.errors import TetherError
from tether.records import is_utc
from tether.scheduler.jobs import jobs_dir

LEDGER_FILE = "runs.jsonl"
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
    def __init__(self, home: Path) -> None:
        self.path = jobs_dir(home) / LEDGER_FILE

    def read(self) -> list[RunRecord]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        lines, _ = files.split_complete(data)
        out = []
        for n, line in enumerate(lines, start=1):
            try:
                out.append(_decoder.decode(line))
            except msgspec.DecodeError as exc:
                raise LedgerError(self.path, n, str(exc)) from None
        return out

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
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        with files.locked(self.path) as locked:
            files.repair_torn_tail(locked)
            files.append_durable(locked, _encoder.encode(record) + b"\n")
        return record

    def close_leftovers(self, time: datetime) -> list[RunRecord]:
        """Mark every ``started`` with no end as ``failed`` (its process is gone)."""
        return [self.append(time, r.name, r.session, "failed") for r in open_runs(self.read())]
