"""Sentence vectors of the embedded store's indexed rows (``tether.ports.VectorIndex``).

Layout (migration 8): ``doc_vec`` holds one vector per part of a ``doc`` row, tagged with
the model that made it (``vec_model``: name and dimension), as int8 with a per-vector
scale (a quarter of float32's size; cosine similarities move by about 0.002, too little
to reorder what recall keeps) or as float32. Triggers drop a row's vectors when the row
is deleted or its text rewritten, and count it in ``stat.vec_gone``.

Search is brute force: every vector of the model is held in memory as one float32 matrix
(1.5 GB at a million rows), loaded on the first search and topped up on each from the
vectors added since (by ``doc_vec.id``); a change of ``vec_gone`` (a row gone) or of the
model reloads it whole. One matrix product and a partial sort beat an approximate index
at this size on two cores (benchmarks/RESULTS.md), and need no extension in SQLite. The
layout is portable (PostgreSQL can hold the same table, or pgvector where the server has
it) behind the port.

Its own connection to the store's file (after ``SqliteStore`` has migrated it), so
embedding and searching never wait on the store's lock.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from tether.errors import StoreError
from tether.records import Found, VecSource, VectorCounts
from tether.stores import sqlite_search as fts
from tether.stores.migrations import MIGRATIONS
from tether.stores.sqlite_file import SqliteFile, begun

if TYPE_CHECKING:
    from tether.ports import Matrix

#: Rows that never get a vector: tool calls are argument JSON, not something said.
_TAKES_VECTOR = "(d.field IS NULL OR d.field != 'tool_call') AND d.text != ''"
#: How vectors are written ('int8' or 'float32'; both are read).
DTYPE = "int8"
#: Vector rows read per query when loading the matrix.
_LOAD_BATCH = 20_000


class SqliteVectors(SqliteFile):
    """``VectorIndex`` over the store's SQLite file. One lock serialises its use."""

    busy_timeout_ms = 10_000

    def __init__(self, path: Path | str) -> None:
        self._model: str | None = None
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._docs = np.zeros(0, dtype=np.int64)
        self._rows = 0  # rows of _matrix in use (it grows by doubling)
        self._last = 0  # highest doc_vec.id loaded
        self._gone = -1  # stat.vec_gone when loaded
        self._cache = threading.Lock()
        super().__init__(path)

    def _setup(self) -> None:
        with self._errors("cannot open the vectors"):
            c = self._c()
            self._busy_timeout_and_wal(c)
            version = int(c.execute("PRAGMA user_version").fetchone()[0])
            if version < 7:
                raise StoreError(
                    self.path, f"the store's schema is at {version}: open it with tether first"
                )
            if version > len(MIGRATIONS):
                raise StoreError(self.path, f"the store's schema {version} is newer than ours")

    @contextlib.contextmanager
    def _read(self, doing: str) -> Iterator[sqlite3.Connection]:
        with self._lock, self._errors(doing):
            yield self._c()

    @contextlib.contextmanager
    def _write(self, doing: str) -> Iterator[sqlite3.Connection]:
        with self._lock, self._errors(doing):
            c = self._c()
            c.execute("PRAGMA synchronous = NORMAL")  # rebuilt from the index if lost
            with begun(c):
                yield c

    # -- what needs a vector ---------------------------------------------------------

    def vector_counts(self, model: str) -> VectorCounts:
        with self._read("counting vectors") as c:
            total = c.execute(f"SELECT count(*) FROM doc AS d WHERE {_TAKES_VECTOR}").fetchone()[0]
            mid = _model_id(c, model)
            done = 0
            if mid is not None:
                done = c.execute(
                    "SELECT count(DISTINCT v.doc) FROM doc_vec AS v WHERE v.model = ?", (mid,)
                ).fetchone()[0]
        return VectorCounts(done=int(done), total=int(total))

    def missing_vectors(self, model: str, limit: int, *, after: int = 0) -> list[VecSource]:
        with self._read("finding rows without vectors") as c:
            mid = _model_id(c, model)
            rows = c.execute(
                f"SELECT d.id, d.text, d.field FROM doc AS d WHERE d.id > ? AND {_TAKES_VECTOR}"
                " AND NOT EXISTS (SELECT 1 FROM doc_vec AS v WHERE v.doc = d.id AND v.model = ?)"
                " ORDER BY d.id LIMIT ?",
                (after, -1 if mid is None else mid, limit),
            ).fetchall()
        return [VecSource(doc=int(r[0]), text=str(r[1]), field=r[2]) for r in rows]

    def put_vectors(self, model: str, rows: Sequence[tuple[int, Matrix]]) -> None:
        if not rows:
            return
        dim = int(rows[0][1].shape[1])
        with self._write("storing vectors") as c:
            mid = _model_id(c, model)
            if mid is None:
                cur = c.execute("INSERT INTO vec_model (name, dim) VALUES (?, ?)", (model, dim))
                mid = int(cur.lastrowid or 0)
            docs = [doc for doc, _ in rows]
            alive = _alive(c, docs)
            # A row's earlier vectors (another model's, or a lost race with another
            # indexer) are replaced whole; a same-model one gone counts as gone.
            replaced = 0
            for doc in docs:
                replaced += c.execute(
                    "DELETE FROM doc_vec WHERE doc = ? AND model = ?", (doc, mid)
                ).rowcount
                c.execute("DELETE FROM doc_vec WHERE doc = ?", (doc,))
            if replaced:
                c.execute("UPDATE stat SET value = value + 1 WHERE name = 'vec_gone'")
            c.executemany(
                "INSERT INTO doc_vec (doc, part, model, dtype, scale, vec)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    (doc, part, mid, DTYPE, *_encode(vec))
                    for doc, vectors in rows
                    if doc in alive
                    for part, vec in enumerate(vectors)
                ),
            )

    # -- search ------------------------------------------------------------------------

    def nearest(
        self, model: str, query: Matrix, k: int, *, only: Sequence[str] | None = None
    ) -> list[Found]:
        if k < 1:
            raise ValueError("k must be at least 1")
        with self._cache:
            self._refresh(model)
            matrix, docs = self._matrix[: self._rows], self._docs[: self._rows]
            if only is not None:
                keep = np.isin(docs, np.array(self._refs(only), dtype=np.int64))
                matrix, docs = matrix[keep], docs[keep]
            if not len(docs):
                return []
            scores = matrix @ np.asarray(query, dtype=np.float32).reshape(-1)
            # Parts of one row compete: take more than k, keep each row's best.
            want = min(len(scores), k * 3)
            top = np.argpartition(-scores, want - 1)[:want]
            top = top[np.argsort(-scores[top], kind="stable")]
        best: dict[int, float] = {}
        for i in top:
            doc = int(docs[i])
            if doc not in best:
                best[doc] = float(scores[i])
        chosen = list(best)[:k]
        found = self._rows_of(chosen)
        return [
            msgspec.structs.replace(found[d], score=best[d])
            for d in sorted(found, key=lambda d: -best[d])
        ]

    def _refs(self, only: Sequence[str]) -> list[int]:
        with self._read("reading rows by ref") as c:
            return [
                int(r[0])
                for r in c.execute(
                    "SELECT id FROM doc WHERE ref IN (SELECT value FROM json_each(?))",
                    (_json_list(only),),
                )
            ]

    def _rows_of(self, docs: Sequence[int]) -> dict[int, Found]:
        if not docs:
            return {}
        with self._read("reading rows found by vector") as c:
            rows = c.execute(
                "SELECT d.id, d.kind, d.session, d.turn, d.field, d.tainted, d.ref, d.time,"
                " d.text, 0.0 FROM doc AS d WHERE d.id IN (SELECT value FROM json_each(?))",
                (_json_list(docs),),
            ).fetchall()
        return {int(r[0]): fts._found(r) for r in rows}

    def _refresh(self, model: str) -> None:
        """Bring the in-memory matrix in step with the table (under ``_cache``)."""
        with self._read("loading vectors") as c:
            gone = int(c.execute("SELECT value FROM stat WHERE name = 'vec_gone'").fetchone()[0])
            mid = _model_id(c, model)
            if mid is None:
                self._reset(model, gone)
                return
            if model != self._model or gone != self._gone:
                self._reset(model, gone)
            while True:
                batch = c.execute(
                    "SELECT id, doc, dtype, scale, vec FROM doc_vec"
                    " WHERE model = ? AND id > ? ORDER BY id LIMIT ?",
                    (mid, self._last, _LOAD_BATCH),
                ).fetchall()
                if not batch:
                    return
                self._append(batch)
                self._last = int(batch[-1][0])

    def _reset(self, model: str, gone: int) -> None:
        self._model, self._gone = model, gone
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._docs = np.zeros(0, dtype=np.int64)
        self._rows = self._last = 0

    def _append(self, batch: Sequence[Sequence[Any]]) -> None:
        vectors = np.stack([_decode(r[2], r[3], r[4]) for r in batch])
        need = self._rows + len(batch)
        if self._matrix.shape[0] < need or self._matrix.shape[1] != vectors.shape[1]:
            size = max(need, 2 * self._matrix.shape[0], 1024)
            grown = np.zeros((size, vectors.shape[1]), dtype=np.float32)
            docs = np.zeros(size, dtype=np.int64)
            if self._rows:
                grown[: self._rows] = self._matrix[: self._rows]
                docs[: self._rows] = self._docs[: self._rows]
            self._matrix, self._docs = grown, docs
        self._matrix[self._rows : need] = vectors
        self._docs[self._rows : need] = [int(r[1]) for r in batch]
        self._rows = need


def _json_list(items: Sequence[object]) -> str:
    return json.dumps(list(items))


def _model_id(c: sqlite3.Connection, model: str) -> int | None:
    row = c.execute("SELECT id FROM vec_model WHERE name = ?", (model,)).fetchone()
    return None if row is None else int(row[0])


def _alive(c: sqlite3.Connection, docs: Sequence[int]) -> set[int]:
    return {
        int(r[0])
        for r in c.execute(
            "SELECT id FROM doc WHERE id IN (SELECT value FROM json_each(?))", (_json_list(docs),)
        )
    }


def _encode(vec: Any) -> tuple[float, bytes]:
    v = np.asarray(vec, dtype=np.float32)
    if DTYPE == "float32":
        return 1.0, v.tobytes()
    top = float(np.abs(v).max()) or 1.0
    scale = top / 127.0
    return scale, np.clip(np.rint(v / scale), -127, 127).astype(np.int8).tobytes()


def _decode(dtype: str, scale: float, blob: bytes) -> Any:
    if dtype == "float32":
        return np.frombuffer(blob, dtype=np.float32)
    return np.frombuffer(blob, dtype=np.int8).astype(np.float32) * np.float32(scale)
