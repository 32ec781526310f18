"""One turn: User in, the tool loop on the session's own slot, Assistant and Usage out.

Every record is appended (durably) as it happens, so a crash at any point leaves a valid
log: at worst a turn with no answer, which the next open closes as ``interrupted``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time as _time
from collections.abc import Callable, Sequence
from pathlib import Path

from tether.agent.budget import BudgetGate, BudgetRefusedError, Reservation
from tether.agent.compaction import CompactionDone, CompactionFailedError, Compactor
from tether.agent.locks import BusySet, InFlight, SlotGates
from tether.agent.metered import Meter
from tether.agent.outcomes import (
    MessageTooLargeError,
    TurnDone,
    TurnFailedError,
    error_kind,
    read_prompt,
)
from tether.broker import Broker
from tether.config import Config
from tether.core.context import replay
from tether.core.context.compaction_rules import should_compact
from tether.core.context.memory_block import BlockFact, build_block
from tether.core.context.replay import fresh_tokens
from tether.core.spend.budget_rules import Bound, prompt_tokens
from tether.core.timing.scheduling import Priority
from tether.errors import (
    LlmError,
    TetherError,
)
from tether.faults import crash_point, pause_point
from tether.memory.identity import Identity
from tether.memory.indexer import index_home
from tether.ports import Clock, Llm, MemoryStore
from tether.records import (
    Assistant,
    Baseline,
    ChatMessage,
    CompletionRequest,
    LogRecord,
    SpendKind,
    ToolCall,
    ToolResult,
    TurnError,
    Usage,
    User,
)
from tether.sessions import Session, list_sessions
from tether.tools import schemas
from tether.tools.box import ToolBox, ToolContext

#: What callers import from here (the turn's outcomes live in ``agent.outcomes``).
__all__ = [
    "Agent",
    "MessageTooLargeError",
    "TurnDone",
    "TurnFailedError",
    "read_prompt",
]
log = logging.getLogger("tether.daemon")
#: A first call weighed before the busy hold: its reservation, and the session or the
#: fresh baseline it was weighed on.
_Weighed = tuple[Reservation, Session | None, Baseline | None] | None


class _Retry(Exception):
    """The turn's message was refused as context-full in an epoch with earlier turns."""


_CLOSED = "turn session=%s closed as interrupted (its process died; runbook: turn-interrupted)"


async def _append(session: Session, *records: LogRecord) -> None:
    """Append durably (lock, write, fsync) off the event loop."""
    await asyncio.to_thread(session.append, *records)


class Agent:
    """Runs turns for any session of a home. Owns the busy set and the slot gates."""

    def __init__(
        self,
        *,
        home: Path,
        config: Config,
        store: MemoryStore,
        llm: Llm,
        tools: ToolBox,
        clock: Clock,
        budget: BudgetGate | None = None,
        n_ctx: int | None = None,
        facts: Callable[[], Sequence[BlockFact]] | None = None,
        indexed: Callable[[], object] | None = None,
    ) -> None:
        self.home = home
        #: Called after each index pass of a turn's rows (on the worker thread that ran
        #: it): the daemon's vector indexer queues its pass there.
        self.indexed = indexed
        #: The daily sweep's active facts for each new baseline's memory block.
        self.facts = facts
        self.config = config
        #: The context turns and compaction plan with: ``[expect] n_ctx``, or the
        #: model's trained context when smaller (``tether.llm.gguf.effective_n_ctx``).
        self.n_ctx = config.expect.n_ctx if n_ctx is None else n_ctx
        self.store = store
        self.llm = llm
        self.tools = tools
        self.clock = clock
        #: The spend gate (``[budget]``); None runs every call ungated (tests, tools).
        self.budget = budget
        self.broker = Broker(config.tools)
        self.busy = BusySet(home / "sessions")
        self.gates = SlotGates()
        #: Every model call of the runtime goes through it (``agent.metered``).
        self.meter = Meter(budget, self.gates, config.llm.max_tokens)
        #: Background work on a session's log (tool summaries) that compaction waits for.
        self.inflight = InFlight()
        #: Sessions whose index pass failed after their turn (a full disk): every later
        #: pass takes them in too until one succeeds.
        self._behind: set[str] = set()
        #: Called with the session after every turn, in the busy hold (the daemon's
        #: scheduler queues tool-output summaries here).
        self.after_turn: list[Callable[[Session], None]] = []
        self.compactor = Compactor(
            config=config,
            llm=llm,
            meter=self.meter,
            clock=clock,
            new_baseline=self.new_baseline,
            prompt=lambda: read_prompt(home, "compact.md"),
            inflight=self.inflight,
        )

    def new_baseline(self, sid: str | None = None) -> Baseline:
        """system.md + the memory block as identity stands now + the schemas of the tools
        granted to session ``sid`` (a scheduled session may have its own)."""
        system = read_prompt(self.home, "system.md")
        entries = Identity(self.home, self.store).entries()
        learned = self.facts() if self.facts is not None else ()
        block = build_block(entries, self.config.memory.block_tokens, learned)
        tools = schemas.schemas(self.broker.offered(sid))
        return Baseline(system=system, memory=block, tools=tools)

    async def run_turn(
        self,
        sid: str,
        text: str,
        *,
        speaker: str | None = None,
        slot: int | None = None,
        priority: Priority = Priority.LIVE,
        kind: SpendKind = "live",
    ) -> TurnDone:
        """Wait until the session is free, then run one turn on it.

        A session due for compaction (or left mid-compaction by a crash) is compacted
        first. A request refused as context-full compacts and retries the message once in
        the new epoch; a second refusal ends the turn ``session_full``. ``priority``
        places its requests in the slot gate's queue (scheduled work passes its own), and
        ``kind`` says whose budget its model calls spend: a first call over ``[budget]``
        raises BudgetRefusedError before anything is written (a new session is not even
        created); a later step's refusal ends the turn with ``TurnError{kind: "budget"}``.
        """
        weighed: _Weighed = None
        gated = self.budget is not None and self.budget.gated(kind)
        if gated and not await asyncio.to_thread(Session.exists, self.home, sid):
            # Weighed before the busy hold makes the session's folder: a refused
            # scheduled run leaves nothing behind.
            weighed = await asyncio.to_thread(self._weigh, sid, text, kind)
        async with self.busy.hold(sid):
            # File and SQLite work runs in a worker thread: a scheduled turn's fsyncs and
            # indexing must not hold the event loop while a live turn waits on it.
            session, first = await asyncio.to_thread(
                self._open_for_turn, sid, slot, text, kind, weighed
            )
            try:
                try:
                    await asyncio.to_thread(self._close_interrupted, session)
                    await self._compact_if_due(session)
                except BaseException:
                    self.meter.settle(first, None)  # the call is never made
                    raise
                try:
                    done = await self._turn(
                        session, text, speaker, priority, kind=kind, first=first
                    )
                except _Retry:
                    # Results this epoch logged get their summaries queued (and waited
                    # for) before it closes.
                    self._after_turn(session)
                    try:
                        await self.compactor.compact(session)
                    except CompactionFailedError as failed:
                        raise TurnFailedError(session.id, "session_full", failed) from failed
                    # Marked a retry: the same turn, counted and indexed once.
                    done = await self._turn(session, text, speaker, priority, retry=True, kind=kind)
                return dataclasses.replace(done, compact_due=self.due(session))
            finally:
                self._after_turn(session)
                await asyncio.to_thread(self._index, session.id)

    def _open_for(
        self,
        sid: str,
        text: str,
        slot: int | None,
        fresh: Baseline | None = None,
        opened: Session | None = None,
    ) -> Session:
        """Open (or create, on ``fresh`` or a new baseline) the session for ``text``,
        refusing first, before anything is logged or created, a message that cannot fit
        even a fresh epoch (by the documented token estimate; the server has the last
        word). ``opened``: the session as already read under the busy hold."""
        if opened is not None:
            session: Session | None = opened
        elif Session.exists(self.home, sid):
            session = Session.open(self.home, sid)
        else:
            session = None
        if session is not None:
            baseline = session.baseline
        else:
            baseline = fresh if fresh is not None else self.new_baseline(sid)
        needed = fresh_tokens(baseline, text)
        base = fresh_tokens(baseline, "")
        n_ctx = self.n_ctx
        # A baseline over the limit by the estimate alone is left to the server to judge
        # (the estimate may be above a real tokenizer's count); a message is refused when
        # it is over by itself, or over together with a baseline that fits.
        if needed - base >= n_ctx or base < n_ctx <= needed:
            raise MessageTooLargeError(len(text.encode()), needed, n_ctx)
        if session is not None:
            return session
        return Session.create(
            self.home,
            sid,
            baseline=baseline,
            slot=self.config.slots.main if slot is None else slot,
            time=self.clock.now(),
        )

    def _weigh(
        self, sid: str, text: str, kind: SpendKind
    ) -> tuple[Reservation, Session | None, Baseline | None]:
        """Reserve the first call of a gated turn on the session as it stands (or, for a
        session not made yet, on a fresh baseline) plus the new message."""
        assert self.budget is not None
        session = Session.open(self.home, sid) if Session.exists(self.home, sid) else None
        baseline = None
        if session is not None:
            messages, tools = session.messages(), session.baseline.tools
        else:
            baseline = self.new_baseline(sid)
            messages, tools = replay.messages(baseline, None, ()), baseline.tools
        messages.append(ChatMessage(role="user", content=text))
        bound = Bound(prompt_tokens(messages, tools), self.config.llm.max_tokens)
        return self.budget.reserve(kind, sid, bound), session, baseline

    def _open_for_turn(
        self, sid: str, slot: int | None, text: str, kind: SpendKind, weighed: _Weighed
    ) -> tuple[Session, Reservation | None]:
        """The session, and the first call's reservation when ``kind`` is gated (weighed
        before the busy hold for a session not made yet; the session may have been made
        meanwhile, which ``_open_for`` sees)."""
        if self.budget is None or not self.budget.gated(kind):
            return self._open_for(sid, text, slot), None
        # Weighed under the hold, the session it was weighed on is current: not read again.
        first, opened, baseline = weighed or self._weigh(sid, text, kind)
        try:
            return self._open_for(sid, text, slot, baseline, opened), first
        except BaseException:
            self.meter.settle(first, None)
            raise

    def _close_interrupted(self, session: Session) -> None:
        if session.close_interrupted(self.clock.now()):
            log.warning(_CLOSED, session.id)

    def close_interrupted_all(self) -> list[str]:
        """At daemon start: close every session's turn a killed process left open. A
        session busy in another process (an in-process chat) is skipped: it is live."""
        closed = []
        for sid in list_sessions(self.home):
            try:
                if not Session.may_have_open_turn(self.home, sid):
                    continue  # most sessions: their log's tail says the turn ended
                with self.busy.try_hold(sid) as held:
                    if not held or not Session.exists(self.home, sid):
                        continue
                    if Session.open(self.home, sid).close_interrupted(self.clock.now()):
                        closed.append(sid)
            except TetherError as exc:
                log.warning("session=%s not checked for an interrupted turn: %s", sid, exc)
        for sid in closed:
            log.warning(_CLOSED, sid)
        if closed:
            self._index_many(closed)
        return closed

    def _after_turn(self, session: Session) -> None:
        for hook in self.after_turn:
            hook(session)

    def _index(self, sid: str) -> None:
        """Make the turn's records findable by recall now (one session: cheap)."""
        pause_point("turn-before-index")
        self._index_many([sid])

    def _index_many(self, sids: list[str]) -> None:
        """Index ``sids`` now. The log append is a turn's commit point: an index pass that
        fails (a full disk, a malformed store) is a warning, never the turn's outcome,
        and the next pass catches up from the index cursors (runbook: index-behind)."""
        wanted = sorted({*sids, *self._behind})
        try:
            report = index_home(self.home, self.store, only=wanted)
        except (TetherError, OSError) as exc:
            self._behind.update(wanted)  # taken in again by the next turn's pass
            log.warning(
                "index sessions=%s failed; recall catches up at the next pass "
                "(runbook: index-behind): %s",
                ",".join(wanted),
                exc,
            )
            return
        self._behind.clear()
        for session, error in report.errors:
            log.warning("index session=%s skipped: %s", session, error)
        if self.indexed is not None:
            self.indexed()

    def due(self, session: Session) -> bool:
        return session.ended or should_compact(
            session.last_usage(),
            n_ctx=self.n_ctx,
            threshold=self.config.compact.threshold,
        )

    async def _compact_if_due(self, session: Session) -> CompactionDone | None:
        if not self.due(session):
            return None
        return await self.compactor.compact(session)

    async def compact_if_due(self, sid: str) -> CompactionDone | None:
        """After a turn: compact the session if its depth reached the threshold."""
        async with self.busy.hold(sid):
            session = await asyncio.to_thread(Session.open, self.home, sid)
            return await self._compact_if_due(session)

    async def compact_now(self, sid: str) -> CompactionDone:
        """The owner's /compact: compact whatever the depth (waits for a turn in flight)."""
        async with self.busy.hold(sid):
            session = await asyncio.to_thread(Session.open, self.home, sid)
            return await self.compactor.compact(session)

    async def _turn(
        self,
        session: Session,
        text: str,
        speaker: str | None,
        priority: Priority,
        *,
        retry: bool = False,
        kind: SpendKind = "live",
        first: Reservation | None = None,
    ) -> TurnDone:
        started = _time.perf_counter()
        # A refusal compacts and retries once when the epoch holds something to compact
        # away: earlier turns, or this turn's tool results. In a fresh epoch it cannot help.
        earlier = any(isinstance(r, User) for r in session.records)
        user = User(time=self.clock.now(), text=text, speaker=speaker, retry=retry)
        await _append(session, user)
        crash_point("turn-after-user")
        usage: Usage | None = None
        for step in range(self.config.tools.step_limit):
            request = CompletionRequest(
                messages=tuple(session.messages()),
                tools=session.baseline.tools,
                slot=session.slot,
                max_tokens=self.config.llm.max_tokens,
            )
            try:
                completion = await self.meter.call(
                    self.llm,
                    request,
                    kind=kind,
                    session=session.id,
                    priority=priority,
                    reserved=first if step == 0 else None,
                )
            except BudgetRefusedError as exc:  # a later step or a retry (the first is weighed)
                await _append(session, TurnError(time=self.clock.now(), kind="budget"))
                raise TurnFailedError(session.id, "budget", exc) from exc
            except asyncio.CancelledError:
                # The daemon is stopping mid-turn: say so in the log, then let it stop.
                session.append(
                    TurnError(time=self.clock.now(), kind="interrupted")
                )  # no await: cancelled
                raise
            except LlmError as exc:
                kind_ = error_kind(exc)
                await _append(session, TurnError(time=self.clock.now(), kind=kind_))
                if kind_ == "session_full" and not retry and (earlier or step > 0):
                    raise _Retry from exc
                raise TurnFailedError(session.id, kind_, exc) from exc
            now = self.clock.now()
            usage = Usage(
                time=now,
                cache_n=completion.cache_n,
                prompt_n=completion.prompt_n,
                predicted_n=completion.predicted_n,
            )
            if not completion.tool_calls:
                await _append(session, Assistant(time=now, text=completion.content), usage)
                return TurnDone(
                    session=session.id,
                    turn=session.turns(),
                    epoch=session.epoch,
                    slot=session.slot,
                    reply=completion.content,
                    untrusted=session.untrusted(),
                    usage=usage,
                    elapsed_ms=(_time.perf_counter() - started) * 1000,
                )
            lead = [Assistant(time=now, text=completion.content)] if completion.content else []
            calls = [
                ToolCall(time=now, id=c.id, name=c.name, args=c.args) for c in completion.tool_calls
            ]
            # The calls are durable before any of them runs.
            await _append(session, *lead, *calls, usage)
            crash_point("turn-after-tool-calls")
            for call in calls:
                await self._run_tool(session, call)
        await _append(session, TurnError(time=self.clock.now(), kind="tool_step_limit"))
        raise TurnFailedError(
            session.id,
            "tool_step_limit",
            TetherError(
                f"the model called tools {self.config.tools.step_limit} times "
                "without answering ([tools] step_limit)"
            ),
        )

    async def _run_tool(self, session: Session, call: ToolCall) -> None:
        untrusted = session.untrusted()
        refusal = self.broker.authorise(
            call.name, session=session.id, untrusted=untrusted, known=ToolBox.known()
        )
        if refusal is not None:
            result = ToolResult(
                time=self.clock.now(),
                tool_call_id=call.id,
                content=refusal.message,
                class_="broker",
                untrusted=False,
            )
        else:
            ctx = ToolContext(
                session=session.id,
                untrusted=untrusted,
                time=self.clock.now(),
                owner_urls=session.owner_urls(),
            )
            outcome = await self.tools.run(call.name, call.args, ctx)
            result = ToolResult(
                time=self.clock.now(),
                tool_call_id=call.id,
                content=outcome.content,
                class_=outcome.class_,
                untrusted=outcome.untrusted,
            )
        await _append(session, result)
