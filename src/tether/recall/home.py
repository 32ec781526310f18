"""Recall over a home: what ``tether memory recall`` and ``tether memory reindex`` do
beside the search itself (``memory.recall``).

Before a search, the home catches up: the windows the checkpoint hooks banked but had no
time to put in their sessions go there first (``checkpoint.recallable.catch_up``), so the
index pass that follows makes them recallable. For recall the catch-up is best effort: a
step that fails (a full disk, an unwritable store) is reported in ``CatchUp`` and recall
answers from what is indexed. A hit from a harness session carries the link of its banked
window (``tether://corpus/...``).

- ``prepare``: the step every recall of a home runs before it searches (``memory recall``
  and the page's recall view): the catch-up, then, with vectors on, the few rows still
  without a vector embedded (``memory.readiness``), or why the search is lexical.
- ``find``: the search, each hit with its banked window's link.
- ``rebuild``: ``memory reindex``. ``embed_all``: ``memory reindex --vectors``: the index
  up to date, then every row without a vector from the current model embedded.

Opening the stores and the vectors (and a full disk's read-only fallback) is the caller's
(its application's, ``daemon.app.App``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tether.checkpoint.recallable import Links, catch_up
from tether.errors import BadInputError, TetherError
from tether.memory.indexer import IndexReport, index_home, reindex
from tether.memory.recall import recall
from tether.scan.allow import home_allow

if TYPE_CHECKING:  # `memory recall` starts on every call: what it names only, unloaded
    from tether.memory.readiness import Readiness
    from tether.memory.vectors import Vectors
    from tether.ports import IndexStore, Progress, RecallStore, SweepStore
    from tether.records import Hit, VectorCounts

#: Where the crash tests kill ``memory reindex --vectors`` (after each batch's commit).
EMBED_BATCH_POINT = "reindex_vectors.batch"


@dataclass(frozen=True)
class CatchUp:
    """What the catch-up before a search did: the index pass's report (empty when it
    failed), and the error of each step that failed (recall answers from what is
    indexed)."""

    index: IndexReport = field(default_factory=IndexReport)
    banked_error: TetherError | None = None
    index_error: TetherError | None = None

    def failures(self) -> list[tuple[str, TetherError]]:
        """Each step that failed as the CLI and the page both say it: what could not be
        done (recall answers from what is indexed) and its error, for each to render."""
        said = (
            (
                self.banked_error,
                "banked windows could not be put in their sessions, recall answers from "
                "what is indexed",
            ),
            (self.index_error, "the index could not catch up, recall answers from what is indexed"),
        )
        return [(what, error) for error, what in said if error is not None]


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


@dataclass(frozen=True)
class Prepared:
    """What recall did before it searched: the catch-up, and what it searches with
    (``ready.fused``; ``ready.notice``: why it is lexical, for the front end to say)."""

    caught: CatchUp
    ready: Readiness


def prepare(
    home: Path,
    store: IndexStore,
    vectors: Vectors | None,
    *,
    slot: int,
    progress: Progress | None = None,
) -> Prepared:
    """The step before every recall of a home (``memory recall``, the page's recall): the
    banked windows and the index pass, best effort (``catch_up_for_recall``); then the few
    rows still without a vector embedded, else why the search is lexical."""
    from tether.memory.readiness import ready_for_recall

    caught = catch_up_for_recall(home, store, slot=slot)
    return Prepared(caught, ready_for_recall(vectors, progress=progress))


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


@dataclass(frozen=True)
class Embedded:
    """What ``memory reindex --vectors`` did: the index pass's report, the model, the rows
    it embedded, and the counts before and after."""

    index: IndexReport
    model: str
    embedded: int
    before: VectorCounts
    after: VectorCounts


def embed_all(
    home: Path,
    store: IndexStore,
    vectors: Callable[[], Vectors | None],
    *,
    progress: Progress | None = None,
) -> Embedded:
    """``memory reindex --vectors``: the index brought up to date, then every row without
    a vector from the current model embedded, a batch per transaction (a killed run
    resumes). ``vectors`` opens them after the index pass; None: BadInputError."""
    from tether.faults import crash_point
    from tether.memory.vectors import embed_missing

    report = index_home(home, store)
    opened = vectors()
    if opened is None:
        raise BadInputError("this store has no vector index yet")
    before = opened.counts
    embedded = embed_missing(
        opened, progress=progress, after_batch=lambda _n: crash_point(EMBED_BATCH_POINT)
    )
    return Embedded(report, opened.model, embedded, before, opened.counts)
