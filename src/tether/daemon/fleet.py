"""A sweep worker's composition (``tether sweep worker``): one pool of connections to the
shared PostgreSQL database, the stores of every owner schema found there on it, and a
runner per owner (``compose.worker_runner``); then ``sweep.worker.work``.

Everything is opened by the worker's application (``daemon.app.App`` over the worker's
config: ``App.pool``, ``App.owner_sweep``, ``App.owner_store``, ``App.llm``), each once,
and closed by it when the command ends (the stores first, then the pool).

Connections: the worker's stores share one ``PgPool`` of at most ``WORKER_POOL``
connections (each transaction sets its owner's ``search_path`` itself, ``postgres.conn``),
so a worker holds as many connections with 40 owners as with one, and a database whose
``max_connections`` is 100 serves many more workers than owners-times-workers allowed.
The pool's connections say who they are (``application_name``: ``tether-worker-<pid>``).

Days no backend staged get the home's model pass (``sweep.model.ModelProducer``) over the
owner's main store, with the model from the worker's config (``[llm]``, on the
background slot) and its stage in the store (``sweep_model_stage``), so a worker needs
nothing but the URL and an endpoint. It has no home, so no allow-list: every secret the
scanner finds is redacted. Each model call is metered (``agent.metered``) into the owner's
own spend ledger in its schema, as its home's sweep would be: ``tether usage`` of a home on
that schema counts the worker's calls (each settled as it ends: no scheduler here writes
a kept settle later), and ``[budget]`` of the worker's config applies to them (no caps
unless it sets some); each day's ``[sweep] max_model_tokens`` /
``max_model_cost_usd`` ceiling applies too. With no home there is no call log, so a
worker's failed calls are in its report, not in ``tether usage``'s ``failed``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from datetime import timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import anyio.from_thread

from tether.agent.budget import BudgetGate
from tether.agent.metered import Meter, MeteredLlm
from tether.core.timing.scheduling import Priority
from tether.daemon.app import App
from tether.errors import TetherError
from tether.extract.extractor import Extractor
from tether.ports import ClaimingStore
from tether.records import Completion, CompletionRequest
from tether.sweep import stage
from tether.sweep.model import ModelProducer
from tether.sweep.runner import Runner
from tether.sweep.stage import lease_for
from tether.sweep.worker import DEFAULT_LEASE, Stop, WorkerReport, work

if TYPE_CHECKING:
    from tether.stores.postgres.sweep import PostgresSweepStore

log = logging.getLogger("tether.sweep")

#: Connections one worker holds at most, however many owners it serves (the runner and
#: the model pass use one or two at a time).
WORKER_POOL = 4


def application_name(pid: int | None = None) -> str:
    """What a worker's connections are called in ``pg_stat_activity``."""
    return f"tether-worker-{os.getpid() if pid is None else pid}"


def run_worker(
    app: App,
    url: str,
    *,
    claimant: str,
    once: bool,
    lease: timedelta = DEFAULT_LEASE,
    pool_size: int = WORKER_POOL,
    stop: Stop | None = None,
) -> WorkerReport:
    """Sweep the owner-days of every owner schema in the database at ``url`` beside other
    workers, over one pool, until done (``once``) or ``stop`` is requested (a signal):
    then every claim, pending receipt and model mark this worker holds is handed back.
    ``app``: the worker's application (its config, its clock); it opens the pool, the
    stores and the model, and closes them (the caller closes ``app``)."""
    from tether.daemon.compose import worker_runner
    from tether.sweep.owners import home_zone

    stop = stop or Stop()
    config = app.config
    now = app.now
    llm = app.llm()
    pool = app.pool(url, max_size=pool_size, name=application_name())
    opened: dict[str, PostgresSweepStore] = {}
    budgets: list[BudgetGate] = []
    try:
        with anyio.from_thread.start_blocking_portal() as portal:
            ex = config.extract
            extractor = Extractor(
                llm, slot=config.slots.background, form=ex.resolved_form(config.llm)
            )

            def stores() -> dict[str, ClaimingStore]:
                for owner in pool.owner_schemas():
                    if owner not in opened:
                        opened[owner] = app.owner_sweep(url, owner)
                return dict(opened)

            def runner_for(owner: str, store: ClaimingStore, lease: timedelta) -> Runner:
                main = app.owner_store(url, owner)
                budget = BudgetGate(
                    config=config.budget,
                    store=main,
                    clock=app.clock,
                    zone=ZoneInfo(home_zone(opened[owner])),
                )
                budgets.append(budget)
                metered = MeteredLlm(
                    llm,
                    Meter(budget, None, config.llm.max_tokens),
                    "sweep",
                    priority=Priority.SWEEP,
                )
                plain = metered.blocking(portal.call)

                def call(request: CompletionRequest) -> Completion:
                    try:
                        with stop.interruptible():  # a stop ends a model call at once
                            return plain(request)
                    finally:
                        # No scheduler here writes a kept settle later, and the
                        # owner's next call may be a day away: write it now.
                        _flush(budget)

                producer = ModelProducer(
                    stages=opened[owner].model_stages(),
                    store=main,
                    call=call,
                    extractor=extractor,
                    config=config.sweep,
                    clock=now,
                    lease=lease_for(config.llm.timeout_s),
                    mode=ex.resolved_mode(config.llm),
                    form=ex.resolved_form(config.llm),
                    chunk_chars=ex.resolved_chunk_chars(config.llm),
                )
                return worker_runner(store, config.sweep, lease, claimant, producer)

            try:
                report = work(
                    stores,
                    runner_for,
                    claimant=claimant,
                    now=now,
                    once=once,
                    lease=lease,
                    should_stop=lambda: stop.requested,
                )
                if report.stopped:
                    # Out of the portal by an exception, so that a model call still
                    # running in it is cancelled, not waited for.
                    raise _Cancelled(report)
            finally:
                with contextlib.suppress(Exception):
                    portal.call(app.aclose_llm)
    except _Cancelled as cancelled:
        report = cancelled.report
        report.handed_back += _hand_back(opened, claimant)
    finally:
        for budget in budgets:
            _flush(budget)
    stats = pool.stats()
    report.pool_max = stats.get("pool_max", pool_size)
    report.connections_opened = stats.get("connections_num", 0)
    report.retried += pool.reruns  # transactions the stores ran again themselves
    return report


def _flush(budget: BudgetGate) -> None:
    """Write what the owner's calls used; a store out of reach leaves them ``reserved``
    at their bound (counted high, never low) and says so."""
    try:
        budget.flush()
    except TetherError as exc:
        log.warning("sweep worker: spend ledger not settled: %s", exc)


class _Cancelled(Exception):
    def __init__(self, report: WorkerReport) -> None:
        self.report = report


def _hand_back(opened: dict[str, PostgresSweepStore], claimant: str) -> int:
    """A stopped worker's claims and pending receipts (``release``) and the model marks
    this process holds (removed: its calls were cancelled with the portal), in every
    owner schema it opened; how many owner-days. Best-effort: what cannot be reached now
    comes back when its lease runs out."""
    days = 0
    for store in opened.values():
        try:
            days += store.claims().release(claimant)
            stages = store.model_stages()
            with store.transaction(write=False) as tx:
                sweep_owners = [o.id for o in tx.owners()]
            for owner in sweep_owners:
                stage.release_own(stages, owner)
        except TetherError as exc:
            log.warning("sweep worker: handing back in %s: %s", store.path, exc)
    return days
