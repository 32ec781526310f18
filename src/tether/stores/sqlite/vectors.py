"""Sentence vectors of the embedded store's indexed rows (``tether.ports.VectorIndex``).

Layout (migration 8): ``doc_vec`` holds one vector per part of a ``doc`` row, tagged with
the model that made it (``vec_model``: name and dimension), as int8 with a per-vector
scale (a quarter of float32's size; cosine similarities move by about 0.002, too little
to reorder what recall keeps) or as float32. Triggers drop a row's vectors when the row
is deleted or its text rewritten, and count it in ``stat.vec_gone``.

Search is brute force and exact over every vector of the model held in memory as int8
(``vector_matrix.VectorMatrix``: 384 MB at a million rows), loaded on the first search
and topped up on each from the vectors added since (by ``doc_vec.id``); a change of
``vec_gone`` (a row gone) masks the vectors no longer in the table (their ids read, not
the vectors); a change of model reloads. No extension in SQLite. The layout is portable
(PostgreSQL can hold the same table, or pgvector where the server has it) behind the port.

From ``vector_graph.GRAPH_FROM`` vectors, ``maintain`` (the indexer's worker thread and
``memory reindex --vectors``, never a query) grows an approximate graph over them, saved
beside the store as ``<store file>.graph-<model hash>`` (a cache: a missing or foreign one
is rebuilt) and on ``close``; searches then go through it (``vector_matrix``).

Its own connection to the store's file (after ``SqliteStore`` has migrated it), so
embedding and searching never wait on the store's lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tether.errors import StoreError
from tether.records import Found
from tether.stores.dialect import SQLITE, Sql, T
from tether.stores.search import positive
from tether.stores.sqlite.file import SqliteFile, begun
from tether.stores.sqlite.migrations import MIGRATIONS
from tether.stores.table_matrix import TableMatrix
from tether.stores.vector_graph import GRAPH_FROM
from tether.stores.vector_matrix import VectorMatrix, encode
from tether.stores.vector_rows import Batch, Texts, VectorRows, by_score, model_id

if TYPE_CHECKING:
    from tether.ports import Matrix, Progress

#: How vectors are written ('int8' or 'float32'; both are read).
DTYPE = "int8"
#: Vector rows read per query when loading the matrix.
_LOAD_BATCH = 20_000


class SqliteVectors(VectorRows, SqliteFile):
    """``VectorIndex`` over the store's SQLite file. One lock serialises its use (what
    both backends share is ``vector_rows``)."""

    busy_timeout_ms = 10_000

    def __init__(self, path: Path | str, *, graph_from: int = GRAPH_FROM) -> None:
        self._matrix = TableMatrix(graph_file=self.graph_file, graph_from=graph_from)
        self._cache = threading.Lock()
        super().__init__(path)

    def graph_file(self, model: str) -> Path:
        """Where the approximate graph over ``model``'s vectors is saved."""
        digest = hashlib.sha256(model.encode()).hexdigest()[:12]
        return self.path.with_name(f"{self.path.name}.graph-{digest}")

    def close(self) -> None:
        with self._cache:
            self._matrix.save_graph()
        super().close()

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

    def _in_read(self, doing: str, work: Callable[[Sql], T]) -> T:
        with self._read(doing) as c:
            return work(Sql(c, SQLITE))

    # -- storing vectors ---------------------------------------------------------------

    def _put(self, model: str, dim: int, rows: Batch, texts: Texts) -> None:
        with self._write("storing vectors") as c:
            mid = model_id(Sql(c, SQLITE), model)
            if mid is None:
                cur = c.execute("INSERT INTO vec_model (name, dim) VALUES (?, ?)", (model, dim))
                mid = int(cur.lastrowid or 0)
            docs = [doc for doc, _ in rows]
            alive = _alive(c, docs, texts)
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
                    (doc, part, mid, DTYPE, *encode(vec, DTYPE))
                    for doc, vectors in rows
                    if doc in alive
                    for part, vec in enumerate(vectors)
                ),
            )

    # -- search ------------------------------------------------------------------------

    def nearest(
        self, model: str, query: Matrix, limit: int, *, only: Sequence[str] | None = None
    ) -> list[Found]:
        positive(limit)
        with self._cache:
            matrix = self._refresh(model)
            docs = None if only is None else self._refs(only)
            best = dict(matrix.nearest(query, limit, docs=docs))
        return by_score(self._rows_of(list(best)), best)

    def maintain(self, model: str, *, progress: Progress | None = None) -> int:
        return self._matrix.maintain(self._cache, lambda: self._refresh(model), progress=progress)

    def _refs(self, only: Sequence[str]) -> list[int]:
        with self._read("reading rows by ref") as c:
            return [
                int(r[0])
                for r in c.execute(
                    "SELECT id FROM doc WHERE ref IN (SELECT value FROM json_each(?))",
                    (_json_list(only),),
                )
            ]

    def _among(self, docs: Sequence[int]) -> tuple[str, Sequence[object]]:
        return "d.id IN (SELECT value FROM json_each(?))", (_json_list(docs),)

    def _refresh(self, model: str) -> VectorMatrix:
        """The in-memory matrix in step with the table (under ``_cache``; see
        ``table_matrix.TableMatrix``)."""
        with self._read("loading vectors") as c:
            gone = int(c.execute("SELECT value FROM stat WHERE name = 'vec_gone'").fetchone()[0])
            mid = model_id(Sql(c, SQLITE), model)
            if mid is None:
                self._matrix.forget()
                return self._matrix.matrix
            return self._matrix.sync(
                model,
                gone,
                live_ids=lambda last: (
                    r[0]
                    for r in c.execute(
                        "SELECT id FROM doc_vec WHERE model = ? AND id <= ?", (mid, last)
                    )
                ),
                added=lambda last: c.execute(
                    # By rowid (``+model``: not the (model, doc) index, which would
                    # sort every vector of the model on each query).
                    "SELECT id, doc, dtype, scale, vec FROM doc_vec"
                    " WHERE id > ? AND +model = ? ORDER BY id LIMIT ?",
                    (last, mid, _LOAD_BATCH),
                ).fetchall(),
            )


def _json_list(items: Sequence[object]) -> str:
    return json.dumps(list(items))


def _alive(
    conn: sqlite3.Connection, docs: Sequence[int], texts: Mapping[int, str] | None
) -> set[int]:
    """The doc ids still indexed (and, given ``texts``, still holding that text)."""
    return {
        int(r[0])
        for r in conn.execute(
            "SELECT id, text FROM doc WHERE id IN (SELECT value FROM json_each(?))",
            (_json_list(docs),),
        )
        if texts is None or texts.get(int(r[0])) == r[1]
    }
