"""Tool-output summaries: an index-only ``ToolSummary`` for each result of a tool that opts
in (``[compact] summarise``), so ``recall`` can find what a fetched page said.

After a turn (the agent's ``after_turn`` hook, inside the busy hold), results of opted-in
tools with no ToolSummary yet are queued. Each runs a no-tools completion on the
background slot at the lowest priority: ``config/summarise.md`` plus the result, capped
to ``[tools] result_chars``. The reply is tag-neutralised, secret-redacted, capped to
``[compact] summary_chars`` and appended with the result's class and trust. The model
call does not hold the session busy (a live turn on it is never delayed); the append
takes the log's lock like any append. Compaction of the session waits for these (the
agent's ``InFlight``), and while it waits they are raised to its priority.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from tether.agent.budget import BudgetRefusedError
from tether.agent.locks import InFlight
from tether.agent.metered import Meter
from tether.agent.outcomes import read_prompt
from tether.config import Config
from tether.core.context.compaction_rules import cap, neutralise
from tether.core.timing.scheduling import Priority, pending_summaries
from tether.errors import TetherError
from tether.ports import Clock, Llm
from tether.records import ChatMessage, CompletionRequest, ToolCall, ToolResult, ToolSummary
from tether.scan.allow import home_allow
from tether.scan.secrets import redact
from tether.sessions import Session

PROMPT_FILE = "summarise.md"
log = logging.getLogger("tether.scheduler")


class ToolSummaries:
    def __init__(
        self,
        *,
        home: Path,
        config: Config,
        llm: Llm,
        meter: Meter,
        inflight: InFlight,
        clock: Clock,
    ) -> None:
        self.home = home
        self.meter = meter
        self.config = config
        self.llm = llm
        self.inflight = inflight
        self.clock = clock
        self._active: set[tuple[str, str]] = set()
        self.tasks: set[asyncio.Task[None]] = set()

    def after_turn(self, session: Session) -> None:
        """Queue a summary for each opted-in result of ``session`` that has none yet."""
        if not self.config.compact.summarise:
            return
        for call, result in pending_summaries(session.records, self.config.compact.summarise):
            key = (session.id, result.tool_call_id)
            if key in self._active:
                continue
            self._active.add(key)
            self.inflight.begin(session.id)
            task = asyncio.create_task(self._summarise(session.id, call, result))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def _priority(self, sid: str) -> Priority:
        return Priority.COMPACTION if self.inflight.urgent(sid) else Priority.TOOL_SUMMARY

    async def _summarise(self, sid: str, call: ToolCall, result: ToolResult) -> None:
        try:
            await self._run(sid, call, result)
        except BudgetRefusedError as exc:
            log.info(
                "summary session=%s call=%s skipped (%s); retried after the next turn",
                sid,
                result.tool_call_id,
                exc.reason,
            )
        except TetherError as exc:
            log.warning(
                "summary session=%s call=%s failed (%s); retried after the next turn",
                sid,
                result.tool_call_id,
                exc,
            )
        finally:
            self._active.discard((sid, result.tool_call_id))
            self.inflight.end(sid)

    async def _run(self, sid: str, call: ToolCall, result: ToolResult) -> None:
        prompt = read_prompt(self.home, PROMPT_FILE).rstrip()
        body = cap(result.content, self.config.tools.result_chars)
        background = self.config.slots.background
        request = CompletionRequest(
            messages=(ChatMessage(role="user", content=f"{prompt}\n\n{body}"),),
            tools=(),
            slot=background,
            max_tokens=max(64, self.config.compact.summary_chars // 2),
        )
        completion = await self.meter.call(
            self.llm,
            request,
            kind="tool_summary",
            session=sid,
            priority=lambda: self._priority(sid),
        )
        text = cap(neutralise(completion.content), self.config.compact.summary_chars)
        text = redact(text, allow=home_allow(self.home)).text
        if not text:
            log.warning("summary session=%s call=%s: the model gave no text", sid, call.id)
            return
        Session.open(self.home, sid).append(
            ToolSummary(
                time=self.clock.now(),
                call=call.name,
                tool_call_id=result.tool_call_id,
                content=text,
                class_=result.class_,
                untrusted=result.untrusted,
            )
        )
        log.info(
            "summary session=%s call=%s tool=%s chars=%d untrusted=%s",
            sid,
            result.tool_call_id,
            call.name,
            len(text),
            result.untrusted,
        )
