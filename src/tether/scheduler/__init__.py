"""Scheduled work inside ``tether serve``: heartbeat, cron jobs and their run ledger,
tool-output summaries, all on the background slot."""

from tether.scheduler.jobs import Job, JobFileError, load_jobs
from tether.scheduler.loop import Scheduler, TickReport

__all__ = ["Job", "JobFileError", "Scheduler", "TickReport", "load_jobs"]
