"""The checkpoint harvest inside ``tether serve``: a FIFO of segments, the maintenance pass
over ``corpus/``, and the background slot's gate around every extraction call.

- ``HarvestQueue.schedule`` answers the hook's IPC (``POST /v1/harvest``) at once with a
  code (``scheduled``, ``skip_queue_full``, ``skip_not_found``, ``skip_bad_basename``,
  ``skip_no_session``, ``skip_shutting_down``, ``skip_already_queued``); the work happens
  after the reply, one segment at a time, at most ``CAP`` waiting.
- Each item gets ``ABORT_S``: past it the extraction is cancelled (``aborted``, retryable:
  the chunks done stay in the segment's progress file, and nothing half-written stands).
- The extractor's calls are metered (``agent.metered``, built in ``compose.harvest_queue``):
  ``[slots] background`` through the runtime's slot gates at the lowest background
  priority (a live turn or a compaction summary goes first), and ``[budget.harvest]``; a
  refusal is the harvest's outcome, and the maintenance pass retries the segment once the
  day's budget frees up.
- ``maintenance`` runs when serve starts and every ``MAINTENANCE_S``: receipts whose
  manifest publish failed are published, and every segment no receipt covers is queued
  (``lane`` maintenance) while there is room: a hook killed after its segment write, a
  daemon that was down, a harvest that failed all end here.
- ``recallable`` (``daemon.recallable.CatchUp``) runs before each segment's harvest and
  after each maintenance pass (so also when serve starts): banked windows into their
  sessions, indexed, embedded.
- Every outcome is a line of ``telemetry/heartbeat.jsonl`` (``event`` harvest); the first
  failure of each error name is logged on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from tether.checkpoint.bank import corpus_dir, ledger_path, parse_segment_link
from tether.checkpoint.harvest import Harvested, Harvester
from tether.checkpoint.telemetry import append_line
from tether.errors import InvalidIdError
from tether.ports import Clock

CAP = 8
ABORT_S = 60.0
MAINTENANCE_S = 300.0
log = logging.getLogger("tether.harvest")


class HarvestQueue:
    def __init__(
        self,
        home: Path,
        harvester: Harvester,
        clock: Clock,
        *,
        abort_s: float = ABORT_S,
        recallable: Callable[[Sequence[str]], object] | None = None,
    ) -> None:
        self.home = home
        #: ``daemon.recallable.CatchUp``: a window the hook could not put in its session,
        #: index or embed in time is, before its harvest and at each maintenance pass.
        self.recallable = recallable
        self.harvester = harvester
        self.clock = clock
        self.abort_s = abort_s
        self.items: deque[tuple[str, str]] = deque()
        self.queued: set[str] = set()
        self.running: str | None = None
        self.closing = False
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._logged: set[str] = set()

    def schedule(self, session: str, segment: str, lane: str = "harvest") -> str:
        if self.closing:
            return "skip_shutting_down"
        try:
            owner, hash24 = parse_segment_link(segment)
        except InvalidIdError:
            return "skip_bad_basename"
        name = f"{owner}.seg-{hash24}.txt"
        if owner != session or not ledger_path(self.home, owner).exists():
            return "skip_no_session"
        if not (corpus_dir(self.home) / name).is_file():
            return "skip_not_found"
        if name in self.queued or name == self.running:
            return "skip_already_queued"
        if len(self.items) >= CAP:
            return "skip_queue_full"
        self.items.append((name, lane))
        self.queued.add(name)
        self._wake.set()
        return "scheduled"

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._work(), name="harvest"),
            asyncio.create_task(self._maintain(), name="harvest-maintenance"),
        ]

    async def stop(self) -> None:
        self.closing = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def maintenance(self) -> int:
        """One pass: re-publish failed publishes, queue uncovered segments; how many."""
        self.harvester.republish()
        queued = 0
        for name in self.harvester.pending():
            session = name.split(".seg-", 1)[0]
            code = self.schedule(session, name, lane="maintenance")
            if code == "scheduled":
                queued += 1
            elif code == "skip_queue_full":
                break
        return queued

    async def _maintain(self) -> None:
        while not self.closing:
            try:
                self.maintenance()
            except Exception as exc:  # a pass that fails is tried again at the next one
                log.warning("harvest maintenance failed: %s", type(exc).__name__)
            if self.recallable is not None:  # it logs its own failures
                await asyncio.to_thread(self.recallable, ())
            await asyncio.sleep(MAINTENANCE_S)

    async def _work(self) -> None:
        while not self.closing:
            if not self.items:
                self._wake.clear()
                await self._wake.wait()
                continue
            name, lane = self.items.popleft()
            self.queued.discard(name)
            self.running = name
            try:
                await self.run_one(name, lane)
            finally:
                self.running = None

    async def run_one(self, name: str, lane: str) -> Harvested:
        if self.recallable is not None:  # it logs its own failures
            await asyncio.to_thread(self.recallable, [name.split(".seg-", 1)[0]])
        try:
            out = await asyncio.wait_for(self.harvester.harvest(name, lane=lane), self.abort_s)
        except TimeoutError:
            out = Harvested("aborted", name, lane)
        except Exception as exc:  # the error's name is the outcome; the sweep retries
            reason = type(exc).__name__.lower()
            code = getattr(exc, "reason", None)
            out = Harvested(f"{reason}:{code}" if isinstance(code, str) else reason, name, lane)
            out.error = type(exc).__name__
            if out.error not in self._logged:
                self._logged.add(out.error)
                log.warning("harvest %s failed: %s: %s", name, out.error, exc)
        self.record(out, self.clock.now())
        return out

    def record(self, out: Harvested, now: datetime) -> None:
        append_line(
            self.home,
            now,
            "harvest",
            session=out.segment.split(".seg-", 1)[0],
            segment=out.segment,
            lane=out.lane,
            outcome=out.outcome,
            inserted=out.inserted,
            duplicate=out.duplicate,
            links=out.links,
            chunks=out.chunks,
            error=out.error,
            path=out.path or None,
            cause=out.cause.split(":", 1)[0] if out.cause else None,
            model_calls=out.model_calls,
            model_failed=out.model_failed,
            extractive=out.extractive,
        )
