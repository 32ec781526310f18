"""Recall's vectors, composed: which embedder and index ``[recall] vectors`` asks for, and
the indexer that embeds new rows after each turn's rows land.

- ``open_vectors``: ``false`` gives None (lexical recall, no model loaded); ``"auto"``
  gives None when the extra tether[vectors] is absent; ``true`` then refuses with
  ``ExtraMissingError``. Otherwise the default embedder (``llm.embedder``) over the
  store's vector index (``stores.open_vector_index``). The store must be open (migrated).
- ``lexical_reason``: why recall is lexical, in one line, or None when it fuses vectors
  (``doctor`` prints it).
- ``VectorIndexer``: one worker thread of its own (never the event loop, never the turn's
  critical path): ``poke`` after the agent indexed a turn queues one pass of
  ``memory.vectors.embed_missing`` unless one is already queued; a pass embeds every row
  still missing, a batch a transaction. ``close`` waits for the pass running.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from tether.config import Config
from tether.errors import TetherError
from tether.llm import embedder
from tether.memory.vectors import Vectors, embed_missing
from tether.stores import open_vector_index

log = logging.getLogger(__name__)


def open_vectors(home: Path, config: Config) -> Vectors | None:
    setting = config.recall.vectors
    if setting is False:
        return None
    if setting is True:
        embedder.require_extra("[recall] vectors = true")
    elif not embedder.available():
        return None
    index = open_vector_index(home, config)
    if index is None:
        return None
    try:
        return Vectors(embedder.load(), index)
    except BaseException:
        index.close()
        raise


def lexical_reason(config: Config, vectors: Callable[[], Vectors | None]) -> str | None:
    """Why recall does not fuse vectors, or None when it does; ``vectors``: the
    application's (``App.vectors``), asked for only when the setting and the extra
    allow them."""
    if config.recall.vectors is False:
        return "recall is lexical: [recall] vectors = false"
    gone = embedder.missing()
    if gone is not None:
        return (
            f"recall is lexical: the extra tether[vectors] is not installed ({gone} is"
            f" missing): {embedder.install_command()}"
        )
    opened = vectors()
    if opened is None:
        return "recall is lexical: this store has no vector index yet"
    counts = opened.counts
    if not counts.complete:
        return (
            f"recall is lexical: {counts.done} of {counts.total} rows have vectors"
            f" ({counts.total - counts.done} without); run `tether memory reindex"
            " --vectors` (the daemon also catches up)"
        )
    return None


class VectorIndexer:
    """Embeds rows the index gained, on its own worker thread (see the module's doc)."""

    def __init__(self, vectors: Vectors) -> None:
        self.vectors = vectors
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tether-vectors")
        self._lock = threading.Lock()
        self._queued: Future[int] | None = None

    def poke(self) -> Future[int]:
        """Queue a pass (or return the one already queued and not started)."""
        with self._lock:
            queued = self._queued
            if queued is not None and not queued.running() and not queued.done():
                return queued
            self._queued = self._pool.submit(self._pass)
            return self._queued

    def _pass(self) -> int:
        try:
            return embed_missing(self.vectors)
        except TetherError as exc:  # logged, not raised: the next turn's pass tries again
            log.warning("embedding rows for recall failed: %s", exc)
            return 0

    def stop(self) -> None:
        """Wait for the pass running; cancel any queued (the index stays open)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        self.stop()
        self.vectors.index.close()
