"""A window the checkpoint hooks banked, made recallable in the time a hook has left.

``remember_banked``: the window's messages into the harness's session
(``checkpoint.recallable.remember_segment``); then, when the time left covers it, that
session indexed; then (vectors on) its rows embedded while the deadline leaves time for
another batch (``embed_within``). What is not done in time, the next recall catches up
(``recall.home.prepare``). The hook's telemetry gets two codes: what became of the window
(``recall_indexed`` when it was indexed, else the remembering's own code) and of its
vectors ("embedded", "deferred", "off", "error", or None when it was not indexed).

The store and the vectors come from the caller's application (``daemon.app.App``), asked
for only when needed: a hook out of time loads no model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tether.errors import TetherError

if TYPE_CHECKING:
    from tether.memory.vectors import Vectors
    from tether.ports import IndexStore

#: A low estimate of how fast a session's new rows are indexed (FTS5 inserts run at
#: ~20 MB/s here): with less time left than a segment needs, the hook leaves its
#: indexing to the pass every recall runs first (``recall_appended``).
INDEX_BYTES_PER_S = 5_000_000
#: What the hooks count on to load the model (~0.55 s here) before they start.
LOAD_S = 0.6
#: Rows a hook embeds per batch: small, so the deadline is checked often (a batch of the
#: longest rows, four parts each, is 64 parts: about 1 s on two cores).
HOOK_BATCH_ROWS = 16
#: A high estimate of one such batch's time.
BATCH_S = 1.0


def remember_banked(
    home: Path,
    session: str,
    segment: str,
    *,
    allow: frozenset[str],
    left: Callable[[], float],
    slot: int,
    store: Callable[[], IndexStore],
    vectors: Callable[[], Vectors | None] | None,
) -> tuple[str, str | None]:
    """Make one banked window recallable in the time ``left()`` says remains (the
    module's doc); ``vectors`` None: vectors are off (nothing to embed)."""
    from tether.checkpoint.bank import corpus_dir
    from tether.checkpoint.recallable import RESERVE_S, remember_segment
    from tether.memory.indexer import index_home

    done = remember_segment(home, session, segment, allow=allow, left=left, slot=slot)
    if done.code != "recall_appended":
        return done.code, None
    size = (corpus_dir(home) / segment).stat().st_size
    if left() - RESERVE_S < size / INDEX_BYTES_PER_S:
        return done.code, None
    index_home(home, store(), only=[session])
    return "recall_indexed", embed_within(vectors, left, RESERVE_S)


def embed_within(
    vectors: Callable[[], Vectors | None] | None, left: Callable[[], float], reserve: float
) -> str:
    """Embed the rows still without a vector while ``left()`` keeps ``reserve`` and time
    for another batch: "embedded", "deferred" (left for the next recall), "off", or
    "error" (the model's file damaged, a full disk)."""
    from tether.memory.vectors import embed_missing

    if vectors is None:
        return "off"
    if left() - reserve < LOAD_S + BATCH_S:
        return "deferred"
    started = time.monotonic()
    try:
        opened = vectors()
        if opened is None:
            return "off"
        load_s = time.monotonic() - started
        embed_missing(
            opened,
            batch=HOOK_BATCH_ROWS,
            stop=lambda: left() - reserve < max(BATCH_S, load_s),
        )
        return "embedded" if opened.complete else "deferred"
    except (TetherError, OSError):
        return "error"
