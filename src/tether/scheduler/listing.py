"""``tether jobs list`` (and the page's jobs view) as records: each job file with its
schedule, next run and last run, or the error that keeps it from running (the daemon
would refuse to start)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tether.core.timing.cron_expr import next_due
from tether.core.timing.scheduling import RunRecord, last_records
from tether.scheduler.jobs import JobFileError, job_paths, load_job
from tether.scheduler.ledger import RunLedger


@dataclass(frozen=True)
class JobRow:
    """One job file: ``name`` (its stem when it is invalid), ``schedule`` as written,
    ``next_run`` (None: the schedule never fires), ``last_run`` from ``jobs/runs.jsonl``;
    ``error``: why the file cannot be used (then nothing else is known)."""

    name: str
    path: Path
    schedule: str | None = None
    next_run: datetime | None = None
    last_run: RunRecord | None = None
    error: str | None = None


def job_listing(home: Path, now: datetime, runs: list[RunRecord] | None = None) -> list[JobRow]:
    """Every job file of ``home`` in name order (``runs``: the ledger, read when None)."""
    last = last_records(RunLedger(home).read() if runs is None else runs)
    rows: list[JobRow] = []
    for path in job_paths(home):
        try:
            job = load_job(path)
        except JobFileError as exc:
            rows.append(JobRow(name=path.stem, path=path, error=exc.problem))
            continue
        rows.append(
            JobRow(
                name=job.name,
                path=path,
                schedule=job.schedule.text,
                next_run=next_due(job.schedule, now),
                last_run=last.get(job.name),
            )
        )
    return rows
