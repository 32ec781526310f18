"""One model's vectors of a ``doc_vec`` table held in a ``vector_matrix.VectorMatrix``
and kept in step with the table, the same way on both backends (the adapter,
``sqlite.vectors`` or ``postgres.vectors``, gives the reads); and the approximate graph
over them (``vector_graph``): loaded from its file when the matrix is, grown a step at a
time by ``maintain``, saved when a build is whole, every ``SAVE_EVERY`` vectors after, and
on the adapter's close. The graph file is the only I/O here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tether.stores.vector_graph import GRAPH_FROM, GraphMismatch, VectorGraph
from tether.stores.vector_graph import available as graph_available
from tether.stores.vector_matrix import VectorMatrix

if TYPE_CHECKING:
    from tether.ports import Progress

#: Vectors a graph is grown by per step (the owner's lock is held for one step: ~0.7 s).
GRAPH_STEP = 2_048
#: Vectors added to a graph since it was saved that make ``grow_graph`` save it again
#: (or half the graph's size, if more: a save writes the whole graph, ~500 B a vector,
#: so what a build writes stays within twice the final file; between saves a kill
#: loses only the graph's growth, which the next ``maintain`` redoes).
SAVE_EVERY = 100_000

log = logging.getLogger(__name__)


class TableMatrix:
    """One model's vectors of a ``doc_vec`` table held in a ``VectorMatrix`` and kept in
    step with it, the same way on every backend; the adapter gives the reads
    (``sync``). Not thread-safe: its owner serialises use."""

    def __init__(
        self, *, graph_file: Callable[[str], Path] | None = None, graph_from: int = GRAPH_FROM
    ) -> None:
        self.matrix = VectorMatrix()
        self._model: str | None = None
        self._gone = -1  # the table's ``stat.vec_gone`` when last in step
        #: Where a model's graph is saved (None: kept in memory only).
        self._graph_file = graph_file
        self.graph_from = graph_from
        self._unsaved = 0  # vectors added to the graph since it was saved
        self._building = False  # a graph made here and not yet saved whole

    def sync(
        self,
        model: str,
        gone: int,
        *,
        live_ids: Callable[[int], Iterable[int]],
        added: Callable[[int], Sequence[Sequence[Any]]],
    ) -> VectorMatrix:
        """The matrix in step with the table: emptied for another ``model``; when the
        table's ``gone`` counter moved (a row deleted or rewritten), every vector whose
        id is not among ``live_ids(last)`` (the model's ids up to ``last``) masked; then
        topped up with ``added(last)`` (rows ``(id, doc, dtype, scale, blob)`` after
        ``last``, in id order, a batch a call, empty at the end)."""
        m = self.matrix
        fresh = model != self._model
        if fresh:
            self._model, self._gone = model, gone
            m.clear()
        if gone != self._gone:
            m.keep_only(np.fromiter(live_ids(m.last), dtype=np.int64))
            self._gone = gone
        while batch := added(m.last):
            m.append_stored(batch)
        if fresh:
            self._load_graph(model)
        return m

    def forget(self) -> None:
        """Hold nothing (the table has no vectors of the model)."""
        self._model, self._gone = None, -1
        self.matrix.clear()

    # -- the approximate graph ---------------------------------------------------------

    def _path(self, model: str) -> Path | None:
        return None if self._graph_file is None else self._graph_file(model)

    def _load_graph(self, model: str) -> None:
        """Attach the graph saved for ``model``, if there is one and it is this table's
        (else it is left to ``grow_graph`` to rebuild, and said in the log)."""
        path = self._path(model)
        m = self.matrix
        if path is None or not path.exists() or not graph_available():
            return
        if len(m) < self.graph_from:  # exact below the threshold, a saved graph or not
            return
        try:
            graph = VectorGraph.load(path, dim=m.dim, last=m.last, stored=m.decoded)
        except (GraphMismatch, OSError, RuntimeError, ValueError) as exc:
            log.warning("rebuilding the vector graph: %s", exc)
            return
        m.attach_graph(graph)

    def maintain(
        self,
        lock: AbstractContextManager[object],
        refresh: Callable[[], object],
        *,
        progress: Progress | None = None,
    ) -> int:
        """``VectorIndex.maintain`` for both backends: under ``lock``, ``refresh`` (the
        adapter's sync with its table), then the graph grown a step at a time, the lock
        let go between steps so searches are not held up for the whole build."""
        with lock:
            refresh()
            todo = self.graph_todo()
        if not todo:
            return 0
        if progress is not None:
            progress.stage("building the vector graph", todo)
        done = 0
        while True:
            with lock:
                added = self.grow_graph(progress=progress)
            if not added:
                return done
            done += added

    def grow_graph(self, *, progress: Progress | None = None) -> int:
        """Add up to ``GRAPH_STEP`` vectors the graph does not hold yet (one step of the
        caller's loop); make the graph when the matrix reaches ``graph_from`` live
        vectors, and again when a quarter of it is dead (exact search meanwhile); save it
        when a graph made here is whole, and when ``SAVE_EVERY`` (or half the graph) are
        unsaved; the few vectors a turn adds are saved on close. Vectors added (0:
        nothing to do). Run under the owner's lock."""
        m = self.matrix
        if self._model is None or not graph_available():
            return 0
        graph = m.graph
        if graph is None or graph.stale:
            if graph is None and len(m) < self.graph_from:
                return 0
            graph = VectorGraph(m.dim)
            m.attach_graph(graph)
            self._building, self._unsaved = True, 0
        ids, vectors = m.live_after(graph.last, GRAPH_STEP)
        graph.add(ids, vectors)
        self._unsaved += len(ids)
        if progress is not None and len(ids):
            progress.advance(len(ids))
        whole = m.live_count_after(graph.last) == 0
        if self._unsaved >= max(SAVE_EVERY, len(graph) // 2) or (whole and self._building):
            self.save_graph()
            self._building = False
        return len(ids)

    def graph_todo(self) -> int:
        """Vectors a ``grow_graph`` pass would add (0: none, or no graph is due)."""
        m = self.matrix
        if m.graph is None:
            return len(m) if len(m) >= self.graph_from and graph_available() else 0
        return m.live_count_after(m.graph.last)

    def save_graph(self) -> None:
        """Write the graph to its file if it changed since (a failure is logged: the
        graph is a cache, rebuilt on the next start)."""
        m = self.matrix
        path = None if self._model is None else self._path(self._model)
        if m.graph is None or path is None or not m.graph.dirty:
            return
        try:
            m.graph.save(path)
            self._unsaved = 0
        except (OSError, RuntimeError) as exc:
            log.warning("could not save the vector graph to %s: %s", path, exc)
