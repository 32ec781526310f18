"""Recall over a home: what ``tether memory recall`` and ``tether memory reindex`` do
beside the search itself (``memory.recall``).

Before a search, the home catches up: the windows the checkpoint hooks banked but had no
time to put in their sessions go there first (``checkpoint.recallable.catch_up``), so the
index pass that follows makes them recallable. For recall the catch-up is best effort: a
step that fails (a full disk, an unwritable store) is reported in ``CatchUp`` and recall
answers from what is indexed. A hit from a harness session carries the link of its banked
window (``tether://corpus/...``).

Opening the stores and the vectors (and a full disk's read-only fallback) is the caller's;
so is embedding rows that still lack a vector.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tether.checkpoint.recallable import Links, catch_up
from tether.errors import TetherError
from tether.memory.indexer import IndexReport, index_home, reindex
from tether.memory.recall import recall
from tether.scan.allow import home_allow

if TYPE_CHECKING:  # `memory recall` starts on every call: what it names only, unloaded
    from tether.memory.vectors import Vectors
    from tether.ports import IndexStore, Progress, RecallStore, SweepStore
    from tether.records import Hit


@dataclass(frozen=True)
class CatchUp:
    """What the catch-up before a search did: the index pass's report (empty when it
    failed), and the error of each step that failed (recall answers from what is
    indexed)."""

    index: IndexReport = field(default_factory=IndexReport)
    banked_error: TetherError | None = None
    index_error: TetherError | None = None


@dataclass(frozen=True)
class Found:
    """A hit, and the banked window it came from (None: not from a harness window)."""

    hit: Hit
    link: str | None


def bank_pending(home: Path, *, slot: int, wait: bool = False) -> None:
    """Put in their sessions the windows the hooks banked but had no time to (see
    ``checkpoint.recallable``); ``wait``: for an import holding the lock, else leave
    them to the next pass."""
    catch_up(home, allow=home_allow(home), slot=slot, wait=wait)


def catch_up_for_recall(home: Path, store: IndexStore, *, slot: int) -> CatchUp:
    """The banked windows, then the index pass, each best effort."""
    banked_error = index_error = None
    try:
        bank_pending(home, slot=slot)
    except TetherError as exc:
        banked_error = exc
    try:
        report = index_home(home, store)
    except TetherError as exc:
        report, index_error = IndexReport(), exc
    return CatchUp(index=report, banked_error=banked_error, index_error=index_error)


def find(
    home: Path,
    store: RecallStore,
    question: str,
    limit: int,
    *,
    sweep: SweepStore | None,
    vectors: Vectors | None,
    time: datetime,
    until: datetime | None = None,
    in_time_order: bool = False,
) -> list[Found]:
    """The ``limit`` best hits for ``question`` (``memory.recall.recall``: logged as recalled
    at ``time``), each with its banked window's link."""
    hits = recall(
        store,
        question,
        limit,
        time=time,
        home=home,
        sweep=sweep,
        vectors=vectors,
        until=until,
        in_time_order=in_time_order,
    )
    links = Links(home)
    return [Found(h, links.of(h.session, h.time)) for h in hits]


def rebuild(
    home: Path, store: IndexStore, *, slot: int, meter: Progress | None = None
) -> IndexReport:
    """``memory reindex``: the banked windows into their sessions (waiting for an import
    that holds them), then the log index dropped and built again from the files."""
    bank_pending(home, slot=slot, wait=True)
    return reindex(home, store, meter=meter)
