"""``tether sweep worker``: one of a fleet of processes sweeping the owners of a shared
store, on any machine, needing only the store's URL.

A pass: for every owner schema in the database (``stores.postgres.conn.PgPool.owner_schemas``)
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

Faults: a lost connection to the database (``StoreConnectionLostError``: terminated,
reset, the server restarting) runs the owner-day again, up to ``DAY_TRIES`` times with a
growing pause: every step of a day is fenced or idempotent (receipts, the model mark's
compare-and-swap, the stage insert, the cursor's CAS), so a second run of it applies
nothing twice and never calls the model while the first call may run. Any other error of
a day is logged with its cause and counted (``errors``), and the day handed back: one bad
day never stops the worker. An error outside a day (listing owners, offering, claiming)
pauses the pass and tries again (``once``: at most ``PASS_TRIES`` passes in a row).

Stopping (``Stop``, on SIGTERM or SIGINT): no new day is claimed; a model call in progress
is interrupted (the day is handed back at once), any other step finishes (milliseconds);
then ``daemon.fleet`` hands back every claim and pending receipt this worker still holds,
and the model marks it holds, so other workers take them without waiting for a lease.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from types import FrameType

import msgspec

from tether.core.sweep.packet import DailySweepInput, Incomplete
from tether.core.sweep.state import Owner
from tether.core.sweep.windows import Window, plan_dates
from tether.errors import StoreConnectionLostError, StoreError, TetherError
from tether.ports import ClaimingStore
from tether.records import ClaimedDay
from tether.sweep.runner import OwnerResult, Runner

log = logging.getLogger("tether.sweep")
#: How long a claimed owner-day is a worker's before another may take it over.
DEFAULT_LEASE = timedelta(seconds=120)
#: Runs of one owner-day when its connection is lost, and of a pass that cannot reach
#: the store, before giving up (the day is handed back; ``once`` returns).
DAY_TRIES = 5
PASS_TRIES = 20


def backoff(attempt: int) -> float:
    """Seconds to wait before try ``attempt + 1``: 0.2, 0.4, 0.8, ... at most 5."""
    return float(min(0.2 * 2 ** (attempt - 1), 5.0))


class WorkerStopping(BaseException):
    """Raised into a model call in progress when the worker is asked to stop (``Stop``);
    a BaseException, so that no handler of the day's errors takes it for one."""


class Stop:
    """A worker's stop request: a signal handler (SIGTERM, SIGINT) sets it; inside
    ``interruptible`` (a model call) it raises ``WorkerStopping`` at once."""

    def __init__(self) -> None:
        self.requested = False
        self._inside = 0

    def __call__(self, signum: int = 0, frame: FrameType | None = None) -> None:
        del signum, frame
        self.requested = True
        if self._inside:
            raise WorkerStopping

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        self._inside += 1
        try:
            if self.requested:
                raise WorkerStopping
            yield
        finally:
            self._inside -= 1


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
    #: Owner-days (and passes) run again after a lost connection; errors by cause (the
    #: class name) of days handed back and passes that failed otherwise.
    retried: int = 0
    errors: dict[str, int] = msgspec.field(default_factory=dict)
    #: Stopped by a signal; claims, receipts and model marks handed back on the way out.
    stopped: bool = False
    handed_back: int = 0

    def error(self, exc: BaseException) -> None:
        cause = type(exc).__name__
        self.errors[cause] = self.errors.get(cause, 0) + 1


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
    reason = None
    try:
        result, retried = _run_day(runner, day, now, report)
    except WorkerStopping:
        with contextlib.suppress(StoreError):
            report.handed_back += claims.release(claimant)
        raise
    except TetherError as exc:  # one bad day never stops the worker
        log.warning(
            "sweep worker: owner %s %s failed (%s): %s",
            day.owner,
            day.local_date,
            type(exc).__name__,
            exc,
        )
        report.error(exc)
        outcome = "error"
    else:
        outcome = result.days[0].status if result.days else result.status
        if not result.days:  # refused before it ran (already complete, out of order), skipped
            why = result.refused_dates[0][1] if result.refused_dates else result.reason
            outcome = why or outcome
        reason = result.days[0].reason if result.days else None
        if retried and outcome == "already_complete":
            # The day is ours (claimed): a retry that finds it complete found the commit
            # whose answer the lost connection cut off, i.e. this worker completed it.
            outcome = "complete"
    _finish(claims.finish, day, outcome if outcome != "already_complete" else "complete", report)
    report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
    if reason:
        report.reasons[reason] = report.reasons.get(reason, 0) + 1
    return True


def _run_day(
    runner: Runner, day: ClaimedDay, now: datetime, report: WorkerReport
) -> tuple[OwnerResult, bool]:
    """The claimed owner-day, run again while its connection is lost (module docstring);
    and whether it had to be run again."""
    for attempt in range(1, DAY_TRIES + 1):
        try:
            return runner.run_owner(day.owner, now, (day.local_date,)), attempt > 1
        except StoreConnectionLostError as exc:
            if attempt == DAY_TRIES:
                raise
            log.info("sweep worker: owner %s %s: %s; again", day.owner, day.local_date, exc)
            report.retried += 1
            time.sleep(backoff(attempt))
    raise AssertionError("unreachable")


def _finish(
    finish: Callable[[ClaimedDay, str], bool],
    day: ClaimedDay,
    outcome: str,
    report: WorkerReport,
) -> None:
    """Mark the day done or hand it back, tried again on a lost connection (it changes the
    row only while the claim is still ours: a second try after a lost commit is a no-op);
    failing that, the claim's lease gives the day back."""
    for attempt in range(1, DAY_TRIES + 1):
        try:
            finish(day, outcome)
            return
        except StoreError as exc:
            if attempt == DAY_TRIES:
                log.warning(
                    "sweep worker: owner %s %s not finished: %s", day.owner, day.local_date, exc
                )
                return
            if isinstance(exc, StoreConnectionLostError):
                report.retried += 1
            time.sleep(backoff(attempt))


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
    failed = 0  # passes in a row that could not reach the store
    retries = 0  # passes in a row in which a day failed (``once``)
    try:
        while not should_stop():
            report.passes += 1
            errors = sum(report.errors.values())
            try:
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
                held = 0
                if once:
                    claims = (s.claims().counts() for s in found.values())
                    held = sum(Counter(c).get("claimed", 0) for c in claims)
            except StoreError as exc:
                failed += 1
                if isinstance(exc, StoreConnectionLostError):
                    report.retried += 1  # the pass runs again: counted, not an error
                else:
                    report.error(exc)
                log.warning("sweep worker: pass %d: %s", report.passes, exc)
                if once and failed >= PASS_TRIES:
                    break
                time.sleep(backoff(failed))
                continue
            failed = 0
            if once:
                if sum(report.errors.values()) == errors:
                    retries = 0
                    if not held:
                        break
                else:  # a day failed and was handed back: a later pass runs it again
                    retries += 1
                    if retries >= PASS_TRIES:
                        break
                time.sleep(0.2 if not retries else backoff(retries))
            elif not did:
                time.sleep(idle)
    except WorkerStopping:
        pass
    report.stopped = should_stop()
    return report
