"""The metered model call, written once.

Every model call tether makes (a turn's steps, a compaction summary, a tool-output
summary, the checkpoint harvest's and the sweep's extraction calls) goes through
``Meter.call``, which does the same four things in the same order for all of them:

1. **reserve**: when ``[budget]`` records the call's kind, its bound is reserved
   (``BudgetGate.reserve``, off the event loop); a refusal raises ``BudgetRefusedError``
   and nothing is sent. A caller that reserved already (a turn's first call, weighed
   before its session is made) passes its reservation instead.
2. **gate**: the call waits for its slot's gate (``SlotGates``) at the caller's priority.
3. **call** the backend.
4. **settle**, in ``finally``: what the call used when it came back, nothing when it
   failed, timed out or was cancelled (so a reservation is never left open by a call that
   ended); and, for an extraction call, a line of the call log (``extract.calls``) that
   ``tether usage`` counts (ok or failed with its reason; a cancelled call is no line).

What a refusal or a failure means stays the caller's: a turn logs it and ends, compaction
falls back to the owner's own words, a tool-output summary is retried after the next
turn, the harvest and the sweep name it in their outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from tether.agent.budget import BudgetGate, Reservation
from tether.agent.locks import PriorityOf, SlotGates
from tether.core.timing.scheduling import Priority
from tether.extract.calls import CallLog
from tether.ports import Llm
from tether.records import Completion, CompletionRequest, SpendKind

#: A synchronous model call (the sweep's producer runs in a worker thread).
Call = Callable[[CompletionRequest], Completion]
#: Carries a coroutine to the event loop from a worker thread and waits for it (a
#: blocking portal's ``call``, ``anyio.from_thread.run``).
Run = Callable[[Callable[[], Coroutine[Any, Any, Completion]]], Completion]


@dataclass(frozen=True)
class Meter:
    """What every model call of a process is metered by: the budget gate (None: no
    ``[budget]``, as in a sweep worker with no home), the slot gates (None: nothing else
    shares the slots, as in a one-off ``tether sweep run``), and the reply bound of a
    request that sets none (``[llm] max_tokens``)."""

    budget: BudgetGate | None
    gates: SlotGates | None
    default_max_tokens: int

    def gated(self, kind: SpendKind) -> bool:
        """Whether the ledger records the calls of ``kind``."""
        return self.budget is not None and self.budget.gated(kind)

    async def reserve(
        self, kind: SpendKind, session: str, request: CompletionRequest
    ) -> Reservation | None:
        """Reserve ``request``'s bound, or raise BudgetRefusedError; None when the
        ledger does not record ``kind`` (nothing to settle)."""
        budget = self.budget
        if budget is None or not budget.gated(kind):
            return None
        bound = budget.bound(request, self.default_max_tokens)
        return await asyncio.to_thread(budget.reserve, kind, session, bound)

    def settle(self, reservation: Reservation | None, completion: Completion | None) -> None:
        """Count what a reserved call used (``completion`` None: nothing). No I/O: the
        gate keeps it for its next write, so this is safe in a cancelled task."""
        if reservation is not None and self.budget is not None:
            self.budget.settle(reservation, completion)

    async def call(
        self,
        llm: Llm,
        request: CompletionRequest,
        *,
        kind: SpendKind,
        session: str,
        priority: PriorityOf = Priority.LIVE,
        reserved: Reservation | None = None,
        calls: CallLog | None = None,
    ) -> Completion:
        """One metered call of ``kind`` for ``session`` on ``request.slot``: reserve (or
        take ``reserved``), wait for the slot at ``priority``, call, settle in
        ``finally``, and write a call-log line to ``calls`` when given."""
        reservation = (
            reserved if reserved is not None else await self.reserve(kind, session, request)
        )
        completion: Completion | None = None
        failure: Exception | None = None
        try:
            async with self._hold(request.slot, priority):
                completion = await llm.complete(request)
            return completion
        except Exception as exc:
            failure = exc
            raise
        finally:
            self.settle(reservation, completion)
            if calls is not None and (completion is not None or failure is not None):
                gated = reservation is not None and reservation.id is not None
                calls.count(completion, failure, gated=gated)

    @contextlib.asynccontextmanager
    async def _hold(self, slot: int | None, priority: PriorityOf) -> AsyncIterator[None]:
        if self.gates is None or slot is None:  # a request on no slot waits for none
            yield
            return
        async with self.gates.hold(slot, priority):
            yield


class MeteredLlm:
    """An ``Llm`` whose every call is one metered call of ``kind`` (the harvest's or the
    sweep's extraction calls): what the extractor is handed. ``calls``: the call log its
    calls are counted in (None: a process with no home to write it in)."""

    def __init__(
        self,
        llm: Llm,
        meter: Meter,
        kind: SpendKind,
        *,
        priority: PriorityOf,
        calls: CallLog | None = None,
        session: str | None = None,
    ) -> None:
        self.llm = llm
        self.meter = meter
        self.kind: SpendKind = kind
        self.priority = priority
        self.calls = calls
        self.session = session or kind

    async def complete(self, request: CompletionRequest) -> Completion:
        return await self.meter.call(
            self.llm,
            request,
            kind=self.kind,
            session=self.session,
            priority=self.priority,
            calls=self.calls,
        )

    def malformed(self) -> None:
        """The last call's reply was not a page (the extractor says so): a failed line."""
        if self.calls is not None:
            self.calls.malformed(gated=self.meter.gated(self.kind))

    def blocking(self, run: Run) -> Call:
        """This model as a synchronous call for the sweep's producer, ``run`` carrying
        each call to the event loop."""

        def call(request: CompletionRequest) -> Completion:
            return run(lambda: self.complete(request))

        return call

    async def aclose(self) -> None:
        """The owner of the wrapped backend closes it."""
