"""``tether sweep worker``: one of a fleet of processes sweeping the owners of a shared
store, on any machine, needing only the store's URL.

A pass: for every owner schema in the database (``stores.postgres_conn.PgPool.owner_schemas``)
and every sweep owner in it not deleted, offer the completed local days due after its
cursor (``OwnerClaims.offer``: each owner-day once, whoever offers it); then claim days
one at a time (skipping rows other workers have locked, never waiting on them, with a
lease) and sweep each with the same ``Runner`` a home's sweep uses, over that owner's
stores. A day done is marked so; a day that did not complete (not staged yet, fenced,
refused) is handed back and offered again by a later pass. A worker killed mid-day
leaves its claim to expire: the next worker to find it takes the day over, and the
sweep's own receipts make the second run of that day apply nothing twice.

Days are swept from their staged packets in the store when a home's producer or backend
staged one, else by the runner's producer: ``daemon.fleet`` gives each owner the model
pass over that owner's store (``sweep.model``, its stage in the store too); ``NotStaged``
(``Incomplete`` ``not_staged``) is the producer of a runner given none.

``once``: sweep until no owner-day is left to do, waiting for days other workers hold
(until they finish or their leases run out), then return; otherwise keep passing, every
``idle`` seconds when there was nothing to do.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

import msgspec

from tether.core.sweep.packet import DailySweepInput, Incomplete
from tether.core.sweep.state import Owner
from tether.core.sweep.windows import Window, plan_dates
from tether.ports import ClaimingStore
from tether.sweep.runner import Runner

#: How long a claimed owner-day is a worker's before another may take it over.
DEFAULT_LEASE = timedelta(seconds=120)


class NotStaged:
    """The worker's producer: a day is swept only from the packet staged in the store."""

    def produce(self, owner: Owner, window: Window) -> DailySweepInput | Incomplete:
        del owner, window  # nothing but the stage is read
        return Incomplete(reason="not_staged")


class WorkerReport(msgspec.Struct, kw_only=True):
    claimed: int = 0
    outcomes: dict[str, int] = msgspec.field(default_factory=dict)
    #: Why the days that did not complete did not, by reason code.
    reasons: dict[str, int] = msgspec.field(default_factory=dict)
    taken_over: int = 0  # days claimed before (a worker died or stalled)
    passes: int = 0
    #: The worker's one pool: its size bound, and connections it opened over the run.
    pool_max: int = 0
    connections_opened: int = 0


def offer_due(store: ClaimingStore, now: datetime) -> int:
    """Offer every due owner-day of the store's sweep owners; how many were new."""
    days = []
    with store.transaction(write=False) as tx:
        for owner in tx.owners():
            if owner.deleted_at is not None:
                continue
            current = tx.cursor(owner.id)
            due = owner.first_date if current is None else current.local_date + timedelta(days=1)
            plan = plan_dates(owner.timezone_name, now, due)
            days += [(owner.id, d) for d in plan.dates]
    return store.claims().offer(days)


def sweep_claimed(
    store: ClaimingStore,
    *,
    runner: Runner,
    claimant: str,
    lease: timedelta,
    now: datetime,
    report: WorkerReport,
) -> bool:
    """Claim one owner-day of ``store`` and sweep it; False when none was free."""
    claims = store.claims()
    day = claims.claim(claimant, lease)
    if day is None:
        return False
    report.claimed += 1
    if day.attempts > 1:
        report.taken_over += 1
    result = runner.run_owner(day.owner, now, (day.local_date,))
    outcome: str = result.days[0].status if result.days else result.status
    if not result.days:  # refused before it ran (already complete, out of order) or skipped
        outcome = (result.refused_dates[0][1] if result.refused_dates else result.reason) or (
            outcome
        )
    claims.finish(day, outcome if outcome != "already_complete" else "complete")
    report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
    reason = result.days[0].reason if result.days else None
    if reason:
        report.reasons[reason] = report.reasons.get(reason, 0) + 1
    return True


def work(
    stores: Callable[[], dict[str, ClaimingStore]],
    runner_for: Callable[[str, ClaimingStore, timedelta], Runner],
    *,
    claimant: str,
    now: Callable[[], datetime],
    once: bool,
    lease: timedelta = DEFAULT_LEASE,
    idle: float = 5.0,
    should_stop: Callable[[], bool] = lambda: False,
) -> WorkerReport:
    """Run passes over every owner's store (``stores()``: owner -> store, re-read each
    pass so a new owner is found) until done (``once``) or ``should_stop``; each store's
    runner is ``runner_for(owner, store, lease)`` (``daemon.fleet``)."""
    report = WorkerReport()
    runners: dict[str, Runner] = {}
    while not should_stop():
        report.passes += 1
        found = stores()
        moment = now()
        for owner, store in found.items():
            offer_due(store, moment)
            if owner not in runners:
                runners[owner] = runner_for(owner, store, lease)
        did = False
        for owner, store in found.items():
            while not should_stop() and sweep_claimed(
                store,
                runner=runners[owner],
                claimant=claimant,
                lease=lease,
                now=moment,
                report=report,
            ):
                did = True
        if once:
            held = sum(Counter(s.claims().counts()).get("claimed", 0) for s in found.values())
            if not held:
                return report
            time.sleep(0.2)  # others hold days: wait for them to finish or expire
        elif not did:
            time.sleep(idle)
    return report
