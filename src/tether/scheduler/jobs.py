"""Cron job files: ``<home>/jobs/<name>.toml`` with exactly ``schedule`` and ``prompt``.

The owner writes them; tether only reads them: when the daemon starts (an invalid file
refuses the start with one line naming it), every minute while it runs
(``scheduler.job_watch``), and on ``tether jobs check``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from tether.config import explain_validation
from tether.core.timing.cron_expr import Schedule, ScheduleError, parse_schedule
from tether.core.timing.scheduling import InvalidJobNameError, check_job_name
from tether.errors import BadInputError, UnsafeHomePathError
from tether.files import read_home_bytes

JOBS_DIR = "jobs"
JOB_SUFFIX = ".toml"


class JobFileError(BadInputError):
    """A job file that cannot be used: unreadable, not TOML, a key other than ``schedule``
    and ``prompt``, a bad schedule or a bad name. The daemon does not start."""

    runbook = "jobs-invalid"

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class _JobFile(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    schedule: str
    prompt: str


@dataclass(frozen=True)
class Job:
    name: str
    schedule: Schedule
    prompt: str
    path: Path
    #: The file's bytes this job was parsed from (what a running daemon compares with).
    source: bytes = field(repr=False)


def jobs_dir(home: Path) -> Path:
    return home / JOBS_DIR


def job_name(path: Path) -> str:
    """The name a job file gives its job (checked by ``parse_job``)."""
    return path.name.removesuffix(JOB_SUFFIX)


def read_job_file(path: Path) -> bytes:
    """The bytes of a job file; JobFileError when it cannot be read."""
    try:
        return read_home_bytes(path)
    except (OSError, UnsafeHomePathError) as exc:
        raise JobFileError(path, f"cannot read: {exc}") from None


def load_job(path: Path) -> Job:
    return parse_job(path, read_job_file(path))


def parse_job(path: Path, data: bytes) -> Job:
    """The job in ``data``, read from ``path``; JobFileError naming what is wrong."""
    name = job_name(path)
    try:
        check_job_name(name)
    except InvalidJobNameError as exc:
        raise JobFileError(path, f"{exc} (the file name is the job's name)") from None
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise JobFileError(path, f"cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise JobFileError(path, f"not valid TOML: {exc}") from None
    try:
        spec = msgspec.convert(raw, _JobFile)
    except msgspec.ValidationError as exc:
        key, problem = explain_validation(str(exc))
        if problem.startswith("unknown key"):
            problem = "unknown key (a job file has exactly `schedule` and `prompt`)"
        raise JobFileError(path, f"{key}: {problem}" if key else problem) from None
    try:
        schedule = parse_schedule(spec.schedule)
    except ScheduleError as exc:
        raise JobFileError(path, f"schedule: {exc.message}") from None
    if not spec.prompt.strip():
        raise JobFileError(path, "prompt: empty (it is the user text of every run)")
    return Job(name=name, schedule=schedule, prompt=spec.prompt, path=path, source=data)


def job_paths(home: Path) -> list[Path]:
    directory = jobs_dir(home)
    if not directory.is_dir():
        return []
    # Dot files are editors' scratch copies (``.tier.toml.swp``, ``.#tier.toml``).
    return sorted(
        p for p in directory.iterdir() if p.name.endswith(JOB_SUFFIX) and not p.name.startswith(".")
    )


def load_jobs(home: Path) -> list[Job]:
    """Every job of the home, by name; the first invalid file (by name) raises."""
    return [load_job(p) for p in job_paths(home)]
