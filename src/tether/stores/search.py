"""What both stores' searches share: the columns of a found row and their decoding,
``between`` (a period's log rows, no text index needed), and the store's four search
methods (``Searches``), each one read transaction around the backend's SQL. Matching and
ranking are each backend's own (``TextSearch``): ``sqlite.search`` (FTS5's bm25, lower is
better: its scores come negated) and ``postgres.search`` (the same bm25 over a
``tsvector``, higher is better)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from tether.records import Found, Hit, SearchQuery
from tether.stores.dialect import Repository, Sql, from_micros, micros

#: A found row's columns (``d`` is ``doc``); a score follows them.
FOUND_COLUMNS = "d.id, d.kind, d.session, d.turn, d.field, d.tainted, d.ref, d.time, d.text"


def positive(limit: int) -> None:
    if limit < 1:
        raise ValueError("limit must be at least 1")


def located(kind: str, session: Any, turn: Any, ref: Any) -> tuple[Any, Any, Any, Any]:
    """(kind, session, turn, ref) of a found row: a log row's ref is
    ``turn:<session>:<turn>``; a summary unit (kind ``summary`` with a ref:
    ``core.recall.summaries``) keeps its session and ref, has no turn, and is shown as
    ``session-summary`` / ``epoch-summary``; any other row has its own ref and no
    session or turn."""
    if kind == "summary" and ref is not None:
        return _UNIT_KIND[":e" in ref], session, None, ref
    if kind in ("turn", "summary"):
        return kind, session, turn, f"turn:{session}:{turn}"
    return kind, None, None, ref


#: A unit's kind by whether its ref names an epoch (``summary:<session>:e<n>:...``).
_UNIT_KIND = {True: "epoch-summary", False: "session-summary"}


def found_row(row: Sequence[Any], sign: float = 1.0) -> Found:
    """``FOUND_COLUMNS`` and a score (times ``sign``: -1 for FTS5's bm25) as a ``Found``."""
    doc_id, kind, session, turn, field, tainted, ref, time, text, score = row
    kind, session, turn, ref = located(kind, session, turn, ref)
    return Found(
        id=doc_id,
        kind=kind,
        session=session,
        turn=turn,
        field=field,
        tainted=bool(tainted),
        ref=ref,
        time=from_micros(time),
        text=text,
        score=sign * float(score),
    )


def hit(found: Found) -> Hit:
    return Hit(
        kind=found.kind,
        session=found.session,
        turn=found.turn,
        text=found.text,
        tag="memory-tainted" if found.tainted else "memory",
        score=found.score,
        ref=found.ref,
    )


def between(db: Sql, start: datetime, end: datetime, limit: int) -> list[Found]:
    """The first ``limit`` log rows (user and assistant) written in ``[start, end)``."""
    positive(limit)
    rows = db.all(
        f"SELECT {FOUND_COLUMNS}, 0.0 FROM doc AS d WHERE d.kind = 'turn'"
        " AND d.field IN ('user', 'assistant') AND d.time >= ? AND d.time < ?"
        " ORDER BY d.time, d.id LIMIT ?",
        (micros(start), micros(end), limit),
    )
    return [found_row(r) for r in rows]


@dataclass(frozen=True)
class TextSearch:
    """A backend's SQL of searching its text index, each function over the driver's
    connection inside a read transaction (``sqlite.search.FTS``, ``postgres.search.TSV``)."""

    search: Callable[[Any, SearchQuery, int], list[Hit]]
    #: (connection, query, k, aside, only)
    search_terms: Callable[[Any, SearchQuery, int, float, Sequence[str] | None], list[Found]]
    #: (connection, query, k, within, only)
    newest: Callable[[Any, SearchQuery, int, int | None, Sequence[str] | None], list[Found]]
    count_matches: Callable[[Any, Sequence[SearchQuery], int], list[int]]


class Searches(Repository):
    """The ``TextIndex`` searches of both stores (a mixin): each runs its backend's
    ``text_search`` in one read transaction."""

    text_search: ClassVar[TextSearch]

    def search(self, query: SearchQuery, limit: int) -> list[Hit]:
        return self._in_read("searching", lambda db: self.text_search.search(db.c, query, limit))

    def search_terms(
        self, query: SearchQuery, limit: int, *, aside: float, only: Sequence[str] | None = None
    ) -> list[Found]:
        return self._in_read(
            "searching", lambda db: self.text_search.search_terms(db.c, query, limit, aside, only)
        )

    def newest(
        self,
        query: SearchQuery,
        limit: int,
        *,
        within: int | None = None,
        only: Sequence[str] | None = None,
    ) -> list[Found]:
        return self._in_read(
            "searching", lambda db: self.text_search.newest(db.c, query, limit, within, only)
        )

    def count_matches(self, queries: Sequence[SearchQuery], cap: int) -> list[int]:
        return self._in_read(
            "counting matches", lambda db: self.text_search.count_matches(db.c, queries, cap)
        )
