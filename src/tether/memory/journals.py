"""The two journals as one listing (``tether memory journal``): the main store's journal of
memory writes (identity, notes, pages, by the owner and the agent) and the sweep's journal
of canonical writes (its facts and triggers, per owner), merged by time.

The sweep keeps its journal in its own tables, written in the same transaction as the
write it records, so it is read through ``SweepStore.journal_rows`` and never copied.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tether.core.sweep.state import JournalRow
from tether.records import JournalEntry

Journal = Literal["memory", "sweep"]


@dataclass(frozen=True)
class Listed:
    """One line of the listing: which journal it is from, and its entry there."""

    journal: Journal
    entry: JournalEntry | JournalRow


def merged(
    memory: Sequence[JournalEntry], sweep: Sequence[JournalRow], limit: int | None = None
) -> list[Listed]:
    """Both journals oldest first, at the same time the memory journal's entry first;
    with ``limit``, only the newest ``limit`` of the whole.

    A merge, not a sort: each journal keeps its own order (by id, the order its writes
    committed in) even where a clock stepped backwards between two of its entries.
    """
    both = heapq.merge(
        (Listed("memory", e) for e in memory),
        (Listed("sweep", r) for r in sweep),
        key=lambda listed: listed.entry.time,
    )
    out = list(both)
    return out if limit is None else out[-limit:]
