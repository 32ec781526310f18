"""The job files as the running daemon knows them, looked at again every minute.

Like cron with its crontabs, the daemon picks up a job file that was added, edited or
removed while it runs, at the next minute; nothing needs a restart. Each file's bytes are
compared with what was last read (job files are small, and a timestamp can stay the same
across two quick saves), and only a file that changed is parsed again.

A file that turns invalid while the daemon runs does not stop it (at start it does: see
``jobs``). The job keeps the version last read well, or does not run if it never had
one, and one warning names the file and what is wrong (runbook: jobs-invalid), once
per version of the file; a line follows when it reads well again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tether.scheduler.jobs import (
    Job,
    JobFileError,
    job_name,
    job_paths,
    jobs_dir,
    parse_job,
    read_job_file,
)

log = logging.getLogger("tether.scheduler")
RUNBOOK = "jobs-invalid"


@dataclass(frozen=True)
class _Read:
    """One job file as last read: its bytes (None when it could not be read, ``unread``
    saying why), and what is wrong with it when it did not give a job."""

    data: bytes | None
    unread: str | None = None
    problem: str | None = None

    def same(self, other: _Read) -> bool:
        return (self.data, self.unread) == (other.data, other.unread)


class JobWatch:
    """The jobs to run, re-read from ``<home>/jobs`` by ``poll``."""

    def __init__(self, home: Path, jobs: Sequence[Job]) -> None:
        """``jobs``: what the daemon read at its start (every file valid)."""
        self.home = home
        self._good: dict[str, Job] = {j.name: j for j in jobs}
        # The bytes each job was parsed from: an edit made since then is seen at the
        # first poll, however soon after the start it came.
        self._read: dict[Path, _Read] = {j.path: _Read(j.source) for j in jobs}
        self._listing_failed = False

    @property
    def jobs(self) -> list[Job]:
        """The jobs to run now, by name."""
        return [self._good[name] for name in sorted(self._good)]

    def poll(self) -> list[Job] | None:
        """Read the job files again; the jobs to run when anything changed, else None."""
        try:
            paths = job_paths(self.home)
        except OSError as exc:
            if not self._listing_failed:
                log.warning(
                    "cron jobs unchanged: cannot list %s: %s (runbook: %s)",
                    jobs_dir(self.home),
                    exc.strerror or exc,
                    RUNBOOK,
                )
                self._listing_failed = True
            return None
        if self._listing_failed:
            log.info("cron jobs folder %s lists again", jobs_dir(self.home))
            self._listing_failed = False
        changed = False
        seen: dict[Path, _Read] = {}
        for path in paths:
            try:
                latest = _Read(read_job_file(path))
            except JobFileError as exc:
                latest = _Read(None, exc.problem)
            before = self._read.get(path)
            if before is not None and before.same(latest):
                seen[path] = before
                continue
            seen[path] = self._take(path, latest, before)
            changed = True
        for path in self._read.keys() - seen.keys():
            changed = True
            name = job_name(path)
            if self._good.pop(name, None) is not None:
                log.info("cron job=%s removed (%s is gone)", name, path)
        self._read = seen
        return self.jobs if changed else None

    def _take(self, path: Path, latest: _Read, before: _Read | None) -> _Read:
        """Parse a new or changed file, keep its job if it parses, log what happened."""
        name = job_name(path)
        problem = latest.unread
        if latest.data is not None:
            try:
                job = parse_job(path, latest.data)
            except JobFileError as exc:
                problem = exc.problem
            else:
                known = name in self._good
                self._good[name] = job
                if before is not None and before.problem is not None:
                    log.info("cron job file %s reads again; job=%s updated", path, name)
                else:
                    log.info("cron job=%s %s: %s", name, "updated" if known else "added", path)
                return latest
        if name in self._good:
            outcome = f"job={name} keeps the version last read"
        else:
            outcome = f"job={name} does not run until the file is fixed"
        log.warning("cron job file %s: %s; %s (runbook: %s)", path, problem, outcome, RUNBOOK)
        return _Read(latest.data, latest.unread, problem)
