"""The memory block of a baseline: identity entries packed within a token budget, then
the daily sweep's active facts in what is left of it, highest authority first (so the
first turn of a new epoch knows what was decided yesterday).

Deterministic by construction: the same entries and budget give the same bytes, so an
unchanged memory never changes a baseline (and never costs a cache miss).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tether.core.context import tokens

HEADER = (
    "# Memory\n"
    "Identity: who the owner is and how you act. Edit it with the add, remove and "
    "consolidate tools, citing an entry by its [id]. Notes and past conversations are "
    "not shown here: use recall.\n"
)
_ENTRY_LINE = re.compile(r"^\s*[-*]\s+(?P<text>\S.*?)\s*$")


FACTS_HEADER = "## Learned from past days (the daily sweep)\n"
#: Authority order of the sweep (``core.sweep.authority.RANK``): higher first.
_RANK = {"direct_user_statement": 3, "agent_reusable_conclusion": 2, "sweep_inference": 1}


@dataclass(frozen=True)
class BlockFact:
    """An active sweep fact as the block shows it (its text already redacted)."""

    text: str
    authority: str


@dataclass(frozen=True)
class Entry:
    """One identity entry: a list item of memory.md, with an id derived from its text."""

    id: str
    text: str


def entry_id(text: str) -> str:
    """A short stable id: the same text always has the same id, wherever it sits."""
    return "m-" + hashlib.sha256(text.strip().encode()).hexdigest()[:6]


def parse_entries(markdown: str) -> list[Entry]:
    """List items (``- text`` or ``* text``) of memory.md, in file order; other lines are
    the owner's prose and headings and are not entries. Duplicates keep their first place."""
    out: list[Entry] = []
    seen: set[str] = set()
    for line in markdown.splitlines():
        m = _ENTRY_LINE.match(line)
        if not m:
            continue
        text = m.group("text")
        eid = entry_id(text)
        if eid not in seen:
            seen.add(eid)
            out.append(Entry(eid, text))
    return out


def build_block(
    entries: Sequence[Entry], budget_tokens: int, facts: Sequence[BlockFact] = ()
) -> str:
    """The identity block (``identity_block``), then, while they fit what is left of the
    budget, ``facts`` under their own heading: highest authority first, in the order given
    within one authority (the caller gives the newest first). Never exceeds the budget."""
    block = identity_block(entries, budget_tokens)
    if not facts or not block:
        return block
    left = budget_tokens - tokens.count(block) - tokens.count(FACTS_HEADER)
    lines: list[str] = []
    for f in sorted(facts, key=lambda fact: -_RANK.get(fact.authority, 0)):
        line = "- " + " ".join(f.text.split()) + "\n"
        cost = tokens.count(line)
        if cost > left:
            break
        lines.append(line)
        left -= cost
    return block + FACTS_HEADER + "".join(lines) if lines else block


def identity_block(entries: Sequence[Entry], budget_tokens: int) -> str:
    """A fixed header, then entries in file order while they fit the budget, then one
    line saying how many did not fit. Never exceeds ``budget_tokens``: a budget too small
    for even the header gives an empty block."""
    if not entries:
        block = HEADER + "(no identity entries yet)\n"
        return block if tokens.count(block) <= budget_tokens else ""
    lines: list[str] = []
    used = tokens.count(HEADER)
    # Room for the "not shown" line is kept free so the budget holds with it; token counts
    # of concatenated lines never exceed the sum of their parts (pieces only merge).
    reserve = tokens.count(f"({len(entries)} more entries not shown; use recall)\n")
    if used + reserve > budget_tokens:
        return ""
    omitted = 0
    for e in entries:
        line = f"- [{e.id}] {e.text}\n"
        cost = tokens.count(line)
        if omitted == 0 and used + cost + reserve <= budget_tokens:
            lines.append(line)
            used += cost
        else:
            omitted += 1
    tail = f"({omitted} more entries not shown; use recall)\n" if omitted else ""
    return HEADER + "".join(lines) + tail
