"""``recall``: search memory with a question; what the agent's tool and the CLI both run.

The query is analysed by ``tether.core.query`` (plain words, never search syntax), the
store counts how many rows each word matches, and ``query.plan`` decides what to rank so
a recall stays fast on millions of rows. Log hits are folded to one per (session, turn),
best score kept, and every hit returned is logged in the recalls log (counts and last
found times survive a re-index).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec

from tether.core import query
from tether.errors import BadInputError
from tether.ports import Hit, Store

#: Rows fetched per hit wanted, so folding several rows of one turn still leaves k hits.
FANOUT = 4
#: Rows fetched at least when common words re-order them (``query.bonus``): a rare word
#: found in a few dozen turns, re-ordered by the question's other words.
POOL = 50
#: Newest rows scored when every word is common (no bm25; see ``query.plan``).
NEWEST_POOL = 200


def _rescored(found: Sequence[Hit], also: Sequence[tuple[str, float]]) -> list[Hit]:
    """Add each row's ``query.bonus``; re-sort, ties keeping the store's order."""
    rescored = [
        msgspec.structs.replace(h, score=h.score + query.bonus(h.text, also)) for h in found
    ]
    return sorted(rescored, key=lambda h: -h.score)


def _one_per_turn(rows: Sequence[Hit], k: int) -> list[Hit]:
    """Best row per (session, turn) for log hits, per ref otherwise; first ``k``."""
    seen: set[object] = set()
    out: list[Hit] = []
    for hit in rows:
        key: object = (hit.session, hit.turn) if hit.session is not None else hit.ref
        if key in seen:
            continue
        seen.add(key)
        out.append(hit)
        if len(out) == k:
            break
    return out


def recall(
    store: Store, text: str, k: int, *, time: datetime, budget: int = query.DEFAULT_BUDGET
) -> list[Hit]:
    """The ``k`` best hits for ``text`` (best first), logged as recalled at ``time``.

    A query with nothing searchable in it (empty, punctuation, only stop words) finds
    nothing rather than everything. ``budget`` bounds the rows ranked (see core.query).
    """
    if k < 1:
        raise BadInputError(f"k must be at least 1 (got {k})")
    words = query.terms(text)
    if not words:
        return []
    counts = store.count_matches([query.quote(w) for w in words], budget + 1)
    total = store.row_count()
    hits: list[Hit] = []
    for attempt in query.plan(words, counts, budget=budget, total=total):
        if attempt.mode == "newest":
            found = store.newest(attempt.match, NEWEST_POOL, within=attempt.within)
        else:
            pool = max(k * FANOUT, POOL) if attempt.also else k * FANOUT
            found = store.search(attempt.match, pool)
        rows = _rescored(found, attempt.also) if attempt.also else found
        hits = _one_per_turn(rows, k)
        if hits:
            break
    store.record_recalls([h.ref for h in hits], time)
    return hits
