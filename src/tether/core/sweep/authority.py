"""Authority ordering and the decisions the sweep takes for each candidate.

``direct_user_statement > agent_reusable_conclusion > sweep_inference``. A fact slot
(subject scope + entity) holds at most one active fact. Only a *stronger* candidate
amends its occupant, and "stronger" is one decision: a higher authority, or the same
authority backed by evidence from a later window than the occupant's (a knowledge update:
"we moved the book club to Tuesdays" replaces Mondays). A weaker candidate, and an equal
one from the same or an older window (or saying the same words), is skipped, which keeps
the guard against the same fact met again on a later day being added twice. A trigger
candidate can only repair an existing, active trigger whose provenance is
``standing_trigger``, and never one set with a higher authority; nothing creates a trigger
from passive behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Literal

import msgspec

from tether.core.sweep.packet import (
    MAX_CANONICAL_WRITES,
    Authority,
    Candidate,
    FactCandidate,
    TriggerRepair,
)
from tether.core.sweep.triggers import compile_text

RANK: dict[str, int] = {
    "sweep_inference": 1,
    "agent_reusable_conclusion": 2,
    "direct_user_statement": 3,
}
STANDING = "standing_trigger"

Action = Literal["add", "amend", "repair", "skip"]


class Occupant(msgspec.Struct, frozen=True):
    """What a fact slot holds now; ``local_date``: the day of the evidence it was last
    written from (None: unknown, never older than anything)."""

    authority: str
    text: str
    local_date: date | None = None


class TriggerState(msgspec.Struct, frozen=True):
    authority: str
    condition: str
    provenance: str
    active: bool


class Decision(msgspec.Struct, frozen=True):
    action: Action
    reason: str

    @property
    def writes(self) -> bool:
        return self.action != "skip"


def stronger(authority: str, than: str) -> bool:
    return RANK[authority] > RANK[than]


def decide_fact(
    authority: Authority,
    occupant: Occupant | None,
    *,
    local_date: date | None = None,
    text: str | None = None,
) -> Decision:
    """``local_date``: the day of the candidate's evidence; ``text``: its words."""
    if occupant is None:
        return Decision("add", "added")
    if stronger(authority, occupant.authority):
        return Decision("amend", "amended")
    if authority == occupant.authority:
        later = (
            local_date is not None
            and occupant.local_date is not None
            and local_date > occupant.local_date
        )
        if later and text is not None and text != occupant.text:
            return Decision("amend", "amended_later_window")
        return Decision("skip", "equal_authority")
    return Decision("skip", "lower_authority")


def decide_trigger(candidate: TriggerRepair, state: TriggerState | None) -> Decision:
    if state is None:
        return Decision("skip", "no_standing_trigger")
    if state.provenance != STANDING:
        return Decision("skip", "not_standing_trigger")
    if not state.active:
        return Decision("skip", "trigger_inactive")
    if stronger(state.authority, candidate.authority):
        return Decision("skip", "lower_authority")
    if compile_text(candidate.condition) == state.condition:
        return Decision("skip", "unchanged")
    return Decision("repair", "repaired")


def plan_day(
    candidates: Sequence[Candidate],
    slots: Mapping[tuple[str, str], Occupant],
    triggers: Mapping[str, TriggerState],
    local_date: date | None = None,
) -> tuple[Decision, ...]:
    """Decide every candidate in order against a snapshot, as applying them would (a
    candidate sees the writes of those before it). Used to bound a day's writes."""
    slots = dict(slots)
    triggers = dict(triggers)
    out: list[Decision] = []
    for c in candidates:
        if isinstance(c, FactCandidate):
            d = decide_fact(
                c.authority, slots.get((c.subject, c.entity)), local_date=local_date, text=c.text
            )
            if d.writes:
                slots[(c.subject, c.entity)] = Occupant(c.authority, c.text, local_date)
        else:
            d = decide_trigger(c, triggers.get(c.trigger_id))
            if d.writes:
                old = triggers[c.trigger_id]
                triggers[c.trigger_id] = msgspec.structs.replace(
                    old, condition=compile_text(c.condition)
                )
        out.append(d)
    return tuple(out)


def within_write_bound(decisions: Sequence[Decision]) -> bool:
    return sum(d.writes for d in decisions) <= MAX_CANONICAL_WRITES
