"""Cron runs: a job that is due starts a new session ``job-<name>-t<unix-seconds>`` on the
background slot, recorded in the run ledger as ``started`` then ``finished`` or ``failed``,
or ``skipped`` with the reason code when ``[budget]`` refuses its first model call.

A tick whose job still has a run in flight is skipped (the schedule does not queue). A
scheduler that woke late runs a job once for the minutes it missed (at most a day back);
a run already ``started`` in the ledger for that minute (a restart inside the minute) is
not run again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from tether.agent.budget import BudgetRefusedError
from tether.agent.turn import Agent
from tether.core.timing.cron_expr import latest_due
from tether.core.timing.scheduling import (
    TIER_JOB,
    Priority,
    RunStatus,
    job_session_id,
    last_started,
    scheduled_text,
)
from tether.errors import TetherError
from tether.faults import crash_point
from tether.memory.tiers import tiers_text
from tether.scheduler.jobs import Job
from tether.scheduler.ledger import RunLedger

log = logging.getLogger("tether.scheduler")


@dataclass(frozen=True)
class CronEvent:
    name: str
    session: str
    outcome: Literal["started", "skipped_busy"]


@dataclass
class _Run:
    session: str
    task: asyncio.Task[None]


class CronRunner:
    def __init__(
        self,
        *,
        agent: Agent,
        jobs: Sequence[Job],
        ledger: RunLedger,
        start: datetime,
        on_done: Callable[[], None],
    ) -> None:
        self.agent = agent
        self.on_done = on_done
        self.jobs = list(jobs)
        self.ledger = ledger
        #: Minutes after this one are checked on the next tick (the start's own included).
        self.checked = start - timedelta(minutes=1)
        self.started: dict[str, datetime] = {}
        self.runs: dict[str, _Run] = {}

    def load(self) -> None:
        """Read when each job last started (after the leftovers of a dead daemon closed)."""
        self.started = last_started(self.ledger.read())

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        return [r.task for r in self.runs.values() if not r.task.done()]

    def tick(self, now: datetime) -> list[CronEvent]:
        events: list[CronEvent] = []
        for job in self.jobs:
            minute = latest_due(job.schedule, self.checked, now)
            if minute is None:
                continue
            previous = self.started.get(job.name)
            if previous is not None and previous >= minute:
                continue  # already started for this minute (by a daemon restarted since)
            sid = job_session_id(job.name, minute)
            run = self.runs.get(job.name)
            if run is not None and not run.task.done():
                log.info(
                    "cron job=%s skipped %s: the previous run %s is still busy",
                    job.name,
                    sid,
                    run.session,
                )
                events.append(CronEvent(job.name, run.session, "skipped_busy"))
                continue
            try:
                text = scheduled_text(now, job.prompt, self._listing(job))
            except TetherError as exc:
                log.warning("cron job=%s not started: %s", job.name, exc)
                continue
            self.started[job.name] = now
            self.ledger.append(now, job.name, sid, "started")
            crash_point("cron-after-started")
            task = asyncio.create_task(self._run(job, sid, text))
            task.add_done_callback(lambda _: self.on_done())
            self.runs[job.name] = _Run(sid, task)
            events.append(CronEvent(job.name, sid, "started"))
        self.checked = now
        return events

    def _listing(self, job: Job) -> str | None:
        if job.name != TIER_JOB:
            return None
        return tiers_text(self.agent.home, self.agent.store, self.agent.config.memory.tiers_notes)

    async def _run(self, job: Job, sid: str, text: str) -> None:
        agent = self.agent
        status: RunStatus = "failed"
        reason: str | None = None
        try:
            done = await agent.run_turn(
                sid, text, slot=agent.config.slots.background, priority=Priority.CRON, kind="cron"
            )
            status = "finished"
            log.info(
                "cron job=%s session=%s finished turn=%d untrusted=%s ms=%.0f",
                job.name,
                sid,
                done.turn,
                done.untrusted,
                done.elapsed_ms,
            )
        except BudgetRefusedError as exc:
            # Refused before its session was made: a skipped run, with the reason.
            status, reason = "skipped", exc.reason
            log.warning("cron job=%s session=%s skipped: %s", job.name, sid, exc)
        except TetherError as exc:
            log.warning("cron job=%s session=%s failed: %s", job.name, sid, exc)
        finally:
            # Cancelled by a stopping daemon too: the run did not finish.
            self.ledger.append(agent.clock.now(), job.name, sid, status, reason)
