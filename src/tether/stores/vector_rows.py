"""What both backends' ``VectorIndex`` (``sqlite.vectors``, ``postgres.vectors``) do alike,
written once over the dialect: counting the rows that take a vector and those that have
one, finding the rows without, the checks before a write and a search, reading the rows
found and putting them in score order. Storing the vectors (SQLite's ``executemany``;
PostgreSQL's COPY under an advisory lock, with pgvector's copies) and the nearest search
itself are each backend's."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec

from tether.records import Found, VecSource, VectorCounts
from tether.stores.dialect import Sql, T
from tether.stores.search import FOUND_COLUMNS, found_row

if TYPE_CHECKING:
    from tether.ports import Matrix

#: A batch of vectors to store: each row's doc id and the vectors of its parts.
Batch = Sequence[tuple[int, "Matrix"]]
#: Each row's text as it was embedded (None: any text).
Texts = Mapping[int, str] | None
#: Rows that never get a vector: tool calls are argument JSON, not something said.
TAKES_VECTOR = "(d.field IS NULL OR d.field != 'tool_call') AND d.text != ''"


def model_id(db: Sql, model: str) -> int | None:
    """The id of ``model``'s row in ``vec_model``, or None (no vector of it yet)."""
    row = db.one("SELECT id FROM vec_model WHERE name = ?", (model,))
    return None if row is None else int(row[0])


def by_score(found: Mapping[int, Found], best: Mapping[int, float]) -> list[Found]:
    """The rows found, each with its score from ``best`` (doc id -> cosine), best first."""
    return [
        msgspec.structs.replace(found[doc], score=best[doc])
        for doc in sorted(found, key=lambda doc: -best[doc])
    ]


class VectorRows:
    """The ``VectorIndex`` methods both backends share (a mixin); each backend runs a read
    (``_in_read``) and stores a batch of vectors (``_put``)."""

    def _in_read(self, doing: str, work: Callable[[Sql], T]) -> T:
        raise NotImplementedError

    def _among(self, docs: Sequence[int]) -> tuple[str, Sequence[object]]:
        """SQL over ``d.id`` choosing the rows ``docs`` (never empty), and its parameters."""
        raise NotImplementedError

    def _put(self, model: str, dim: int, rows: Batch, texts: Texts) -> None:
        """Store ``rows`` (none empty; every vector ``dim`` wide) for the rows still there
        (and, given ``texts``, still holding that text)."""
        raise NotImplementedError

    def vector_counts(self, model: str) -> VectorCounts:
        return self._in_read("counting vectors", lambda db: _counts(db, model))

    def missing_vectors(self, model: str, limit: int, *, after: int = 0) -> list[VecSource]:
        return self._in_read(
            "finding rows without vectors", lambda db: _missing(db, model, limit, after)
        )

    def put_vectors(self, model: str, rows: Batch, *, texts: Texts = None) -> None:
        if rows:
            self._put(model, int(rows[0][1].shape[1]), rows, texts)

    def _rows_of(self, docs: Sequence[int]) -> dict[int, Found]:
        """The index rows ``docs`` (unscored), by doc id."""
        if not docs:
            return {}
        among, params = self._among(docs)
        rows = self._in_read(
            "reading rows found by vector",
            lambda db: db.all(f"SELECT {FOUND_COLUMNS}, 0.0 FROM doc AS d WHERE {among}", params),
        )
        return {int(row[0]): found_row(row) for row in rows}


def _counts(db: Sql, model: str) -> VectorCounts:
    total = db.one(f"SELECT count(*) FROM doc AS d WHERE {TAKES_VECTOR}")[0]
    mid = model_id(db, model)
    done = 0
    if mid is not None:
        done = db.one("SELECT count(DISTINCT v.doc) FROM doc_vec AS v WHERE v.model = ?", (mid,))[0]
    return VectorCounts(done=int(done), total=int(total))


def _missing(db: Sql, model: str, limit: int, after: int) -> list[VecSource]:
    mid = model_id(db, model)
    rows = db.all(
        f"SELECT d.id, d.text, d.field FROM doc AS d WHERE d.id > ? AND {TAKES_VECTOR}"
        " AND NOT EXISTS (SELECT 1 FROM doc_vec AS v WHERE v.doc = d.id AND v.model = ?)"
        " ORDER BY d.id LIMIT ?",
        (after, -1 if mid is None else mid, limit),
    )
    return [VecSource(doc=int(row[0]), text=str(row[1]), field=row[2]) for row in rows]
