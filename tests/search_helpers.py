"""Search queries for the store tests: plain words, as ``core.recall.query`` would build them."""

from __future__ import annotations

from typing import Literal

from tether.records import SearchQuery, SearchTerm


def words(*texts: str, require: Literal["any", "all"] = "any") -> SearchQuery:
    """Any (or all) of ``texts``, each one plain term of weight 1."""
    return SearchQuery(tuple(SearchTerm(t) for t in texts), require=require)
