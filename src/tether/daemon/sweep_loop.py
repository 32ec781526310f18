"""The daily sweep inside ``tether serve``: it runs by itself.

Every ``TICK_S`` (and once at start, which catches up after downtime) the loop asks the
runner to sweep every enabled owner's completed local days that ended at least
``[sweep] settle_s`` ago: at most three missed days an owner per run, oldest first, the
cursor going one day at a time. The run happens in a worker thread (the store and the
producer are synchronous); its model calls come back to the event loop and wait for the
background slot behind every other kind of background work (``Priority.SWEEP``), and
through ``[budget.sweep]``. Closed by default: a closed or killed sweep writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta

import anyio.from_thread
import anyio.to_thread

from tether.agent.metered import MeteredLlm
from tether.core.timing.scheduling import Priority
from tether.daemon.compose import Runtime, sweep_runner
from tether.errors import TetherError
from tether.extract.calls import CallLog
from tether.sweep import owners as sweep_owners
from tether.sweep.runner import RunReport

log = logging.getLogger("tether.sweep")
TICK_S = 300.0


class SweepLoop:
    def __init__(self, runtime: Runtime, *, tick_s: float = TICK_S) -> None:
        self.runtime = runtime
        self.tick_s = tick_s
        agent = runtime.agent
        self.llm = MeteredLlm(
            runtime.llm,
            agent.meter,
            "sweep",
            priority=Priority.SWEEP,
            calls=CallLog(runtime.home, "sweep", now=agent.clock.now),
        )
        self._task: asyncio.Task[None] | None = None

    @property
    def open(self) -> bool:
        sweep = self.runtime.config.sweep
        return sweep.enabled and not sweep.kill_switch

    async def tick(self) -> RunReport | None:
        """One run now (None when the sweep is closed: nothing is opened or written)."""
        if not self.open:
            return None
        now = self.runtime.agent.clock.now()
        return await anyio.to_thread.run_sync(self._run, now)

    def _run(self, now: datetime) -> RunReport:
        rt = self.runtime
        call = self.llm.blocking(anyio.from_thread.run)
        settle = timedelta(seconds=rt.config.sweep.settle_s)
        with sweep_runner(rt.home, rt.config, main=rt.store, call=call, llm=self.llm) as runner:
            sweep_owners.ensure_default(runner.store, now)
            report = runner.run(now, settle=settle)
        t = report.totals()
        if t["owners"]:
            log.info(
                "sweep run: owners=%d days_complete=%d candidates=%d writes=%d",
                t["owners"],
                t["days_complete"],
                t["candidates"],
                t["writes"],
            )
        return report

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick()
            except (TetherError, OSError) as exc:
                log.warning("sweep run failed: %s; retried at the next tick", exc)
            await asyncio.sleep(self.tick_s)

    def start(self) -> None:
        if self._task is None and self.open:
            self._task = asyncio.create_task(self._loop(), name="tether-sweep")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
