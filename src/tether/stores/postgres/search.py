"""Searching the PostgreSQL store: the same rows, in the same order and with the same
scores, as the SQLite store's FTS5 search (``sqlite.search``).

Matching is ``doc.tsv @@ tsquery`` under the GIN index, with the tokens FTS5 would use
(``postgres.text``). Scoring is FTS5's own bm25, computed here the way its C code does
(k1 = 1.2, b = 0.75; idf = ln((N - n + 0.5) / (n + 0.5)), floored at 1e-6; a row's
length and the average are in tokens): N and the total length come from the counters
kept with every write (``stat``), n of a word from ``term_df`` (kept by triggers,
``postgres.schema``) and of a phrase or prefix by one count under the index, the term
frequency from the row's vector (``tether_tf``, which counts a phrase's runs as FTS5
does). Every constant and quotient that can be is computed in Python with the same
floating-point operations as FTS5, so the scores agree to the last bit where the sums
are taken in one order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import psycopg

from tether.records import Found, Hit, SearchQuery
from tether.stores.postgres import text
from tether.stores.search import FOUND_COLUMNS, TextSearch, found_row, hit, positive

K1 = 1.2
B = 0.75


def _totals(conn: psycopg.Connection[Any]) -> tuple[int, float]:
    rows = dict(conn.execute("SELECT name, value FROM stat").fetchall())
    n_rows = int(rows.get("doc_rows", 0))
    n_tokens = int(rows.get("doc_tokens", 0))
    return n_rows, (n_tokens / n_rows if n_rows else 0.0)


def _idf(n_rows: int, hits: int) -> float:
    idf = math.log((n_rows - hits + 0.5) / (hits + 0.5))
    return 1e-6 if idf <= 0.0 else idf


def _word(rendered: text.Rendered) -> str | None:
    """The one lexeme whose rows the term matches, when it is a plain word (not a phrase,
    not a prefix): its count is then a row of ``term_df``."""
    return rendered.tokens[0] if len(rendered.tokens) == 1 and not rendered.prefix else None


def _matches(conn: psycopg.Connection[Any], terms: Sequence[text.Rendered], cap: int) -> list[int]:
    """How many rows each term matches (at most ``cap``): a word's count from ``term_df``
    (one statement for them all), a phrase's or prefix's by counting under the index."""
    words = sorted({w for r in terms if (w := _word(r)) is not None})
    known: dict[str, int] = {}
    if words:
        known = dict(
            conn.execute("SELECT term, n FROM term_df WHERE term = ANY(%s)", (words,)).fetchall()
        )
    out: list[int] = []
    for r in terms:
        w = _word(r)
        if w is not None:
            out.append(min(int(known.get(w, 0)), cap))
            continue
        out.append(_capped_count(conn, r.query, cap))
    return out


def _capped_count(conn: psycopg.Connection[Any], tsquery: str, cap: int) -> int:
    """Rows matching ``tsquery`` under the index, counted up to ``cap``."""
    row = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM doc WHERE tsv @@ %s::tsquery LIMIT %s) AS m",
        (tsquery, cap),
    ).fetchone()
    return int(row[0]) if row else 0


def _only(only: Sequence[str] | None) -> tuple[str, list[object]]:
    if only is None:
        return "", []
    return " AND d.ref = ANY(%s)", [list(only)]


def _ranked(
    conn: psycopg.Connection[Any],
    query: SearchQuery,
    limit: int,
    *,
    aside: float,
    weights: bool,
    only: Sequence[str] | None,
) -> list[tuple[Any, ...]]:
    """(columns..., score) of the ``limit`` best rows, best first."""
    rendered = text.render(query.terms)
    if query.require == "all" and any(r is None for r in rendered):
        return []
    terms = [r for r in rendered if r is not None]
    if not terms:
        return []
    n_rows, avgdl = _totals(conn)
    where, extra = _only(only)
    parts: list[str] = []
    params: list[object] = []
    for r, hits in zip(terms, _matches(conn, terms, n_rows + 1), strict=True):
        idf = _idf(n_rows, hits)
        w = r.weight if weights else 1.0
        tf, tf_params = _tf(r)
        # OFFSET 0 fences the inner query, so its tf (a walk of the row's vector) is taken
        # once a row, not once for each of the four places the formula below names it.
        # bm25's share of this term: idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * D / avgdl))
        share = "(%s * ((tf * %s) / (tf + %s * ((1 - %s::float8) + (%s * d.len::float8) / %s))))"
        parts.append(
            "SELECT id, CASE WHEN aside THEN %s * (%s * s) ELSE %s * s END AS s FROM"
            f" (SELECT d.id, d.aside, {share} AS s FROM"
            f"  (SELECT d.id, d.aside, d.len, {tf}::float8 AS tf"
            f"   FROM doc AS d WHERE d.tsv @@ %s::tsquery{where} OFFSET 0) AS d) AS t"
        )
        params += [w, aside, w, idf, K1 + 1.0, K1, B, B, avgdl or 1.0, *tf_params]
        params += [r.query, *extra]
    having = ""
    if query.require == "all" and len(terms) > 1:
        having = " HAVING count(*) = %s"
    union = " UNION ALL ".join(parts)
    ranked = f"SELECT id, sum(s) AS s FROM ({union}) AS u GROUP BY id{having}"
    if having:
        params.append(len(terms))
    params.append(limit)
    return conn.execute(
        f"SELECT {FOUND_COLUMNS}, f.s FROM ({ranked} ORDER BY s DESC, id LIMIT %s) AS f"
        " JOIN doc AS d ON d.id = f.id ORDER BY f.s DESC, d.id",
        params,
    ).fetchall()


def _tf(rendered: text.Rendered) -> tuple[str, list[object]]:
    """SQL for the term's frequency in row ``d``: one word (the common case) by a look-up
    in the row's vector; a phrase through ``tether_tf``, which walks the positions."""
    if len(rendered.tokens) > 1:
        return "tether_tf(d.tsv, %s, %s)", [rendered.tokens, rendered.prefix]
    if rendered.prefix:
        return (
            "(SELECT sum(cardinality(u.positions)) FROM unnest(d.tsv) AS u"
            " WHERE starts_with(u.lexeme, %s))",
            [rendered.tokens[0]],
        )
    return (
        "(SELECT cardinality(u.positions) FROM unnest(d.tsv) AS u WHERE u.lexeme = %s)",
        [rendered.tokens[0]],
    )


def search(conn: psycopg.Connection[Any], query: SearchQuery, limit: int) -> list[Hit]:
    """bm25 of the whole query (both fields alike, term weights unused), best first."""
    positive(limit)
    return [
        hit(found_row(r)) for r in _ranked(conn, query, limit, aside=1.0, weights=False, only=None)
    ]


def search_terms(
    conn: psycopg.Connection[Any],
    query: SearchQuery,
    limit: int,
    aside: float,
    only: Sequence[str] | None = None,
) -> list[Found]:
    positive(limit)
    if only is not None and not only:
        return []
    return [found_row(r) for r in _ranked(conn, query, limit, aside=aside, weights=True, only=only)]


def newest(
    conn: psycopg.Connection[Any],
    query: SearchQuery,
    limit: int,
    within: int | None = None,
    only: Sequence[str] | None = None,
) -> list[Found]:
    positive(limit)
    match = text.whole(query)
    if match is None or (only is not None and not only):
        return []
    floor = 0
    if within is not None:
        top = conn.execute("SELECT coalesce(max(id), 0) FROM doc").fetchone()
        floor = int(top[0] if top else 0) - within
    where, extra = _only(only)
    rows = conn.execute(
        f"SELECT {FOUND_COLUMNS}, 0.0 FROM doc AS d WHERE d.tsv @@ %s::tsquery AND d.id > %s{where}"
        " ORDER BY d.id DESC LIMIT %s",
        (match, floor, *extra, limit),
    ).fetchall()
    return [found_row(r) for r in rows]


def count_matches(
    conn: psycopg.Connection[Any], queries: Sequence[SearchQuery], cap: int
) -> list[int]:
    single: list[text.Rendered] = []  # a one-term query: its term (the common case)
    where: list[int] = []
    out: list[int] = []
    for i, q in enumerate(queries):
        rendered = text.render(q.terms)
        if len(rendered) == 1 and rendered[0] is not None:
            single.append(rendered[0])
            where.append(i)
            out.append(0)
            continue
        match = text.whole(q)
        out.append(0 if match is None else _capped_count(conn, match, cap))
    for i, n in zip(where, _matches(conn, single, cap), strict=True):
        out[i] = n
    return out


#: The PostgreSQL store's searches (``PostgresStore.text_search``).
TSV = TextSearch(search, search_terms, newest, count_matches)
