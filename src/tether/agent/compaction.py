"""Compaction: bank the raw window, summarise it on the background slot, start the next
epoch with the summary and checkpoint links as its carry.

Order is the durability contract: the window is on disk (scanned, content-addressed)
before any model sees it; ``EpochEnd`` is durable before the new epoch's files exist; the
new log appears only after its baseline. A crash anywhere reopens to a consistent session:
before ``EpochEnd`` it is still the old epoch (and banking again is a no-op); after it, the
next open finishes the new epoch from the ``EpochEnd`` summary.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from tether.agent.budget import BudgetRefusedError
from tether.agent.locks import InFlight
from tether.agent.metered import Meter
from tether.checkpoint.bank import BankReport, bank_window
from tether.config import Config
from tether.core.context.compaction_rules import cap, carry_text, fallback_summary, neutralise
from tether.core.timing.scheduling import Priority
from tether.errors import LlmError, TetherError
from tether.faults import crash_point
from tether.ports import Clock, Llm
from tether.records import Baseline, ChatMessage, CompletionRequest, EpochEnd, SessionStart
from tether.scan.allow import home_allow
from tether.scan.secrets import redact
from tether.sessions import Session

log = logging.getLogger("tether.daemon")


class CompactionFailedError(TetherError):
    """Neither the model's summary nor the fallback could be made; the epoch is intact."""

    runbook = "session-compact-failed"

    def __init__(self, session: str, epoch: int, cause: str) -> None:
        super().__init__(
            f"compaction of session {session!r} failed: {cause}; the session stays on epoch {epoch}"
        )
        self.session = session
        self.epoch = epoch


@dataclass(frozen=True)
class CompactionDone:
    session: str
    from_epoch: int
    to_epoch: int
    source: Literal["model", "fallback", "recovered"]
    summary_chars: int
    bank: BankReport | None


class Compactor:
    def __init__(
        self,
        *,
        config: Config,
        llm: Llm,
        meter: Meter,
        clock: Clock,
        new_baseline: Callable[[str], Baseline],
        prompt: Callable[[], str],
        inflight: InFlight | None = None,
    ) -> None:
        self.config = config
        self.meter = meter
        self.inflight = inflight or InFlight()
        self.llm = llm
        self.clock = clock
        self.new_baseline = new_baseline
        self.prompt = prompt

    def finish_interrupted(self, session: Session) -> CompactionDone | None:
        """A log that ends with EpochEnd but has no next epoch (a crash mid-compaction):
        write the next epoch now, carrying the summary already in EpochEnd."""
        if not session.ended:
            return None
        end = session.records[-1]
        assert isinstance(end, EpochEnd)
        old = session.epoch
        session.end_epoch(
            summary=end.summary, baseline=self.new_baseline(session.id), time=self.clock.now()
        )
        log.info(
            "compaction session=%s epoch=%d->%d recovered after a crash",
            session.id,
            old,
            session.epoch,
        )
        return CompactionDone(session.id, old, session.epoch, "recovered", len(end.summary), None)

    async def compact(self, session: Session) -> CompactionDone:
        """Compact ``session`` (the caller holds it busy)."""
        recovered = self.finish_interrupted(session)
        if recovered is not None:
            return recovered
        # Tool-output summaries of this epoch append or fail before it closes.
        await self.inflight.settled(session.id)
        window = [r for r in session.records if not isinstance(r, SessionStart)]
        home = session.dir.parent.parent
        old = session.epoch
        # Bank first: the raw window is durable before anything summarises it.
        report = bank_window(
            home,
            session.id,
            window,
            epoch=old,
            time=self.clock.now(),
            allow=home_allow(home),
        )
        crash_point("compact-after-bank")
        summary, source = await self._summary(session)
        if not summary:
            summary = fallback_summary(window, self.config.compact.summary_chars)
            source = "fallback"
        if not summary:
            raise CompactionFailedError(
                session.id,
                old,
                "the summary call failed and the epoch has no owner text to fall back on",
            )
        # The model saw the raw window; its summary could repeat a secret from it.
        allow = home_allow(home)
        summary = redact(summary, allow=allow).text
        carry = carry_text(summary, [report.link] if report.link else [])
        baseline = self.new_baseline(session.id)
        session.end_epoch(summary=carry, baseline=baseline, time=self.clock.now())
        log.info(
            "compaction session=%s epoch=%d->%d summary=%s chars=%d segment=%s",
            session.id,
            old,
            session.epoch,
            source,
            len(summary),
            report.code,
        )
        return CompactionDone(session.id, old, session.epoch, source, len(summary), report)

    async def _summary(self, session: Session) -> tuple[str, Literal["model", "fallback"]]:
        """The model's summary on the background slot, no tools; "" when it failed."""
        request = CompletionRequest(
            messages=(*session.messages(), ChatMessage(role="user", content=self.prompt())),
            tools=(),
            slot=self.config.slots.background,
            max_tokens=max(256, self.config.compact.summary_chars // 2),
        )
        try:
            completion = await self.meter.call(
                self.llm,
                request,
                kind="compaction",
                session=session.id,
                priority=Priority.COMPACTION,
            )
        except BudgetRefusedError as exc:
            # Over budget the session still compacts (from the owner's own words)
            # rather than growing until it overflows.
            log.warning(
                "compaction session=%s summary call skipped (%s); using the fallback",
                session.id,
                exc.reason,
            )
            return "", "fallback"
        except LlmError as exc:
            log.warning(
                "compaction session=%s summary call failed (%s); using the fallback",
                session.id,
                exc,
            )
            return "", "fallback"
        return cap(neutralise(completion.content), self.config.compact.summary_chars), "model"
