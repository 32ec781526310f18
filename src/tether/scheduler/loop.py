"""The scheduler inside ``tether serve``: heartbeat, cron runs and tool-output summaries,
all on the background slot, through the same agent, tools and broker as any session.

One asyncio task wakes when the heartbeat is due, just after each minute turns, and when
a scheduled turn ends; it reads the job files again (``JobWatch``: a job added, edited or
removed takes effect at the next minute), starts what is due as tasks of its own and
goes back to sleep. Who gets the background slot when several wait is the slot
gate's business (``Priority``): compaction, then cron, then heartbeat, then summaries.
Time comes from the injected clock, so tests drive ``tick()`` without sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from tether.agent.turn import Agent
from tether.core.timing.scheduling import RunRecord
from tether.scheduler.cron import CronEvent, CronRunner
from tether.scheduler.heartbeat import BeatOutcome, Heartbeat
from tether.scheduler.job_watch import JobWatch
from tether.scheduler.jobs import Job
from tether.scheduler.ledger import RunLedger
from tether.scheduler.summaries import ToolSummaries

log = logging.getLogger("tether.scheduler")
#: Wake this long after a minute turns, so the minute read is the new one.
MINUTE_SLACK_S = 0.05
MAX_SLEEP_S = 60.0
#: After a tick that raised, wait this long before the next.
RETRY_S = 5.0


@dataclass(frozen=True)
class TickReport:
    heartbeat: BeatOutcome
    cron: tuple[CronEvent, ...]


class Scheduler:
    def __init__(self, *, agent: Agent, jobs: Sequence[Job]) -> None:
        self.agent = agent
        self.clock = agent.clock
        start = self.clock.now()
        self.ledger = RunLedger(agent.home, keep=agent.config.jobs.keep_runs)
        self.summaries = ToolSummaries(
            home=agent.home,
            config=agent.config,
            llm=agent.llm,
            meter=agent.meter,
            inflight=agent.inflight,
            clock=agent.clock,
        )
        self._kick = asyncio.Event()
        self.heartbeat = Heartbeat(agent=agent, start=start, on_done=self._kick.set)
        self.watch = JobWatch(agent.home, jobs)
        self.cron = CronRunner(
            agent=agent,
            jobs=self.watch.jobs,
            ledger=self.ledger,
            start=start,
            on_done=self._kick.set,
        )
        self._loop: asyncio.Task[None] | None = None
        #: Set by ``halt``/``stop``: the daemon is stopping, so nothing new starts.
        self.stopping = False

    def recover(self) -> list[RunRecord]:
        """Close runs a dead daemon left ``started`` as ``failed``; call once, before
        ``start``, when this process is the home's only daemon."""
        closed = self.ledger.close_leftovers(self.clock.now())
        for r in closed:
            log.warning(
                "cron job=%s session=%s was left running by a daemon that stopped; marked failed",
                r.name,
                r.session,
            )
        self.cron.load()
        return closed

    # -- one pass --------------------------------------------------------------------------

    def tick(self) -> TickReport:
        """Start whatever is due now (as tasks) and say what happened; nothing once the
        daemon is stopping."""
        if self.stopping:
            return TickReport(heartbeat="stopping", cron=())
        now = self.clock.now()
        jobs = self.watch.poll()
        if jobs is not None:
            self.cron.jobs = jobs
        cron = tuple(self.cron.tick(now))
        beat = self.heartbeat.tick(now)
        if self.agent.budget is not None:
            self.agent.budget.flush_stale()  # a settle no next call has carried yet
        return TickReport(heartbeat=beat, cron=cron)

    def _scheduled(self) -> list[asyncio.Task[None]]:
        tasks = list(self.cron.tasks)
        if self.heartbeat.task is not None and not self.heartbeat.task.done():
            tasks.append(self.heartbeat.task)
        return tasks

    def _tasks(self) -> list[asyncio.Task[None]]:
        return [*self._scheduled(), *(t for t in self.summaries.tasks if not t.done())]

    def wake_in(self) -> float:
        """Seconds until the next thing may be due: the heartbeat, or the next minute
        (a job may be due then, or a job file may have appeared)."""
        now = self.clock.now()
        minute = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
        waits = [(minute - now).total_seconds() + MINUTE_SLACK_S]
        beat = self.heartbeat.next_at()
        if beat is not None:
            waits.append((beat - now).total_seconds())
        return min(max(min(waits), 0.0), MAX_SLEEP_S)

    # -- running inside the daemon ---------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.create_task(self.run(), name="tether-scheduler")

    async def run(self) -> None:
        jobs = ", ".join(j.name for j in self.cron.jobs) or "none"
        every = self.agent.config.heartbeat.every_s
        log.info("scheduler heartbeat every_s=%d jobs=%s", every, jobs)
        while True:
            self._kick.clear()
            try:
                self.tick()
                delay = self.wake_in()
            except Exception:  # a bug or a full disk must not stop every later tick
                log.exception("scheduler tick failed; trying again in %.0f s", RETRY_S)
                delay = RETRY_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), timeout=delay)

    async def idle(self) -> None:
        """Wait until no scheduled turn or summary is running (a turn may queue summaries,
        so look again until nothing is left)."""
        while tasks := self._tasks():
            await asyncio.wait(tasks)

    def halt(self) -> None:
        """Start no new heartbeat or cron run from now on (called the moment the daemon
        is told to stop, before uvicorn's grace for turns in flight); work already
        running goes on until ``stop``."""
        self.stopping = True
        if self._loop is not None:
            self._loop.cancel()

    async def stop(self, grace_s: float) -> None:
        """Stop waking; let running work finish for ``grace_s``, then cancel it (a turn
        cut short logs ``interrupted``, its run ``failed``)."""
        self.stopping = True
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
            self._loop = None
        tasks = self._tasks()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
