"""Sentence vectors of the PostgreSQL store's indexed rows (``tether.ports.VectorIndex``).

Layout (``postgres.schema``'s vectors migration): the SQLite one, in the owner's schema.
``doc_vec`` holds one vector per part of a ``doc`` row (int8 with a per-vector scale, in
``bytea``, encoded as ``sqlite.vectors`` does, so both backends hold the same numbers),
tagged with its model (``vec_model``); triggers drop a row's vectors when the row is
deleted or its text changes, and count it in ``stat.vec_gone``.

Search, portable (every server): as on SQLite, every vector of the model is held in
memory (``vector_matrix.VectorMatrix``, shared with SQLite), loaded on the first search
and topped up from the vectors added since (by ``doc_vec.id``); when ``vec_gone`` moves,
the ids still there are read and the others masked; a model change reloads it. Writes
of vectors take an advisory lock, so ids become visible in id order and a top-up never
skips one committed late.

Search with pgvector (a server whose ``vector`` extension is installed in the database,
or available and creatable by this role, checked on open: ``pgvector_schema``): each
vector is also kept as a pgvector ``vector`` in ``vec_ann`` (a row per ``doc_vec`` row,
gone with it), with an HNSW index per model (a partial index over ``vec::vector(dim)``),
and the search is ``ORDER BY ... <=> query`` in the server. Only models whose every
vector was written that way (``vec_model.ann``: made while the extension was there) are
searched so; an older model keeps the in-memory search until the next model change. The
test server has no pgvector: that path's detection is tested, its search is not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
from psycopg import sql

from tether.errors import StoreError
from tether.records import Found
from tether.stores.dialect import POSTGRES, Sql, T
from tether.stores.postgres import schema
from tether.stores.postgres.conn import PgStore
from tether.stores.search import positive
from tether.stores.sqlite.vectors import DTYPE
from tether.stores.table_matrix import TableMatrix
from tether.stores.vector_graph import GRAPH_FROM
from tether.stores.vector_matrix import VectorMatrix, encode
from tether.stores.vector_rows import Batch, Texts, VectorRows, by_score

if TYPE_CHECKING:
    from tether.ports import Matrix, Progress

Conn = psycopg.Connection[Any]
#: Vector rows read per query when loading the matrix.
_LOAD_BATCH = 20_000
#: The migration level that has the vector tables.
LEVEL = schema.MIGRATIONS.index(schema._VECTORS) + 1
#: The advisory lock every write of ``doc_vec`` takes (ids visible in id order).
VECTORS_LOCK = "vectors"
#: Candidates the server's HNSW search returns per row asked for (parts of a row compete).
_ANN_WIDTH = 3


def pgvector_schema(conn: Conn, *, create: bool = True) -> str | None:
    """The schema of the database's ``vector`` extension, or None (not on this server, or
    not creatable by this role). With ``create``, an available one is created."""
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n"
        " ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    ).fetchone()
    if row is not None:
        return str(row[0])
    available = conn.execute(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
    ).fetchone()
    if available is None or not create:
        return None
    try:
        with conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
    except psycopg.Error:  # no privilege: the portable layout serves
        return None
    return pgvector_schema(conn, create=False)


def ann_ddl(ext: str) -> sql.Composed:
    """The pgvector side table (``ext``: the extension's schema), idempotent."""
    return sql.SQL(
        "CREATE TABLE IF NOT EXISTS vec_ann ("
        " doc BIGINT NOT NULL, part INTEGER NOT NULL, model INTEGER NOT NULL,"
        " vec {}.vector NOT NULL, PRIMARY KEY (doc, part),"
        " FOREIGN KEY (doc, part) REFERENCES doc_vec (doc, part) ON DELETE CASCADE)"
    ).format(sql.Identifier(ext))


def ann_index_ddl(ext: str, model: int, dim: int) -> sql.Composed:
    """The HNSW index of one model's vectors (a partial expression index: one dimension)."""
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS {} ON vec_ann USING hnsw"
        " ((vec::{}.vector({})) {}.vector_cosine_ops) WHERE model = {}"
    ).format(
        sql.Identifier(f"vec_ann_m{model}"),
        sql.Identifier(ext),
        sql.Literal(dim),
        sql.Identifier(ext),
        sql.Literal(model),
    )


def ann_query(ext: str, dim: int, *, only: bool) -> sql.Composed:
    """The server-side nearest search: (doc, cosine) of the nearest parts; parameters
    (query, model, [refs,] query, limit), the query vector as pgvector's text."""
    vector = sql.SQL("{}.vector({})").format(sql.Identifier(ext), sql.Literal(dim))
    distance = sql.SQL("(a.vec::{v}) OPERATOR({e}.<=>) (%s::{v})").format(
        v=vector, e=sql.Identifier(ext)
    )
    among = sql.SQL(" AND a.doc IN (SELECT id FROM doc WHERE ref = ANY(%s))" if only else "")
    return sql.SQL(
        "SELECT a.doc, 1 - {d} FROM vec_ann AS a WHERE a.model = %s{among} ORDER BY {d} LIMIT %s"
    ).format(d=distance, among=among)


def vector_text(vec: Any) -> str:
    """pgvector's text form of one vector."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vec, dtype=np.float32)) + "]"


class PostgresVectors(VectorRows):
    """``VectorIndex`` in one owner's schema (after ``PostgresStore`` migrated it; what
    both backends share is ``vector_rows``)."""

    def __init__(self, url: str, owner: str, *, graph_from: int = GRAPH_FROM) -> None:
        self.pg = PgStore(url, owner, migrate=False, max_size=2)
        self.path = self.pg.where
        try:
            if self.pg.level < LEVEL:
                raise StoreError(
                    self.path, f"the schema is at {self.pg.level}: open it with tether first"
                )
            #: The pgvector extension's schema, or None: the portable in-memory search.
            self.ann: str | None = self.pg.run("looking for pgvector", self._find_ann)
        except BaseException:
            self.pg.close()
            raise
        self._cache = threading.Lock()
        # The model's vectors (under ``_cache``); its graph is kept in memory only (a
        # server has no file beside the store: rebuilt after a restart).
        self._memory = TableMatrix(graph_from=graph_from)

    def _find_ann(self, conn: Conn) -> str | None:
        ext = pgvector_schema(conn)
        if ext is not None:  # under the migrations' lock: two opening at once take turns
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"tether:{self.pg.schema}",),
            )
            conn.execute(ann_ddl(ext))
        return ext

    def close(self) -> None:
        self.pg.close()

    def __enter__(self) -> PostgresVectors:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _in_read(self, doing: str, work: Callable[[Sql], T]) -> T:
        result: T = self.pg.run(doing, lambda conn: work(Sql(conn, POSTGRES)), write=False)
        return result

    # -- storing vectors ---------------------------------------------------------------

    def _put(self, model: str, dim: int, rows: Batch, texts: Texts) -> None:
        docs = [doc for doc, _ in rows]

        def work(conn: Conn) -> None:
            mid, ann = self._model_for_write(conn, model, dim)
            # The rows still there, held against a delete or rewrite until this commits
            # (whose trigger then drops these vectors).
            alive = {
                int(r[0])
                for r in conn.execute(
                    "SELECT id, text FROM doc WHERE id = ANY(%s) ORDER BY id FOR SHARE", (docs,)
                )
                if texts is None or texts.get(int(r[0])) == r[1]
            }
            # A row's earlier vectors (another model's, or a lost race with another
            # indexer) are replaced whole; a same-model one gone counts as gone.
            replaced = conn.execute(
                "DELETE FROM doc_vec WHERE doc = ANY(%s) RETURNING model", (docs,)
            ).fetchall()
            if any(int(r[0]) == mid for r in replaced):
                conn.execute("UPDATE stat SET value = value + 1 WHERE name = 'vec_gone'")
            kept = [(d, v) for d, v in rows if d in alive]
            with conn.cursor().copy(
                "COPY doc_vec (doc, part, model, dtype, scale, vec) FROM STDIN"
            ) as copy:
                for doc, vectors in kept:
                    for part, vec in enumerate(vectors):
                        copy.write_row((doc, part, mid, DTYPE, *encode(vec, DTYPE)))
            if ann:
                with conn.cursor().copy("COPY vec_ann (doc, part, model, vec) FROM STDIN") as copy:
                    for doc, vectors in kept:
                        for part, vec in enumerate(vectors):
                            copy.write_row((doc, part, mid, vector_text(vec)))

        self.pg.run("storing vectors", work, hold=f"{self.pg.schema}/{VECTORS_LOCK}")

    def _model_for_write(self, conn: Conn, model: str, dim: int) -> tuple[int, bool]:
        found = _model(conn, model)
        if found is not None:
            return found[0], found[1] and self.ann is not None
        row = conn.execute(
            "INSERT INTO vec_model (name, dim, ann) VALUES (%s, %s, %s) RETURNING id",
            (model, dim, self.ann is not None),
        ).fetchone()
        assert row is not None
        mid = int(row[0])
        if self.ann is not None:
            conn.execute(ann_index_ddl(self.ann, mid, dim))
        return mid, self.ann is not None

    # -- search ------------------------------------------------------------------------

    def nearest(
        self, model: str, query: Matrix, limit: int, *, only: Sequence[str] | None = None
    ) -> list[Found]:
        positive(limit)
        best = self.pg.run(
            "searching vectors",
            lambda conn: self._best(conn, model, query, limit, only),
            write=False,
        )
        return by_score(self._rows_of(list(best)), best)

    def _best(
        self, conn: Conn, model: str, query: Matrix, limit: int, only: Sequence[str] | None
    ) -> dict[int, float]:
        mid = _model(conn, model)
        if mid is None:
            return {}
        if mid[1] and self.ann is not None:
            return self._best_ann(conn, mid[0], query, limit, only)
        among = None
        if only is not None:
            among = [
                int(r[0])
                for r in conn.execute("SELECT id FROM doc WHERE ref = ANY(%s)", (list(only),))
            ]
        with self._cache:
            matrix = self._refresh(conn, model, mid[0])
            return dict(matrix.nearest(query, limit, docs=among))

    def maintain(self, model: str, *, progress: Progress | None = None) -> int:
        mid = self.pg.run("reading the vector model", lambda conn: _model(conn, model), write=False)
        if mid is None or (mid[1] and self.ann is not None):
            return 0  # pgvector's own index serves this model
        return self._memory.maintain(
            self._cache,
            lambda: self.pg.run(
                "loading vectors", lambda conn: self._refresh(conn, model, mid[0]), write=False
            ),
            progress=progress,
        )

    def _best_ann(
        self, conn: Conn, mid: int, query: Matrix, limit: int, only: Sequence[str] | None
    ) -> dict[int, float]:
        assert self.ann is not None
        q = vector_text(np.asarray(query, dtype=np.float32).reshape(-1))
        dim = _one(conn, "SELECT dim FROM vec_model WHERE id = %s", (mid,))
        params: list[object] = [q, mid, *([list(only)] if only is not None else []), q]
        rows = conn.execute(
            ann_query(self.ann, dim, only=only is not None), [*params, limit * _ANN_WIDTH]
        ).fetchall()
        best: dict[int, float] = {}
        for doc, cos in rows:
            best.setdefault(int(doc), float(cos))
        return dict(list(best.items())[:limit])

    def _among(self, docs: Sequence[int]) -> tuple[str, Sequence[object]]:
        return "d.id = ANY(?)", (list(docs),)

    def _refresh(self, conn: Conn, model: str, mid: int) -> VectorMatrix:
        """The in-memory matrix in step with the table (under ``_cache``, in the search's
        snapshot; see ``table_matrix.TableMatrix``)."""
        return self._memory.sync(
            model,
            _one(conn, "SELECT value FROM stat WHERE name = 'vec_gone'", ()),
            live_ids=lambda last: (
                r[0]
                for r in conn.execute(
                    "SELECT id FROM doc_vec WHERE model = %s AND id <= %s", (mid, last)
                )
            ),
            added=lambda last: [
                (r[0], r[1], r[2], r[3], bytes(r[4]))
                for r in conn.execute(
                    # By id (the primary key), the model filtered, not through (model, doc).
                    "SELECT id, doc, dtype, scale, vec FROM doc_vec"
                    " WHERE id > %s AND model + 0 = %s ORDER BY id LIMIT %s",
                    (last, mid, _LOAD_BATCH),
                ).fetchall()
            ],
        )


def _one(conn: Conn, query: str, params: Sequence[object]) -> int:
    row = conn.execute(query.encode(), params).fetchone()
    return 0 if row is None else int(row[0])


def _model(conn: Conn, model: str) -> tuple[int, bool] | None:
    """The model's id and whether its vectors all have pgvector copies."""
    row = conn.execute("SELECT id, ann FROM vec_model WHERE name = %s", (model,)).fetchone()
    return None if row is None else (int(row[0]), bool(row[1]))
