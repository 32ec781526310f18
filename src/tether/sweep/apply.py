"""Canonical apply: one candidate, one transaction, idempotent.

Inside the transaction: re-read the owner (fence), check the receipt is still claimed by
us, and look for a journal entry of this receipt (one already there means an earlier run
applied it and died before completing: report ``applied_earlier`` and write nothing).
Then the pure decision (``core.sweep.authority``) against the live slot or trigger, and
the write plus its journal entry, together.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from tether.core.sweep.authority import Occupant, TriggerState, decide_fact, decide_trigger
from tether.core.sweep.errors import SweepFencedError
from tether.core.sweep.packet import Candidate, FactCandidate
from tether.core.sweep.state import Fact, JournalRow
from tether.core.sweep.triggers import compile_text
from tether.ports import SweepStore, SweepTx
from tether.sweep.fence import DayContext, fence

WHO = "sweep"


def _evidence(ctx: DayContext, candidate: Candidate) -> str:
    """Sweep provenance for the journal: ids and codes only."""
    return msgspec.json.encode(
        {
            "local_date": ctx.window.local_date.isoformat(),
            "window_id": ctx.window.window_id,
            "source_key": candidate.source_key,
            "authority": candidate.authority,
            "source_generation": ctx.source_generation,
            "refs": candidate.refs,
        },
        order="sorted",
    ).decode()


def apply_candidate(
    store: SweepStore,
    ctx: DayContext,
    rid: str,
    candidate: Candidate,
    *,
    claimant: str,
    now: datetime,
) -> str:
    """Apply ``candidate`` under receipt ``rid``; return the outcome reason code."""
    with store.transaction() as tx:
        fence(tx, ctx)
        held = tx.receipt(rid)
        if held is None or held.claimant != claimant or held.state != "pending":
            raise SweepFencedError(ctx.owner, "claim_lost")
        if tx.journal_for(rid) is not None:
            return "applied_earlier"
        if isinstance(candidate, FactCandidate):
            return _apply_fact(tx, ctx, rid, candidate, now)
        decision = decide_trigger(candidate, _trigger_state(tx, ctx.owner, candidate.trigger_id))
        if decision.action == "repair":
            old = tx.trigger(ctx.owner, candidate.trigger_id)
            assert old is not None
            new = msgspec.structs.replace(
                old, condition=compile_text(candidate.condition), updated_at=now
            )
            tx.put_trigger(new)  # provenance stays standing_trigger
            tx.append_journal(
                JournalRow(
                    owner=ctx.owner,
                    receipt_id=rid,
                    time=now,
                    who=WHO,
                    action="trigger_repair",
                    target=f"trigger:{old.id}",
                    before=old.condition,
                    after=new.condition,
                    evidence=_evidence(ctx, candidate),
                )
            )
        return decision.reason


def _trigger_state(tx: SweepTx, owner: str, trigger_id: str) -> TriggerState | None:
    t = tx.trigger(owner, trigger_id)
    if t is None:
        return None
    return TriggerState(
        authority=t.authority, condition=t.condition, provenance=t.provenance, active=t.active
    )


def occupant_of(tx: SweepTx, fact: Fact) -> Occupant:
    """A slot's fact as the decision weighs it: with the day of the evidence it was last
    written from (its origin receipt's local date; unknown without one)."""
    origin = tx.receipt(fact.origin_receipt) if fact.origin_receipt else None
    return Occupant(fact.authority, fact.text, None if origin is None else origin.local_date)


def _apply_fact(
    tx: SweepTx, ctx: DayContext, rid: str, candidate: FactCandidate, now: datetime
) -> str:
    occupant = tx.fact_in_slot(ctx.owner, candidate.subject, candidate.entity)
    decision = decide_fact(
        candidate.authority,
        None if occupant is None else occupant_of(tx, occupant),
        local_date=ctx.window.local_date,
        text=candidate.text,
    )
    refs = msgspec.json.encode(candidate.refs).decode()
    if decision.action == "add":
        tx.put_fact(
            Fact(
                owner=ctx.owner,
                subject=candidate.subject,
                entity=candidate.entity,
                text=candidate.text,
                authority=candidate.authority,
                refs=refs,
                origin_receipt=rid,
                created_at=now,
                updated_at=now,
                visibility=candidate.visibility,
            )
        )
    elif decision.action == "amend":
        assert occupant is not None
        tx.put_fact(
            msgspec.structs.replace(
                occupant,
                text=candidate.text,
                authority=candidate.authority,
                refs=refs,
                origin_receipt=rid,
                updated_at=now,
                visibility=candidate.visibility,
            )
        )
    if decision.writes:
        tx.append_journal(
            JournalRow(
                owner=ctx.owner,
                receipt_id=rid,
                time=now,
                who=WHO,
                action=f"fact_{decision.action}",
                target=f"fact:{candidate.subject}/{candidate.entity}",
                before=None if occupant is None else occupant.text,
                after=candidate.text,
                evidence=_evidence(ctx, candidate),
            )
        )
    return decision.reason
