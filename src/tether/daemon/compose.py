"""Build a runtime from a home and its config. The only place the pieces are wired."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import anyio.from_thread
import httpx
import msgspec

from tether.agent.budget import TELEMETRY_FILE as BUDGET_TELEMETRY
from tether.agent.budget import BudgetGate
from tether.agent.metered import Meter, MeteredLlm
from tether.agent.turn import Agent
from tether.checkpoint.harvest import Harvested, Harvester
from tether.config import Config, SweepConfig, load_config
from tether.core.context.memory_block import BlockFact
from tether.core.timing.scheduling import Priority
from tether.daemon.app import App, FixedClock
from tether.daemon.harvest import HarvestQueue
from tether.daemon.recallable import CatchUp
from tether.daemon.vectors import VectorIndexer
from tether.errors import BadInputError, EmbeddedModelError, ExtraMissingError, TetherError
from tether.extract.calls import CallLog
from tether.extract.extractor import Extractor
from tether.llm.gguf import planned_n_ctx
from tether.llm.llama_server import LlamaServerClient
from tether.llm.openai_compat import OpenAiCompatClient
from tether.memory.facts import block_facts
from tether.ports import Clock, Llm, Producer, Store, SweepStore
from tether.records import Completion, CompletionRequest
from tether.scan.allow import home_allow
from tether.scheduler import Job, Scheduler
from tether.sweep import owners as sweep_owners
from tether.sweep.model import Call, ModelProducer
from tether.sweep.onboarding import OnboardingProducer
from tether.sweep.owners import home_zone
from tether.sweep.producer import StagingPacketReader
from tether.sweep.runner import Runner, RunReport, members
from tether.sweep.stage import FileStages, lease_for
from tether.sweep.telemetry import TELEMETRY_FILE, RunLog
from tether.tools.box import ToolBox


def build_llm(config: Config) -> Llm:
    cfg = config.llm
    if cfg.backend == "llama":
        return LlamaServerClient(cfg.url, timeout_s=cfg.timeout_s, model=cfg.model)
    if cfg.backend == "openai":
        return OpenAiCompatClient(cfg.url, timeout_s=cfg.timeout_s, model=cfg.model)
    if cfg.backend == "embedded":
        from tether.llm.embedded import EmbeddedLlm  # needs the extra tether[local]

        return EmbeddedLlm.from_config(config)
    raise BadInputError(f"unknown llm.backend {cfg.backend!r}")


def home_facts(sweep: SweepStore, home: Path) -> list[BlockFact]:
    """The home owner's active sweep facts for the memory block (none on any error: a
    baseline never fails on the sweep)."""
    try:
        return block_facts(sweep, sweep_owners.DEFAULT_OWNER, allow=home_allow(home))
    except TetherError:
        return []


def build_budget(
    home: Path, config: Config, store: Store, clock: Clock, sweep: SweepStore | None
) -> BudgetGate:
    """The spend gate of every model call the runtime makes (``[budget]``)."""
    return BudgetGate(
        config=config.budget,
        store=store,
        clock=clock,
        zone=ZoneInfo(home_zone(sweep)),
        telemetry=home / BUDGET_TELEMETRY,
    )


@dataclass
class Runtime:
    home: Path
    config: Config
    store: Store
    sweep: SweepStore  # a reader: what recall's fact mirror reads
    llm: Llm
    http: httpx.AsyncClient
    agent: Agent
    #: Where the store, sweep store, vectors, model and budget came from; it closes them.
    app: App
    #: Recall's vectors and their indexer (``[recall] vectors``); None: lexical recall.
    vectors: VectorIndexer | None = None

    async def aclose(self) -> None:
        try:
            await self.http.aclose()
        finally:
            if self.vectors is not None:
                self.vectors.stop()  # the pass running ends first; the app closes the index
            # the model's client, then the budget's settles, the vectors, the stores
            await self.app.aclose()


def build_runtime(
    home: Path,
    config: Config,
    *,
    clock: Clock | None = None,
    llm: Llm | None = None,
    app: App | None = None,
) -> Runtime:
    """The agent and what it runs on, from ``app`` (else an application of its own over
    ``home``, ``config``, ``clock`` and ``llm``); ``Runtime.aclose`` closes the app."""
    app = app if app is not None else App(home, config, clock=clock, llm=llm)
    try:
        store = app.store()
        sweep = app.sweep(migrate=False)
        model = app.llm()
        vectors = app.vectors()
        budget = app.budget()
    except BaseException:
        app.close()
        raise
    indexer = None if vectors is None else VectorIndexer(vectors)
    http = httpx.AsyncClient(headers={"user-agent": "tether"})
    tools = ToolBox(home, store, config, http, sweep=sweep, vectors=vectors)
    agent = Agent(
        home=home,
        config=config,
        store=store,
        llm=model,
        tools=tools,
        clock=app.clock,
        budget=budget,
        n_ctx=planned_n_ctx(config),
        facts=lambda: home_facts(sweep, home),
        indexed=None if indexer is None else indexer.poke,
    )
    return Runtime(
        home=home,
        config=config,
        store=store,
        sweep=sweep,
        llm=model,
        http=http,
        agent=agent,
        app=app,
        vectors=indexer,
    )


@contextlib.contextmanager
def sweep_runner(
    home: Path,
    config: Config,
    *,
    main: Store | None = None,
    call: Call | None = None,
    llm: Llm | None = None,
    clock: Clock | None = None,
    app: App | None = None,
) -> Iterator[Runner]:
    """The daily sweep's runner over the home's sweep store (opened, migrated, closed on
    the way out): as producer the home's staged packets, and with ``main`` (the store
    holding the day's rows), ``call`` and ``llm`` the model pass over each completed day
    (``sweep.model``) behind them; ``[sweep]`` and its cohort, the home's allow-list (read
    first: a broken allow file stops the run before any write), a claimant unique to this
    process, and a telemetry line per run in ``<home>/telemetry/sweep.jsonl``. The sweep
    store is ``app``'s (else an application's of its own, closed on the way out)."""
    allow = home_allow(home)
    claimant = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
    own = app is None
    app = App(home, config, clock=clock) if app is None else app
    try:
        store = app.sweep()
        producer: Producer = StagingPacketReader(home)
        onboarding = None
        if main is not None and call is not None and llm is not None:
            onboarding = OnboardingProducer(
                home=home,
                store=main,
                call=call,
                extractor=Extractor(llm, slot=config.slots.background),
                config=config.sweep,
                allow=allow,
            )
            ex = config.extract
            producer = ModelProducer(
                stages=FileStages(home),
                store=main,
                call=call,
                extractor=Extractor(
                    llm,
                    slot=config.slots.background,
                    form=ex.resolved_form(config.llm),
                    on_malformed=llm.malformed if isinstance(llm, MeteredLlm) else None,
                ),
                config=config.sweep,
                clock=(clock or app.clock).now,
                allow=allow,
                staged=producer,
                lease=lease_for(config.llm.timeout_s),
                mode=ex.resolved_mode(config.llm),
                form=ex.resolved_form(config.llm),
                chunk_chars=ex.resolved_chunk_chars(config.llm),
            )
        yield Runner(
            store,
            producer,
            config=config.sweep,
            cohort=members(config.sweep.cohort),
            claimant=claimant,
            allow=allow,
            telemetry=RunLog(home / TELEMETRY_FILE),
            onboarding=onboarding,
        )
    finally:
        if own:
            app.close()


def worker_runner(
    store: SweepStore,
    config: SweepConfig,
    lease: timedelta,
    claimant: str,
    producer: Producer | None = None,
) -> Runner:
    """A sweep worker's runner over one owner's store (``daemon.fleet``): days from their
    staged packets, and the rest from ``producer`` (none: ``sweep.worker.NotStaged``); the
    sweep open whatever ``[sweep] enabled`` says (running a worker is the choice; the
    kill switch still stops it), the day's receipts leased as long as its claim."""
    from tether.sweep.worker import NotStaged

    return Runner(
        store,
        producer or NotStaged(),
        config=msgspec.structs.replace(config, enabled=True),
        cohort=members(config.cohort),
        claimant=claimant,
        lease=lease,
    )


class AbsentLlm:
    """The model ``[llm]`` names cannot be loaded (the extra missing, no GGUF): every call
    raises why, so the sweep's extractive path makes the day's page (``[extract] mode``
    other than "model") and the stage says ``model_failed_model_absent``."""

    def __init__(self, error: TetherError) -> None:
        self.error = error

    async def complete(self, request: CompletionRequest) -> Completion:  # noqa: ARG002
        raise self.error

    async def aclose(self) -> None:
        return None


def sweep_llm(app: App) -> Llm:
    """The sweep's model (``app``'s); with ``[extract] mode`` other than "model", a model
    that cannot be loaded is an ``AbsentLlm``, not a refusal of the whole run."""
    config = app.config
    try:
        return app.llm()
    except (ExtraMissingError, EmbeddedModelError) as exc:
        if config.extract.resolved_mode(config.llm) == "model":
            raise
        return AbsentLlm(exc)


def run_sweep(
    home: Path,
    config: Config,
    now: datetime,
    owners: Sequence[str] | None = None,
    dates: Sequence[date] = (),
    *,
    llm: Llm | None = None,
) -> RunReport:
    """One ``tether sweep run``: when the sweep is open, the default owner is made and
    each owner asked for must exist (UnknownOwnerError otherwise); then the run, with the
    model pass over days no backend staged (``llm``, else the one ``[llm]`` names)."""
    sweep = config.sweep
    if not sweep.enabled or sweep.kill_switch:
        with sweep_runner(home, config) as runner:
            return runner.run(now, owners, dates)
    with App(home, config, clock=FixedClock(now)) as app:  # the run's time, all through
        model = llm if llm is not None else sweep_llm(app)
        main = app.store()
        app.sweep()  # migrated, once: the budget's zone and the runner read it
        with anyio.from_thread.start_blocking_portal() as portal:
            try:
                budget = app.budget()  # its settles written when the app closes
                # One process, nothing else on the slots: metered with no slot gate.
                metered = MeteredLlm(
                    model,
                    Meter(budget, None, config.llm.max_tokens),
                    "sweep",
                    priority=Priority.SWEEP,
                    calls=CallLog(home, "sweep", now=app.now),
                )
                call = metered.blocking(portal.call)
                with sweep_runner(
                    home, config, main=main, call=call, llm=metered, app=app
                ) as runner:
                    sweep_owners.ensure_default(runner.store, now)
                    for o in owners or ():
                        sweep_owners.get(runner.store, o)
                    return runner.run(now, owners, dates)
            finally:
                if llm is None:
                    portal.call(app.aclose_llm)


@contextlib.contextmanager
def harvest_queue(runtime: Runtime) -> Iterator[HarvestQueue]:
    """The checkpoint harvest of a running daemon: the shared extractor over the runtime's
    model on the background slot (behind its gate), facts into the sweep store (migrated,
    with the default owner), ``[checkpoint] auto_writeback`` re-read for every segment."""
    home = runtime.home
    sweep = runtime.app.sweep()  # migrated; the runtime's app closes it
    sweep_owners.ensure_default(sweep, runtime.agent.clock.now())
    slot = runtime.config.slots.background
    config = runtime.config
    counted = MeteredLlm(
        runtime.llm,
        runtime.agent.meter,
        "harvest",
        priority=Priority.TOOL_SUMMARY,
        calls=CallLog(home, "harvest", now=runtime.agent.clock.now),
    )
    extractor = Extractor(
        counted,
        slot=slot,
        max_tokens=config.llm.max_tokens,
        form=config.extract.resolved_form(config.llm),
        on_malformed=counted.malformed,
    )

    def writeback() -> bool | None:
        return load_config(home).checkpoint.auto_writeback

    harvester = Harvester(
        home,
        extractor,
        sweep,
        page_exists=lambda slug: runtime.store.get_page(slug) is not None,
        writeback=writeback,
        now=runtime.agent.clock.now,
        mode=config.extract.resolved_mode(config.llm),
        chunk_chars=config.extract.resolved_chunk_chars(config.llm),
    )
    catch_up = CatchUp(home, runtime.store, runtime.vectors, slot=config.slots.main)
    yield HarvestQueue(home, harvester, runtime.agent.clock, recallable=catch_up)


async def harvest_now(home: Path, config: Config, segment: str, *, lane: str) -> Harvested:
    """One segment's harvest in this process (``tether transcripts ingest --facts``): the
    configured model on the background slot, no daemon needed, its calls metered as the
    daemon's harvest's are (``[budget.harvest]``, the call log); never gated by
    ``auto_writeback`` when ``lane`` is ingest. With ``[extract] mode`` extractive, or no
    model to load (the extra missing, no GGUF), the extractive path alone, saying why."""
    ex = config.extract
    llm: Llm | None = None
    absent: str | None = None
    app = App(home, config)
    try:
        if ex.resolved_mode(config.llm) != "extractive":
            try:
                llm = app.llm()
            except (ExtraMissingError, EmbeddedModelError) as exc:
                absent = f"model_absent: {exc}"
        store = app.store()
        sweep = app.sweep()
        clock = app.clock
        sweep_owners.ensure_default(sweep, clock.now())
        slot = config.slots.background
        extractor = None
        budget = app.budget()  # its settles written when the app closes
        if llm is not None:
            counted = MeteredLlm(
                llm,
                Meter(budget, None, config.llm.max_tokens),
                "harvest",
                priority=Priority.TOOL_SUMMARY,
                calls=CallLog(home, "harvest", now=clock.now),
            )
            extractor = Extractor(
                counted,
                slot=slot,
                max_tokens=config.llm.max_tokens,
                form=ex.resolved_form(config.llm),
                on_malformed=counted.malformed,
            )
        harvester = Harvester(
            home,
            extractor,
            sweep,
            page_exists=lambda slug: store.get_page(slug) is not None,
            writeback=lambda: load_config(home).checkpoint.auto_writeback,
            now=clock.now,
            mode=ex.resolved_mode(config.llm),
            chunk_chars=ex.resolved_chunk_chars(config.llm),
            absent=absent,
        )
        return await harvester.harvest(segment, lane=lane)
    finally:
        # the model's client (when one was loaded), the budget's settles, the stores
        await app.aclose()


def build_scheduler(runtime: Runtime, jobs: Sequence[Job]) -> Scheduler:
    """The daemon's scheduler over a runtime (its agent, clock, gates and busy set). Every
    turn of the runtime, scheduled or not, queues its tool-output summaries."""
    scheduler = Scheduler(agent=runtime.agent, jobs=jobs)
    runtime.agent.after_turn.append(scheduler.summaries.after_turn)
    return scheduler
