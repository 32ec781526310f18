"""An approximate nearest-neighbour graph (HNSW, through ``faiss``) over the vectors a
``VectorMatrix`` holds, so that a search at a million rows does not read every vector.

Why: the matrix's exact scan reads 384 bytes a vector; at 2M vectors (a million turns)
that is ~40-65 ms on two cores before anything else, which no recall budget under 20 ms
takes. The graph visits a few thousand vectors instead (about 2 ms).

What it is trusted with: only *which* vectors to look at. The matrix rescores every
candidate from its own codes, masks what is gone, and scans exactly what the graph does
not hold yet (vectors added after ``last``), so a stale, foreign or damaged graph costs
recall quality, never a wrong score or a deleted row. Its keys are the table's vector
ids. faiss's HNSW cannot delete, so a vector masked in the matrix stays in the graph as a
dead key (its candidates are dropped); once a quarter of the graph is dead it is rebuilt.
Its vectors are 8-bit over [-1, 1] (a unit vector's components), 384 bytes each.

Persistence (``save`` / ``load``): one file beside the store, written to a temporary name
and renamed, so a kill leaves the old graph or the new one. ``load`` refuses a file of
another dimension or one holding ids the table never had (another store's, a restored
backup), and spot-checks that the vectors under a few keys are the table's; the caller
rebuilds then. The graph is a cache of the table: losing it costs the time to rebuild
(3,000 vectors/s on two cores for random vectors, 10-20k/s for sentence vectors), nothing else.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

_loaded: Any = None
#: OpenMP threads a graph is grown with (faiss's default: one per core), set per call:
#: a search runs on the calling thread alone (``search``).
_add_threads = 1


def _faiss() -> Any:
    """faiss, imported when a graph is first made or loaded (a fifth of a second that a
    store below ``GRAPH_FROM`` never pays)."""
    global _loaded, _add_threads  # noqa: PLW0603 (a module imported once)
    if _loaded is None:
        _loaded = importlib.import_module("faiss")
        _add_threads = int(_loaded.omp_get_max_threads())
    return _loaded


#: Live vectors from which a store grows a graph (below, the exact scan takes < 8 ms).
GRAPH_FROM = 250_000
#: Edges per node and the breadth of the search while inserting (faiss's defaults are
#: 32 / 40; 16 keeps the graph small, and the rescoring from the matrix's codes makes up
#: for the candidates' order).
LINKS = 16
EXPANSION_ADD = 40
#: Candidates asked of the graph per vector the caller wants, and at least. Chosen on
#: the LongMemEval tuning half's real vectors (benchmarks/vector_graph_quality.py): 1
#: finds 0.998 / 0.986 / 0.987 of the exact top 10 / 50 / 200, 2 finds 0.998 / 0.988 /
#: 0.997, at twice the search (fused recall at 1M turns p50 28 ms against 43-51 ms).
OVERSAMPLE = 1
MIN_CANDIDATES = 256
#: Dead keys, as a share of the graph, from which it is rebuilt.
REBUILD_AT = 0.25
#: Keys whose graph vector is compared with the table's when a saved graph is loaded.
_SPOT_CHECKS = 16


def available() -> bool:
    return importlib.util.find_spec("faiss") is not None


class GraphMismatch(ValueError):
    """A saved graph that does not belong to this table (``load``); rebuild it."""


class VectorGraph:
    """The HNSW graph over one model's vectors (the module's doc). Not thread-safe: the
    matrix's owner serialises use."""

    def __init__(self, dim: int, index: Any = None) -> None:
        faiss = _faiss()
        self.dim = dim
        if index is None:
            base = faiss.IndexHNSWSQ(
                dim, faiss.ScalarQuantizer.QT_8bit_uniform, LINKS, faiss.METRIC_INNER_PRODUCT
            )
            base.hnsw.efConstruction = EXPANSION_ADD
            # The quantiser's range: every component of a unit vector is in [-1, 1].
            base.train(np.stack([-np.ones(dim, np.float32), np.ones(dim, np.float32)]))
            index = faiss.IndexIDMap(base)
        self._index = index
        self._base = faiss.downcast_index(index.index)
        keys = self.keys()
        #: The highest vector id added (0: none); the matrix scans what is after it.
        self.last = int(keys[-1]) if len(keys) else 0
        self.dead = 0  # keys no longer live in the table
        self.dirty = False  # added to since saved or loaded

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def add(self, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """Insert vectors whose ids ascend past ``last``."""
        if not len(ids):
            return
        if int(ids[0]) <= self.last:
            raise ValueError("graph ids must ascend past the last one added")
        _faiss().omp_set_num_threads(_add_threads)  # this thread may have searched
        self._index.add_with_ids(
            np.ascontiguousarray(vectors, dtype=np.float32), ids.astype(np.int64)
        )
        self.last = int(ids[-1])
        self.dirty = True

    def mark_dead(self, count: int) -> None:
        """``count`` of its keys are no longer live (see the module's doc)."""
        self.dead += count

    @property
    def stale(self) -> bool:
        """So many of its keys are dead that it is to be rebuilt."""
        return self.dead > REBUILD_AT * max(len(self), 1)

    def search(self, query: npt.NDArray[np.float32], want: int) -> npt.NDArray[np.int64]:
        """Ids of the vectors the graph finds nearest ``query``: ``OVERSAMPLE`` per vector
        wanted, at least ``MIN_CANDIDATES`` (the caller rescores)."""
        count = max(want * OVERSAMPLE, MIN_CANDIDATES)
        self._base.hnsw.efSearch = count
        # One OpenMP thread (the setting is the calling thread's own): one query's search
        # gains nothing from the pool, yet faiss enters a parallel region for it, and
        # waking the pool's sleeping threads took 66 ms p50 on two busy cores against
        # 3.8 ms on one thread, for the same ids (benchmarks/RESULTS.md, issue 35).
        _faiss().omp_set_num_threads(1)
        _, ids = self._index.search(np.asarray(query, np.float32).reshape(1, -1), count)
        found = np.asarray(ids[0], dtype=np.int64)
        return found[found >= 0]

    def keys(self) -> npt.NDArray[np.int64]:
        """Every id added, ascending (added in id order)."""
        if not self._index.ntotal:
            return np.zeros(0, dtype=np.int64)
        return np.asarray(_faiss().vector_to_array(self._index.id_map), dtype=np.int64)

    def vectors_of(self, ids: npt.NDArray[np.int64]) -> list[npt.NDArray[np.float32] | None]:
        """The graph's own (quantised) vectors under ``ids``; None for one it lacks."""
        keys = self.keys()
        at = np.searchsorted(keys, ids)
        out: list[npt.NDArray[np.float32] | None] = []
        for vid, i in zip(ids, at, strict=True):
            held = i < len(keys) and keys[i] == vid
            out.append(np.asarray(self._base.reconstruct(int(i)), np.float32) if held else None)
        return out

    # -- persistence -------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write the graph to ``path`` whole (a temporary file renamed over it)."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            _faiss().write_index(self._index, str(tmp))
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        self.dirty = False

    @classmethod
    def load(
        cls,
        path: Path,
        *,
        dim: int,
        last: int,
        stored: Callable[[npt.NDArray[np.int64]], Sequence[npt.NDArray[np.float32] | None]],
    ) -> VectorGraph:
        """The graph saved at ``path``, checked against the table: ``dim`` its vectors'
        size, ``last`` the highest id the table has, ``stored(ids)`` the table's decoded
        vectors under ``ids`` (None for an id it does not hold). ``GraphMismatch`` when
        the file is not this table's; ``OSError`` / ``RuntimeError`` when unreadable."""
        faiss = _faiss()
        index = faiss.read_index(str(path))
        if not isinstance(index, faiss.IndexIDMap) or not isinstance(
            faiss.downcast_index(index.index), faiss.IndexHNSWSQ
        ):
            raise GraphMismatch(f"{path} is not a vector graph")
        if int(index.d) != dim:
            raise GraphMismatch(f"{path} holds vectors of {index.d} values, not {dim}")
        graph = cls(dim, index)
        if graph.last > last:
            raise GraphMismatch(f"{path} holds vector ids the store never had")
        keys = graph.keys()
        if len(keys):
            rng = np.random.default_rng(len(keys))
            sample = np.sort(rng.choice(keys, size=min(_SPOT_CHECKS, len(keys)), replace=False))
            for mine, theirs in zip(graph.vectors_of(sample), stored(sample), strict=True):
                if theirs is None or mine is None:
                    continue  # gone from the table since: the matrix masks it
                norms = float(np.linalg.norm(mine)) * float(np.linalg.norm(theirs))
                if float(mine @ theirs) < 0.98 * (norms or 1.0):
                    raise GraphMismatch(f"{path} does not hold this store's vectors")
        return graph
