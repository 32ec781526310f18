"""The sweep runner: switches, cohort, dates, and one owner-day at a time.

For each owner definitely in the cohort: check the zone against the cursor, plan at most
three completed dates, and for each date read its durable stage (or produce, validate and
stage a packet), claim / apply / complete every candidate, then the source receipts, then
advance the cursor. Any fenced step stops that owner with a reason code and writes
nothing more for it. The report holds counts, dates, statuses and reason codes only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from typing import Literal

import msgspec

from tether.config import SweepConfig
from tether.core.sweep.authority import Occupant, TriggerState, plan_day, within_write_bound
from tether.core.sweep.errors import PacketError, SweepFencedError
from tether.core.sweep.packet import (
    DailySweepInput,
    FactCandidate,
    Incomplete,
    decode_packet,
    digest,
    encode_packet,
    validate_packet,
)
from tether.core.sweep.state import Cursor, Owner, StagedPacket
from tether.core.sweep.windows import plan_dates, window_for
from tether.faults import crash_point, pause_point
from tether.ports import Producer, SweepStore
from tether.scan import packets
from tether.sweep import apply, cursor, receipts
from tether.sweep.fence import DayContext, fence
from tether.sweep.onboarding import Item, OnboardingProducer

DayStatus = Literal["complete", "incomplete", "busy", "fenced", "refused"]
OwnerStatus = Literal["ok", "partial", "busy", "blocked", "fenced", "refused", "skipped"]

#: Who is in the rollout: True in, False out, None unknown; raising counts as unknown.
CohortResolver = Callable[[str], bool | None]


def members(ids: Sequence[str]) -> CohortResolver:
    """A static cohort: ``*`` is every owner; otherwise exactly the ids listed."""
    chosen = frozenset(ids)
    return lambda owner: "*" in chosen or owner in chosen


_OWNER_STATUS: dict[str, OwnerStatus] = {
    "incomplete": "partial",
    "busy": "busy",
    "fenced": "fenced",
    "refused": "refused",
}


class DayResult(msgspec.Struct, kw_only=True):
    local_date: str
    status: DayStatus
    reason: str | None = None
    candidates: int = 0
    writes: int = 0
    redacted: int = 0  # secrets replaced in the day's candidates by this run
    reasons: dict[str, int] = msgspec.field(default_factory=dict)


class ChannelResult(msgspec.Struct, kw_only=True):
    """One session of the ``onboarding_cold_start`` channel (ids, counts, codes)."""

    session: str
    local_date: str
    status: DayStatus
    reason: str | None = None
    candidates: int = 0
    writes: int = 0
    reasons: dict[str, int] = msgspec.field(default_factory=dict)


class OwnerResult(msgspec.Struct, kw_only=True):
    owner: str
    status: OwnerStatus
    reason: str | None = None
    days: list[DayResult] = msgspec.field(default_factory=list)
    refused_dates: list[tuple[str, str]] = msgspec.field(default_factory=list)
    onboarding: list[ChannelResult] = msgspec.field(default_factory=list)


class RunReport(msgspec.Struct, kw_only=True):
    status: Literal["ran", "closed", "killed"]
    reason: str | None = None
    owners: list[OwnerResult] = msgspec.field(default_factory=list)

    def totals(self) -> dict[str, int]:
        days = [d for o in self.owners for d in o.days]
        return {
            "owners": len(self.owners),
            "days_complete": sum(d.status == "complete" for d in days),
            "candidates": sum(d.candidates for d in days),
            "writes": sum(d.writes for d in days),
            "redacted": sum(d.redacted for d in days),
        }

    @property
    def failed(self) -> bool:
        return any(o.status in ("blocked", "fenced", "refused") for o in self.owners)


class Runner:
    def __init__(
        self,
        store: SweepStore,
        producer: Producer,
        *,
        config: SweepConfig,
        cohort: CohortResolver,
        claimant: str,
        lease: timedelta = receipts.DEFAULT_LEASE,
        allow: frozenset[str] = frozenset(),
        telemetry: Callable[[datetime, RunReport], None] | None = None,
        onboarding: OnboardingProducer | None = None,
    ) -> None:
        self.onboarding = onboarding  # the onboarding_cold_start channel, if any
        self.store = store
        self.producer = producer
        self.config = config
        self.cohort = cohort
        self.claimant = claimant
        self.lease = lease
        self.allow = allow  # reviewed secret fingerprints (``.tether-scan-allow``)
        self.telemetry = telemetry  # told what every run did (``sweep.telemetry``)
        self._settle = timedelta(0)

    @property
    def open(self) -> bool:
        """Whether a run would sweep (enabled, not killed)."""
        return self.config.enabled and not self.config.kill_switch

    def run(
        self,
        now: datetime,
        owners: Sequence[str] | None = None,
        dates: Sequence[date] = (),
        *,
        settle: timedelta = timedelta(0),
    ) -> RunReport:
        """Sweep the owners' completed days; ``settle``: a day is taken only this long
        after it ended (``tether serve`` passes ``[sweep] settle_s``)."""
        self._settle = settle
        report = self._run(now, owners, dates)
        if self.telemetry is not None:
            self.telemetry(now, report)
        return report

    def _run(self, now: datetime, owners: Sequence[str] | None, dates: Sequence[date]) -> RunReport:
        if self.config.kill_switch:
            return RunReport(status="killed", reason="kill_switch")
        if not self.config.enabled:
            return RunReport(status="closed", reason="sweep_disabled")
        if owners is None:
            with self.store.transaction(write=False) as tx:
                owners = [o.id for o in tx.owners() if o.deleted_at is None]
        return RunReport(
            status="ran", owners=[self.run_owner(o, now, tuple(dates)) for o in owners]
        )

    def _in_cohort(self, owner: str) -> OwnerResult | None:
        try:
            decision = self.cohort(owner)
        except Exception:
            decision = None
        if decision is True:
            return None
        reason = "not_in_cohort" if decision is False else "cohort_unavailable"
        return OwnerResult(owner=owner, status="skipped", reason=reason)

    def run_owner(self, owner_id: str, now: datetime, dates: tuple[date, ...] = ()) -> OwnerResult:
        out = self._in_cohort(owner_id)
        if out is not None:
            return out  # not definitely in: no cursor, receipt or stage writes at all
        with self.store.transaction(write=False) as tx:
            owner = tx.owner(owner_id)
            current = tx.cursor(owner_id)
        if owner is None or owner.deleted_at is not None:
            reason = "unknown_owner" if owner is None else "owner_deleted"
            return OwnerResult(owner=owner_id, status="skipped", reason=reason)
        result = OwnerResult(owner=owner_id, status="ok")
        if current is not None and current.timezone_name != owner.timezone_name:
            result.status, result.reason = "blocked", "timezone_changed_requires_reconciliation"
            return result
        if self.onboarding is not None:
            for item in self.onboarding.page(owner, self.store, now):
                result.onboarding.append(self._onboard(owner, item, now))
        due = owner.first_date if current is None else current.local_date + timedelta(days=1)
        plan = plan_dates(owner.timezone_name, now - self._settle, due, dates)
        result.refused_dates = [(d.isoformat(), why) for d, why in plan.refused]
        for day in plan.dates:
            outcome, current = self._run_day(owner, current, day, now)
            result.days.append(outcome)
            if outcome.status != "complete":
                result.status = _OWNER_STATUS[outcome.status]
                result.reason = outcome.reason
                break
        return result

    def _onboard(self, owner: Owner, item: Item, now: datetime) -> ChannelResult:
        """One onboarding session's packet, applied through the same receipts (its own
        source key, so its own cursor): never the daily cursor."""
        assert self.onboarding is not None
        ctx = DayContext.of(owner, item.window)
        day = DayResult(local_date=item.window.local_date.isoformat(), status="complete")
        try:
            got = self.onboarding.produce(owner, item)
            if isinstance(got, str):
                day.status, day.reason = "incomplete", got
            else:
                self._validate(got, ctx)
                self._apply_packet(got, ctx, now, day)
        except PacketError as exc:
            day.status, day.reason = "refused", exc.reason
        except SweepFencedError as exc:
            day.status, day.reason = "fenced", exc.reason
        return ChannelResult(
            session=item.session,
            local_date=day.local_date,
            status=day.status,
            reason=day.reason,
            candidates=day.candidates,
            writes=day.writes,
            reasons=day.reasons,
        )

    def _run_day(
        self, owner: Owner, current: Cursor | None, day: date, now: datetime
    ) -> tuple[DayResult, Cursor | None]:
        ctx = DayContext.of(owner, window_for(owner.timezone_name, day))
        result = DayResult(local_date=day.isoformat(), status="complete")
        try:
            got = self._packet(owner, ctx, now, result)
            if isinstance(got, Incomplete):
                # Another run holds the day's model invocation: busy, as a held receipt is.
                held = got.reason in ("invocation_busy", "invocation_stalled")
                result.status = "busy" if held else "incomplete"
                result.reason = got.reason
                return result, current
            packet, clean = got
            self._apply_packet(packet, ctx, now, result, clean=clean)
            if result.status != "complete":
                return result, current
            pause_point("sweep-before-cursor")
            return result, cursor.advance(self.store, ctx, current, now)
        except PacketError as exc:
            result.status, result.reason = "refused", exc.reason
        except SweepFencedError as exc:
            result.status, result.reason = "fenced", exc.reason
        return result, current

    def _packet(
        self, owner: Owner, ctx: DayContext, now: datetime, result: DayResult
    ) -> tuple[DailySweepInput, bool] | Incomplete:
        """The day's durable stage, and whether this run just redacted it; produced,
        redacted, validated and staged first if absent (see ``scan.packets``)."""
        window = ctx.window
        args = (owner.id, window.local_date, ctx.source_generation, window.window_id)
        with self.store.transaction(write=False) as tx:
            staged = tx.stage(*args)
        if staged is None:
            produced = self.producer.produce(owner, window)
            if isinstance(produced, Incomplete):
                return produced
            produced, result.redacted = packets.redact_packet(produced, self.allow)
            self._validate(produced, ctx)
            data = encode_packet(produced)
            produced_digest = digest(produced)
            with self.store.transaction() as tx:
                fence(tx, ctx)
                tx.put_stage(
                    StagedPacket(
                        owner=owner.id,
                        local_date=window.local_date,
                        source_generation=ctx.source_generation,
                        window_id=window.window_id,
                        digest=produced_digest,
                        packet=data,
                        created_at=now,
                    )
                )
                staged = tx.stage(*args)  # a concurrent runner's stage wins
            assert staged is not None
            if staged.digest == produced_digest:
                return produced, True
        packet = decode_packet(staged.packet)
        self._validate(packet, ctx)
        return packet, False

    def _validate(self, packet: DailySweepInput, ctx: DayContext) -> None:
        validate_packet(
            packet,
            owner=ctx.owner,
            window=ctx.window,
            account_generation=ctx.account_generation,
            source_generation=ctx.source_generation,
        )

    def _bound_writes(self, packet: DailySweepInput, owner: str) -> None:
        with self.store.transaction(write=False) as tx:
            slots: dict[tuple[str, str], Occupant] = {}
            triggers: dict[str, TriggerState] = {}
            for c in packet.candidates:
                if isinstance(c, FactCandidate):
                    f = tx.fact_in_slot(owner, c.subject, c.entity)
                    if f is not None:
                        slots[(c.subject, c.entity)] = apply.occupant_of(tx, f)
                else:
                    t = tx.trigger(owner, c.trigger_id)
                    if t is not None:
                        triggers[t.id] = TriggerState(
                            t.authority, t.condition, t.provenance, t.active
                        )
        if not within_write_bound(plan_day(packet.candidates, slots, triggers, packet.local_date)):
            raise PacketError("too_many_writes")

    def _apply_packet(
        self,
        staged: DailySweepInput,
        ctx: DayContext,
        now: datetime,
        result: DayResult,
        *,
        clean: bool = False,
    ) -> None:
        # The one redaction of a day's packet on its way into memory, against today's
        # rules, unless this run just redacted it to stage it (``clean``): a stage written
        # by another process, or under older rules, may hold what they now find. Receipts
        # digest the candidate as staged, so a retry of the same stage claims the same ones.
        packet = staged
        if not clean:
            packet, result.redacted = packets.redact_packet(staged, self.allow)
        self._bound_writes(packet, ctx.owner)
        reasons: Counter[str] = Counter()
        seen: Counter[str] = Counter()
        result.candidates = len(packet.candidates)
        for as_staged, candidate in zip(staged.candidates, packet.candidates, strict=True):
            ordinal = seen[candidate.source_key]
            seen[candidate.source_key] += 1
            held = receipts.claim(
                self.store,
                ctx,
                kind="candidate",
                source_key=candidate.source_key,
                ordinal=ordinal,
                digest=digest(as_staged),
                claimant=self.claimant,
                now=now,
                lease=self.lease,
            )
            if held.status == "committed":
                reasons["committed_earlier"] += 1
                continue
            if held.status == "busy":
                result.status, result.reason = "busy", "busy"
                break
            crash_point("sweep-after-claim")
            pause_point("sweep-after-claim")
            code = apply.apply_candidate(
                self.store, ctx, held.receipt_id, candidate, claimant=self.claimant, now=now
            )
            reasons[code] += 1
            crash_point("sweep-after-apply")
            pause_point("sweep-before-complete")
            receipts.complete(
                self.store, ctx, held.receipt_id, claimant=self.claimant, outcome=code, now=now
            )
        else:
            for source in packet.sources:
                held = receipts.claim(
                    self.store,
                    ctx,
                    kind="source",
                    source_key=source,
                    ordinal=0,
                    digest=digest(staged),
                    claimant=self.claimant,
                    now=now,
                    lease=self.lease,
                )
                if held.status == "busy":
                    result.status, result.reason = "busy", "busy"
                    break
                if held.status != "committed":
                    receipts.complete(
                        self.store,
                        ctx,
                        held.receipt_id,
                        claimant=self.claimant,
                        outcome="source_consumed",
                        now=now,
                    )
        result.writes = sum(reasons[r] for r in ("added", "amended", "repaired"))
        result.reasons = dict(sorted(reasons.items()))


def report_json(report: RunReport) -> dict[str, object]:
    """The public shape of ``sweep run --json`` (counts, dates, statuses, reason codes)."""
    out = msgspec.to_builtins(report)
    assert isinstance(out, dict)
    out["totals"] = report.totals()
    return out
