"""The SQL of searching the embedded store's FTS5 index (``SqliteStore`` runs it under its
lock and turns SQLite errors into ``StoreError``). Queries arrive as ``SearchQuery``
records and are rendered by ``sqlite.fts``. bm25 is lower-is-better: every score handed
out is ``-bm25`` (or a weighted sum of them), higher is better."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from tether.records import Found, Hit, SearchQuery
from tether.stores.search import FOUND_COLUMNS, TextSearch, found_row, hit, positive
from tether.stores.sqlite import fts as sqlite_fts

# One term's share of a row's score: its bm25 over the owner's words (``body``) plus
# ``aside`` times its bm25 over the rest (``aside``), times the term's multiplier. A row
# has text in one column only, so this weighs the row's whole share by its field.
_ONE_TERM = (
    "SELECT doc_fts.rowid AS id,"
    " ? * (bm25(doc_fts, 1.0, 0.0) + ? * bm25(doc_fts, 0.0, 1.0)) AS s"
    " FROM {source} WHERE doc_fts MATCH ?"
)
# ``only``: the rows whose ref is one of a JSON list, found by the doc_ref index, then
# each looked up in the FTS index by rowid (the outer loop of a CROSS JOIN): a few hundred
# lookups, never a walk of a common word's postings over every turn (``rowid IN (...)``
# took 45 ms at p50 and 1.4 s at p99 at 100k turns).
_ONLY = (
    "(SELECT id FROM doc WHERE ref IN (SELECT value FROM json_each(?))) AS w"
    " CROSS JOIN doc_fts ON doc_fts.rowid = w.id"
)


def _only(only: Sequence[str] | None) -> tuple[str, list[object]]:
    """What a search reads from (``doc_fts``, or the rows of ``only``, refs) and the
    parameter that goes with it."""
    if only is None:
        return "doc_fts", []
    return _ONLY, [json.dumps(list(only))]


def search(conn: sqlite3.Connection, query: SearchQuery, limit: int) -> list[Hit]:
    """bm25 (both columns alike, term weights unused) of the whole query, best first."""
    positive(limit)
    match = sqlite_fts.expression(query)
    if match is None:
        return []
    # bm25() ordered by SQLite's sorter measured ~20% faster than FTS5's own ORDER BY
    # rank on this workload.
    rows = conn.execute(
        f"SELECT {FOUND_COLUMNS}, f.score"
        " FROM (SELECT rowid, bm25(doc_fts) AS score FROM doc_fts"
        "       WHERE doc_fts MATCH ? ORDER BY score LIMIT ?) AS f"
        " JOIN doc AS d ON d.id = f.rowid ORDER BY f.score, d.id",
        (match, limit),
    ).fetchall()
    return [hit(_found(r)) for r in rows]


def search_terms(
    conn: sqlite3.Connection,
    query: SearchQuery,
    limit: int,
    aside: float,
    only: Sequence[str] | None = None,
) -> list[Found]:
    """The ``limit`` best rows by the sum over the query's terms of weight x field-weighted
    bm25 (rows holding every term only, when the query requires all), among the rows of
    the refs ``only`` when it is given.

    One FTS5 query per term: bm25 of a one-term query is that term's share of an OR
    query's, so the sum is bm25 with a weight per term.
    """
    positive(limit)
    terms = query.terms
    if not terms or (only is not None and not only):
        return []
    source, extra = _only(only)
    one_term = _ONE_TERM.format(source=source)
    params: list[object] = []
    for t in terms:
        params += [t.weight, aside, *extra, sqlite_fts.term(t)]
    if len(terms) == 1:  # (a lone subquery would be flattened into the GROUP BY)
        ranked = f"{one_term} ORDER BY s LIMIT ?"
    else:
        union = " UNION ALL ".join([one_term] * len(terms))
        # Each term's subquery yields a row at most once: a row holding every term is
        # there once per term.
        having = ""
        if query.require == "all":
            having = " HAVING count(*) = ?"
            params.append(len(terms))
        ranked = f"SELECT id, sum(s) AS s FROM ({union}) GROUP BY id{having} ORDER BY s LIMIT ?"
    params.append(limit)
    rows = conn.execute(
        f"SELECT {FOUND_COLUMNS}, f.s FROM ({ranked}) AS f"
        " JOIN doc AS d ON d.id = f.id ORDER BY f.s, d.id",
        params,
    ).fetchall()
    return [_found(r) for r in rows]


def newest(
    conn: sqlite3.Connection,
    query: SearchQuery,
    limit: int,
    within: int | None = None,
    only: Sequence[str] | None = None,
) -> list[Found]:
    """The ``limit`` most recently indexed rows ``query`` finds (among the last ``within``;
    among the rows of the refs ``only`` when it is given)."""
    positive(limit)
    match = sqlite_fts.expression(query)
    if match is None or (only is not None and not only):
        return []
    source, extra = _only(only)
    floor = 0
    if within is not None:
        top = conn.execute("SELECT coalesce(max(id), 0) FROM doc").fetchone()[0]
        floor = int(top) - within
    # Postings are in rowid order: FTS5 walks them backwards and stops after limit.
    rows = conn.execute(
        f"SELECT {FOUND_COLUMNS}, 0.0"
        f" FROM (SELECT doc_fts.rowid AS rowid FROM {source}"
        " WHERE doc_fts MATCH ? AND doc_fts.rowid > ?"
        " ORDER BY doc_fts.rowid DESC LIMIT ?) AS f"
        " JOIN doc AS d ON d.id = f.rowid ORDER BY d.id DESC",
        (*extra, match, floor, limit),
    ).fetchall()
    return [_found(r) for r in rows]


def count_matches(conn: sqlite3.Connection, queries: Sequence[SearchQuery], cap: int) -> list[int]:
    """Rows each query matches, counting no further than ``cap``."""
    return [_count(conn, sqlite_fts.expression(q), cap) for q in queries]


def _count(conn: sqlite3.Connection, match: str | None, cap: int) -> int:
    if match is None:
        return 0
    return int(
        conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM doc_fts WHERE doc_fts MATCH ? LIMIT ?)",
            (match, cap),
        ).fetchone()[0]
    )


def unindex(conn: sqlite3.Connection, where: str, params: Sequence[object]) -> int:
    """Take the ``doc`` rows matching ``where`` out of the FTS index and ``doc``; how many
    there were. (An external-content FTS5 row is deleted with the values it was indexed
    with, so they are read first.)"""
    old = conn.execute(f"SELECT id, body, aside FROM doc WHERE {where}", params).fetchall()
    conn.executemany(
        "INSERT INTO doc_fts (doc_fts, rowid, body, aside) VALUES ('delete', ?, ?, ?)", old
    )
    conn.executemany("DELETE FROM doc WHERE id = ?", ((row[0],) for row in old))
    return len(old)


def _found(row: Sequence[Any]) -> Found:
    """A found row with FTS5's bm25 negated (what ``sqlite.vectors`` reads rows with)."""
    return found_row(row, -1.0)


#: The SQLite store's searches (``SqliteStore.text_search``).
FTS = TextSearch(search, search_terms, newest, count_matches)
