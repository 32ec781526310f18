"""Recall is never silently lexical: the step every recall front end (``memory recall``,
the MCP ``recall`` tool, ``tether ui``'s recall page) runs before it searches with vectors
on.

- ``ready_for_recall``: with up to ``RECALL_EMBED_ROWS`` rows still without a vector
  (what a hook out of time, a failed import embedding or a daemon that was down left)
  they are embedded first, so the search fuses vectors; with more, or when embedding
  fails (a damaged model file, a full disk), the search is lexical and the
  ``Readiness`` says why, for the front end to say it (the CLI on stderr, MCP as the
  result's ``notice``, the ui as a note over the hits).
- Vectors off (``[recall] vectors = false``, or "auto" without the extra) is the owner's
  choice, not a gap: no notice (``tether doctor`` says it).

The model is loaded by whoever opened the ``Vectors`` (``daemon.vectors.open_vectors``):
once per process for the MCP server and the ui, which hold theirs for their life.
"""

from __future__ import annotations

from dataclasses import dataclass

from tether.errors import TetherError
from tether.faults import pause_point
from tether.memory.vectors import Vectors, embed_missing
from tether.ports import Progress

#: The most rows a recall embeds before it answers (64-70 rows/s on two cores: about
#: 3 s, model load included); with more missing it answers lexically and says so.
RECALL_EMBED_ROWS = 200
#: Where a test holds a recall that is about to embed (``tether.faults``).
PAUSE_RECALL_EMBED = "recall-before-embed"
#: What a recall that may not be told counts (MCP's remote lane: the size of the
#: owner's private memory is not its business) says instead.
VAGUE = "recall is lexical: the memory is still being embedded for search by meaning"


def _rows(count: int) -> str:
    return f"{count} row" if count == 1 else f"{count} rows"


@dataclass(frozen=True)
class Readiness:
    """What recall will search with: ``fused`` (vectors and words) or not; when vectors
    are on but the search is lexical, ``missing`` of ``total`` rows lack a vector and
    ``problem`` is why embedding them failed (None: there were too many)."""

    on: bool  # vectors are on ([recall] vectors, the extra installed)
    fused: bool
    embedded: int = 0  # rows embedded by this step
    missing: int = 0
    total: int = 0
    problem: str | None = None

    @property
    def notice(self) -> str | None:
        """One line saying recall is lexical and how to fix it; None when it is not, or
        when vectors are off by choice."""
        if not self.on or self.fused:
            return None
        if self.problem is not None:
            return (
                f"recall is lexical: {_rows(self.missing)} could not be embedded: "
                f"{self.problem} (run `tether memory reindex --vectors`)"
            )
        return (
            f"recall is lexical: {_rows(self.missing)} of {self.total} have no vector yet; "
            "run `tether memory reindex --vectors` (the daemon also catches up)"
        )


OFF = Readiness(on=False, fused=False)


def ready_for_recall(
    vectors: Vectors | None,
    *,
    limit: int = RECALL_EMBED_ROWS,
    progress: Progress | None = None,
) -> Readiness:
    """Embed the few rows still missing a vector (at most ``limit``), or say why the
    search will be lexical (the module's doc). Holds ``vectors.lock`` while embedding, so
    two recalls of one server never embed the same rows twice."""
    if vectors is None:
        return OFF
    with vectors.lock:
        counts = vectors.refresh()
        missing = counts.total - counts.done
        if missing <= 0:
            return Readiness(on=True, fused=True, total=counts.total)
        if missing > limit:
            return Readiness(on=True, fused=False, missing=missing, total=counts.total)
        pause_point(PAUSE_RECALL_EMBED)
        try:
            embedded = embed_missing(vectors, limit=limit, progress=progress)
        except (TetherError, OSError) as exc:
            vectors.refresh()
            return Readiness(
                on=True, fused=False, missing=missing, total=counts.total, problem=str(exc)
            )
        after = vectors.counts  # embed_missing refreshed it
        left = after.total - after.done
        return Readiness(
            on=True,
            fused=left <= 0,
            embedded=embedded,
            missing=max(left, 0),
            total=after.total,
        )
