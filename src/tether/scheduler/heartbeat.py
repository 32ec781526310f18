"""The heartbeat: every ``[heartbeat] every_s`` seconds, one turn on the standing session
``heartbeat`` (background slot), whose user text is ``It is <UTC time>.`` and the prompt
file. An unreadable prompt skips the beat and logs one line until it reads again. A beat
over ``[budget.heartbeat]`` (or ``day_usd``) is skipped before anything is written: the
budget gate logs it once a day and appends its reason to ``telemetry/budget.jsonl``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Literal

from tether.agent.budget import BudgetRefusedError
from tether.agent.outcomes import read_prompt
from tether.agent.turn import Agent
from tether.core.timing.scheduling import HEARTBEAT_SESSION, Priority, scheduled_text
from tether.errors import ConfigError, TetherError

log = logging.getLogger("tether.scheduler")
RUNBOOK = "heartbeat-prompt-unreadable"
BeatOutcome = Literal["off", "not_due", "busy", "prompt_unreadable", "started", "stopping"]


class Heartbeat:
    def __init__(self, *, agent: Agent, start: datetime, on_done: Callable[[], None]) -> None:
        self.agent = agent
        self.on_done = on_done
        self.every = timedelta(seconds=agent.config.heartbeat.every_s)
        #: When the last beat started (or the daemon, before the first).
        self.last = start
        self.task: asyncio.Task[None] | None = None
        self._unreadable = False
        #: The reason code of the last beat the budget skipped (None after one that ran).
        self.skipped: str | None = None

    @property
    def enabled(self) -> bool:
        return self.every > timedelta(0)

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def next_at(self) -> datetime | None:
        """When the next beat is due, or None while one runs (its end wakes the loop)."""
        if not self.enabled or self.running:
            return None
        return self.last + self.every

    def tick(self, now: datetime) -> BeatOutcome:
        if not self.enabled:
            return "off"
        if now < self.last + self.every:
            return "not_due"
        if self.running:
            return "busy"  # one beat at a time; the next goes when this one ends
        self.last = now
        if self.agent.busy.is_busy(HEARTBEAT_SESSION):
            return "busy"  # the owner is in the session: skip this beat
        name = self.agent.config.heartbeat.prompt
        try:
            prompt = read_prompt(self.agent.home, name)
        except ConfigError as exc:
            if not self._unreadable:
                log.warning("heartbeat skipped: %s (runbook: %s)", exc, RUNBOOK)
                self._unreadable = True
            return "prompt_unreadable"
        if self._unreadable:
            log.info("heartbeat prompt config/%s reads again; beating", name)
            self._unreadable = False
        self.task = asyncio.create_task(self._beat(scheduled_text(now, prompt)))
        self.task.add_done_callback(lambda _: self.on_done())
        return "started"

    async def _beat(self, text: str) -> None:
        agent = self.agent
        try:
            done = await agent.run_turn(
                HEARTBEAT_SESSION,
                text,
                slot=agent.config.slots.background,
                priority=Priority.HEARTBEAT,
                kind="heartbeat",
            )
            self.skipped = None
            u = done.usage
            log.info(
                "heartbeat session=%s turn=%d epoch=%d slot=%d cache_n=%s prompt_n=%s ms=%.0f",
                done.session,
                done.turn,
                done.epoch,
                done.slot,
                u.cache_n if u else "-",
                u.prompt_n if u else "-",
                done.elapsed_ms,
            )
            # A standing session: compacted like any other when it gets deep.
            if done.compact_due:
                await agent.compact_if_due(HEARTBEAT_SESSION)
        except BudgetRefusedError as exc:
            # The gate logged it (once a day per reason) and wrote the telemetry line;
            # nothing was written to the session.
            log.debug("heartbeat skipped: %s", exc.reason)
            self.skipped = exc.reason
        except TetherError as exc:
            log.warning("heartbeat failed: %s", exc)
