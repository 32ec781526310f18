"""The in-memory side of a ``VectorIndex``: every vector of one model held as int8 codes
with a per-vector scale, searched exactly by brute force. Backend-agnostic: the store
adapters (``sqlite.vectors``, ``postgres.vectors``) read their table into it and keep it
in step (``table_matrix.TableMatrix``); it does no I/O.

- Layout: the codes as stored (``encode``: int8, each vector scaled by its largest
  component / 127), a quarter of float32's size (384 MB at a million vectors of 384),
  beside each vector's id in its table (increasing: ``append`` takes rows after ``last``),
  its doc id and a live flag. A vector gone (its row deleted or rewritten) is masked
  (``keep_only``, ``drop_docs``), not reloaded; the masked rows are squeezed out once they
  are a quarter of the matrix.
- Search (``nearest``) is exact and ranks as a float32 matrix of the decoded vectors
  would: a first pass scores every vector against the query cut to int8 (integer dot
  products, SIMD through ``numkong`` when it is installed, else numpy in blocks), whose
  error is bounded (``|codes . (q - q8)| * scale <= |vector| * |q - q8|``); every vector
  within twice that bound of the first pass's cut-off is rescored in float32, so the
  vectors kept are the ones the float32 product keeps. One pass over 384 bytes a vector;
  ``benchmarks/RESULTS.md`` has the figures.
- From ``vector_graph.GRAPH_FROM`` live vectors the store adapter grows an approximate
  graph (``table_matrix.TableMatrix.grow_graph``, off the query path) and ``nearest``
  asks it which vectors to rescore instead of scanning them all; what the graph does
  not hold yet is still scanned exactly, and every score still comes from the codes
  here. With a graph the result is approximate (its agreement with the exact search is measured in
  ``benchmarks/RESULTS.md``); without one, exact.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tether.stores.vector_graph import VectorGraph

_simd: Any
try:  # SIMD int8 dot products (simsimd's successor); without it numpy does the same sums
    _simd = importlib.import_module("numkong")
except ImportError:  # pragma: no cover - the extra installs it
    _simd = None

if TYPE_CHECKING:
    import numpy.typing as npt

    from tether.ports import Matrix

#: Vectors scored per block by the numpy first pass (a 16k x 384 float32 block is 25 MB).
_BLOCK = 16_384
#: Vectors from which the SIMD first pass splits over two threads (below, one is faster:
#: 2M vectors take 62 ms on one core, 40 ms on two; benchmarks/RESULTS.md).
_TWO_THREADS_AT = 262_144
#: Masked rows, as a share of the matrix, that make ``_squeeze`` compact it.
_SQUEEZE_AT = 0.25


class VectorMatrix:
    """Vectors of one model in memory (the module's doc). Not thread-safe: its owner
    serialises use."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Drop every vector (a model change, or a table that shrank under us)."""
        self._codes: npt.NDArray[np.int8] = np.zeros((0, 0), dtype=np.int8)
        self._scales: npt.NDArray[np.float32] = np.zeros(0, dtype=np.float32)
        self._ids: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._docs: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._live: npt.NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self._rows = 0  # rows in use (the arrays grow by doubling)
        self._dead = 0  # rows in use that are masked
        self._norm = 0.0  # the largest norm of a decoded vector (the first pass's bound)
        self._last = 0
        #: An approximate graph over the vectors up to ``graph.last`` (None: exact only).
        self.graph: VectorGraph | None = None

    def attach_graph(self, graph: VectorGraph) -> None:
        """Search through ``graph`` from now on, its keys not live here counted as dead
        (``VectorGraph.mark_dead``: faiss's graph cannot delete them)."""
        keys = graph.keys()
        graph.mark_dead(int((~np.isin(keys, self.ids())).sum()))
        self.graph = graph

    # -- what is held ------------------------------------------------------------------

    @property
    def last(self) -> int:
        """The highest vector id appended (0: none): what to read after."""
        return self._last

    def __len__(self) -> int:
        """Vectors held and live."""
        return self._rows - self._dead

    @property
    def dim(self) -> int:
        return int(self._codes.shape[1]) if self._rows else 0

    @property
    def nbytes(self) -> int:
        """Memory held by the arrays (with their spare room)."""
        arrays = (self._codes, self._scales, self._ids, self._docs, self._live)
        return sum(int(a.nbytes) for a in arrays)

    def ids(self) -> npt.NDArray[np.int64]:
        """The live vectors' ids, ascending."""
        n = self._rows
        return self._ids[:n][self._live[:n]]

    def _rows_of(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
        """The rows of those ``ids`` that are held and live (ids are ascending in rows)."""
        n = self._rows
        at = np.searchsorted(self._ids[:n], ids)
        at = at[at < n]
        at = at[np.isin(self._ids[at], ids)]
        return at[self._live[at]]

    def decoded(self, ids: npt.NDArray[np.int64]) -> list[npt.NDArray[np.float32] | None]:
        """Each id's vector as decoded here, None for one not held or not live."""
        out: list[npt.NDArray[np.float32] | None] = []
        for vid in ids:
            rows = self._rows_of(np.asarray([vid], dtype=np.int64))
            out.append(
                self._codes[rows[0]].astype(np.float32) * self._scales[rows[0]]
                if len(rows)
                else None
            )
        return out

    def live_after(
        self, last: int, limit: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Up to ``limit`` live vectors with ids above ``last``, decoded, in id order."""
        n = self._rows
        start = int(np.searchsorted(self._ids[:n], last, side="right"))
        rows = start + np.flatnonzero(self._live[start:n])[:limit]
        return self._ids[rows], self._codes[rows].astype(np.float32) * self._scales[rows, None]

    def live_count_after(self, last: int) -> int:
        n = self._rows
        start = int(np.searchsorted(self._ids[:n], last, side="right"))
        return int(self._live[start:n].sum())

    # -- keeping in step ---------------------------------------------------------------

    def append(
        self,
        ids: Sequence[int] | npt.NDArray[np.int64],
        docs: Sequence[int] | npt.NDArray[np.int64],
        codes: npt.NDArray[np.int8],
        scales: Sequence[float] | npt.NDArray[np.float32],
    ) -> None:
        """Add vectors (int8 ``codes``, one row each, decoded as ``codes * scale``) whose
        ids are ascending and above ``last``."""
        ids_a = np.asarray(ids, dtype=np.int64)
        n = len(ids_a)
        if not n:
            return
        codes = np.asarray(codes, dtype=np.int8)
        if codes.ndim != 2 or codes.shape[0] != n:
            raise ValueError(f"codes of shape {codes.shape} for {n} ids")
        if self._rows and codes.shape[1] != self._codes.shape[1]:
            raise ValueError(f"vectors of {codes.shape[1]} values in a matrix of {self.dim}")
        if ids_a[0] <= self._last or np.any(np.diff(ids_a) <= 0):
            raise ValueError("vector ids must ascend past the last one held")
        need = self._rows + n
        if self._codes.shape[0] < need or self._codes.shape[1] != codes.shape[1]:
            self._grow(max(need, 2 * self._codes.shape[0], 1024), codes.shape[1])
        at = slice(self._rows, need)
        scales_a = np.asarray(scales, dtype=np.float32)
        self._codes[at] = codes
        self._scales[at] = scales_a
        self._ids[at] = ids_a
        self._docs[at] = np.asarray(docs, dtype=np.int64)
        self._live[at] = True
        norms = np.sqrt(np.einsum("ij,ij->i", codes, codes, dtype=np.float64)) * scales_a
        self._norm = max(self._norm, float(norms.max()))
        self._rows = need
        self._last = int(ids_a[-1])

    def append_stored(self, rows: Iterable[Sequence[Any]]) -> None:
        """``append`` from table rows ``(id, doc, dtype, scale, blob)`` as ``encode`` wrote
        them (a float32 blob is cut to int8 here)."""
        ids, docs, codes, scales = [], [], [], []
        for vid, doc, dtype, scale, blob in rows:
            code, s = decode(dtype, scale, blob)
            ids.append(int(vid))
            docs.append(int(doc))
            codes.append(code)
            scales.append(s)
        if ids:
            self.append(ids, docs, np.stack(codes), scales)

    def keep_only(self, ids: Sequence[int] | npt.NDArray[np.int64]) -> int:
        """Mask every vector held whose id is not in ``ids`` (the table's ids now); the
        number masked."""
        n = self._rows
        gone = self._live[:n] & ~np.isin(self._ids[:n], np.asarray(ids, dtype=np.int64))
        return self._mask(gone)

    def drop_docs(self, docs: Iterable[int]) -> int:
        """Mask the vectors of these doc ids; the number masked."""
        n = self._rows
        gone = self._live[:n] & np.isin(self._docs[:n], np.fromiter(docs, dtype=np.int64))
        return self._mask(gone)

    def _mask(self, gone: npt.NDArray[np.bool_]) -> int:
        count = int(gone.sum())
        if count:
            if self.graph is not None:
                held = self._ids[: self._rows][gone]
                self.graph.mark_dead(int((held <= self.graph.last).sum()))
            self._live[: self._rows][gone] = False
            self._dead += count
            if self._dead > _SQUEEZE_AT * self._rows:
                self._squeeze()
        return count

    def _squeeze(self) -> None:
        n = self._rows
        keep = self._live[:n]
        m = int(keep.sum())
        for name in ("_codes", "_scales", "_ids", "_docs"):
            a: Any = getattr(self, name)
            a[:m] = a[:n][keep]
        self._live[:m] = True
        self._live[m:n] = False
        self._rows, self._dead = m, 0

    def _grow(self, size: int, dim: int) -> None:
        n = self._rows
        codes = np.zeros((size, dim), dtype=np.int8)
        scales = np.zeros(size, dtype=np.float32)
        ids = np.zeros(size, dtype=np.int64)
        docs = np.zeros(size, dtype=np.int64)
        live = np.zeros(size, dtype=np.bool_)
        if n:
            codes[:n] = self._codes[:n]
            scales[:n] = self._scales[:n]
            ids[:n] = self._ids[:n]
            docs[:n] = self._docs[:n]
            live[:n] = self._live[:n]
        self._codes, self._scales, self._ids, self._docs, self._live = (
            codes,
            scales,
            ids,
            docs,
            live,
        )

    # -- search ------------------------------------------------------------------------

    def nearest(
        self, query: Matrix, limit: int, *, docs: Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``limit`` doc ids whose best vector is nearest ``query`` (dot product with the
        decoded vector), best first, with that score; among ``docs`` if given. As the
        float32 product would rank them: the best ``3 k`` vectors (parts of one doc
        compete), each doc at its best."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        n = self._rows
        live = self._live[:n]
        count = len(self)  # kept as rows are masked: a sum over every row costs ~1 ms at 2M
        if docs is not None:
            live = live & np.isin(self._docs[:n], np.asarray(list(docs), dtype=np.int64))
            count = int(live.sum())
        if not count:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        want = min(count, limit * 3)
        if self.graph is not None and docs is None and len(self.graph):
            rows = self._graph_candidates(q, live, want)
        else:
            rows = self._candidates(q, live, want)
        exact = _rescore(self._codes[rows], self._scales[rows], q)
        order = np.argsort(-exact, kind="stable")[:want]
        docs_in_order = self._docs[rows[order]]
        # Each doc at its first (best) place, in that order: np.unique's first indices.
        first = np.sort(np.unique(docs_in_order, return_index=True)[1])[:limit]
        return list(zip(docs_in_order[first].tolist(), exact[order[first]].tolist(), strict=True))

    def _graph_candidates(
        self, query: npt.NDArray[np.float32], live: npt.NDArray[np.bool_], want: int
    ) -> npt.NDArray[np.intp]:
        """Rows to rescore: what the graph finds, and the best of the vectors it does not
        hold yet (an exact first pass over that tail)."""
        graph = self.graph
        assert graph is not None
        rows = self._rows_of(graph.search(query, want))
        n = self._rows
        start = int(np.searchsorted(self._ids[:n], graph.last, side="right"))
        held = int(live[start:n].sum())
        if held:
            rows = np.union1d(rows, self._candidates(query, live, min(want, held), start=start))
        return rows

    def _candidates(
        self,
        query: npt.NDArray[np.float32],
        live: npt.NDArray[np.bool_],
        want: int,
        *,
        start: int = 0,
    ) -> npt.NDArray[np.intp]:
        """Rows (from ``start`` on) that hold the ``want`` best live vectors for ``query`` (a
        superset: the first pass's error bound is kept on both sides of its cut-off)."""
        top = float(np.abs(query).max()) or 1.0
        qs = top / 127.0
        q8 = np.clip(np.rint(query / qs), -127, 127).astype(np.int8)
        bound = float(np.linalg.norm(query - q8.astype(np.float32) * np.float32(qs))) * self._norm
        n = self._rows
        approx = _dots(self._codes[start:n], q8) * (self._scales[start:n] * qs)
        approx[~live[start:n]] = -np.inf
        if want >= len(approx):
            return start + np.flatnonzero(live[start:n])
        cut = float(np.partition(approx, len(approx) - want)[len(approx) - want])
        # 1e-5: the float32 rounding of the first pass itself (scores are at most ~1).
        return start + np.flatnonzero(approx >= cut - 2 * bound - 1e-5)


def _rescore(
    codes: npt.NDArray[np.int8], scales: npt.NDArray[np.float32], query: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """Each decoded vector's (``codes * scale``) float32 dot product with ``query``. By
    ``einsum``'s own loop, not ``@``: a matrix-vector product goes to OpenBLAS, whose
    threads sleep between recalls and on two busy cores took 30-40 ms to wake for a
    few thousand rows (0.1 ms on one thread; benchmarks/RESULTS.md, issue 35)."""
    out: npt.NDArray[np.float32] = np.einsum(
        "ij,j->i", codes.astype(np.float32) * scales[:, None], query
    )
    return out


def _dots(codes: npt.NDArray[np.int8], q8: npt.NDArray[np.int8]) -> npt.NDArray[np.float32]:
    """Integer dot products of every row of ``codes`` with ``q8``, as float32 (exact: a
    sum of 384 products of int8 stays below float32's 2**24)."""
    if not len(codes):
        return np.zeros(0, dtype=np.float32)
    if _simd is not None:
        threads = 2 if len(codes) >= _TWO_THREADS_AT and (os.cpu_count() or 1) > 1 else 1
        out = np.asarray(
            _simd.cdist(q8[None, :], codes, metric="dot", dtype="int8", threads=threads)
        )
        return out.reshape(-1).astype(np.float32)
    qf = q8.astype(np.float32)
    out32 = np.empty(len(codes), dtype=np.float32)
    for at in range(0, len(codes), _BLOCK):
        out32[at : at + _BLOCK] = codes[at : at + _BLOCK].astype(np.float32) @ qf
    return out32


def encode(vec: Any, dtype: str = "int8") -> tuple[float, bytes]:
    """One vector as stored: ``(scale, blob)``; int8 scaled by its largest component, or
    float32 (scale 1)."""
    v = np.asarray(vec, dtype=np.float32)
    if dtype == "float32":
        return 1.0, v.tobytes()
    top = float(np.abs(v).max()) or 1.0
    scale = top / 127.0
    return scale, np.clip(np.rint(v / scale), -127, 127).astype(np.int8).tobytes()


def decode(dtype: str, scale: float, blob: bytes) -> tuple[npt.NDArray[np.int8], float]:
    """A stored vector as int8 codes and their scale (a float32 one is cut to int8)."""
    if dtype == "float32":
        s, raw = encode(np.frombuffer(blob, dtype=np.float32))
        return np.frombuffer(raw, dtype=np.int8), s
    return np.frombuffer(blob, dtype=np.int8), float(scale)
