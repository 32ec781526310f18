"""A ``SearchQuery`` as an FTS5 MATCH expression: the one place that knows FTS5 syntax.

Every term becomes an FTS5 string (``"`` doubled inside), so whatever it holds (``AND``,
``NEAR(``, ``:``, ``^``, parentheses, quotes) is text for the tokenizer and no expression
built here can be rejected. A phrase is the same string (FTS5 matches a string's tokens
in order), a prefix is the string followed by ``*``; terms are joined by ``OR`` (any) or
``AND`` (all). Weights are not part of the expression: ``sqlite.search`` runs one query
per term and multiplies its bm25 by the term's weight.

PostgreSQL will render the same record as a tsquery: each term through ``to_tsquery``, a
prefix as ``word:*`` and a phrase as its words joined by ``<->``, the terms joined by
``|`` (any) or ``&`` (all); a weight multiplies that term's ``ts_rank`` (and the field
weighting is ``setweight`` on the two columns).
"""

from __future__ import annotations

from tether.records import SearchQuery, SearchTerm


def term(search_term: SearchTerm) -> str:
    """``search_term`` as an FTS5 string, followed by ``*`` for a prefix."""
    # A NUL would end the string early ("unterminated string"); the tokenizer reads it
    # as a separator anyway, as it does a space.
    quoted = '"' + search_term.text.replace('"', '""').replace("\x00", " ") + '"'
    return quoted + "*" if search_term.kind == "prefix" else quoted


def expression(query: SearchQuery) -> str | None:
    """The MATCH expression for ``query``; None when it has no terms (it finds nothing)."""
    if not query.terms:
        return None
    return (" AND " if query.require == "all" else " OR ").join([term(t) for t in query.terms])
