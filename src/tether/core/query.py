"""Natural-language query analysis: what an owner or agent types -> FTS5 MATCH expressions.

Queries are questions ("when did I adopt my cat?"), never search syntax: every term is
quoted as an FTS5 string, so ``AND``, ``NEAR``, ``*``, ``:``, parentheses or quotes in the
input are plain words or separators and the expression can never be rejected.

Ranking is bm25 over OR of the terms. bm25 costs about a microsecond per matching row,
and FTS5 computes a term's idf by reading every posting of it, so a term found in a
million rows would make every recall slow while adding little to the ranking (a common
word says little about which turn is meant). ``plan`` therefore ranks by the rarest terms
whose matches fit a budget, and the commoner terms only re-order what those found
(``bonus``: their bm25 weight for each found row holding them). When every term is that
common there is nothing distinctive to rank by: recall takes the newest rows holding all
of them (then any of them), scored by ``bonus``, without bm25. The counts come from the
store; this module does no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

#: Distinct terms kept from one query: a pasted 10 KB text still searches quickly.
MAX_TERMS = 32
#: Longer "words" (hashes, base64, unspaced scripts) are dropped: nobody types them to
#: find a turn, and FTS5 would only ever match them exactly.
MAX_TERM_CHARS = 64
#: Rows a ranked search may score (see the module docstring); about 5 ms at 2M rows.
DEFAULT_BUDGET = 4000
#: When every word is common, the newest rows holding all of them are looked for among
#: this many times ``budget`` most recently indexed rows (bounding an AND that finds few).
WITHIN_BUDGETS = 100

# Python's \w minus "_": FTS5's unicode61 tokenizer treats "_" as a separator, so a term
# never straddles what the index sees as two tokens.
_WORD = re.compile(r"[^\W_]+")

#: Words that say how a question is asked, not what it is about. Contraction pieces
#: ("don", "t") are here because the tokenizer splits "don't" in two.
_STOP_TEXT = """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    ever few for from further get got had has have having he her here hers herself him
    himself his how i if in into is it its itself just let me might more most much must my
    myself no nor not now of off on once only or other our ours ourselves out over own
    please same shall she should so some such tell than that the their theirs them
    themselves then there these they this those through to too under until up upon us very
    was we were what whatever when whenever where which while who whom whose why will with
    would yes yet you your yours yourself yourselves remind remember say said mention
    mentioned thing things something anything
    s t d ll m re ve don didn doesn isn wasn aren weren won wouldn couldn shouldn haven hasn
    hadn can cannot
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())


def terms(text: str, *, max_terms: int = MAX_TERMS) -> tuple[str, ...]:
    """The searchable terms of ``text``: words, lower-cased, stop words dropped, distinct,
    in first-appearance order, at most ``max_terms``.

    Stop words and duplicates are compared casefolded ("Straße" = "STRASSE"), but the term
    kept is only lower-cased: FTS5 lower-cases what it indexes and would not find "strasse"
    in "straße".
    """
    seen: set[str] = set()
    out: list[str] = []
    for m in _WORD.finditer(text):
        word = m.group()
        if len(word) > MAX_TERM_CHARS:
            continue
        key = word.casefold()
        if key in seen or key in STOP_WORDS:
            continue
        seen.add(key)
        out.append(word.lower())
        if len(out) >= max_terms:
            break
    return tuple(out)


def quote(term: str, *, prefix: bool = False) -> str:
    """``term`` as an FTS5 string (``"`` doubled), optionally a prefix query (``"term"*``)."""
    quoted = '"' + term.replace('"', '""') + '"'
    return quoted + "*" if prefix else quoted


def _quoted(words: Sequence[str], prefix_min: int | None) -> list[str]:
    return [quote(w, prefix=prefix_min is not None and len(w) >= prefix_min) for w in words]


def any_of(words: Sequence[str], *, prefix_min: int | None = None) -> str:
    """OR of the quoted words (bm25 then favours rows holding more, and rarer, of them).

    ``prefix_min``: words at least this long also match as prefixes. Off by default: the
    index stems English (porter), which already folds "adopted" into "adopt".
    """
    if not words:
        raise ValueError("any_of needs at least one word")
    return " OR ".join(_quoted(words, prefix_min))


def all_of(words: Sequence[str], *, prefix_min: int | None = None) -> str:
    """AND of the quoted words."""
    if not words:
        raise ValueError("all_of needs at least one word")
    return " AND ".join(_quoted(words, prefix_min))


def match_expression(
    text: str, *, prefix_min: int | None = None, max_terms: int = MAX_TERMS
) -> str | None:
    """The plain OR expression for ``text``, or None when nothing searchable is left."""
    words = terms(text, max_terms=max_terms)
    return any_of(words, prefix_min=prefix_min) if words else None


@dataclass(frozen=True)
class Attempt:
    """One search to run.

    ``rank``: bm25 over every row ``match`` finds. ``newest``: the newest rows it finds,
    among the last ``within`` indexed rows (None: all), in index order, unscored.
    ``also``: words with their weights that re-order what was found (see ``bonus``).
    """

    match: str
    mode: Literal["rank", "newest"] = "rank"
    also: tuple[tuple[str, float], ...] = ()
    within: int | None = None


def weight(count: int, total: int) -> float:
    """bm25's idf of a word in ``count`` of ``total`` rows, as FTS5 computes it."""
    total = max(total, count)
    return max(math.log((total - count + 0.5) / (count + 0.5)), 1e-6)


def _stem(word: str) -> str:
    """A crude English suffix strip, so "booked" in a row counts for "book" in a query.

    The index stems with porter; this only has to agree often enough for a tie-break.
    """
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def bonus(text: str, also: Sequence[tuple[str, float]]) -> float:
    """What ``text`` adds to its score for holding the ``also`` words (weight per word
    present, as bm25 would give a word found once in a row of average length)."""
    if not also:
        return 0.0
    present = {_stem(m.group().lower()) for m in _WORD.finditer(text)}
    return sum(w for word, w in also if _stem(word) in present)


def plan(
    words: Sequence[str],
    counts: Sequence[int],
    *,
    budget: int = DEFAULT_BUDGET,
    total: int = 0,
    prefix_min: int | None = None,
) -> tuple[Attempt, ...]:
    """Searches to try in order until one finds something; () when nothing can match.

    ``counts[i]`` is how many rows ``words[i]`` matches (capped anywhere above ``budget``);
    ``total`` is how many rows the index holds. Words that match nothing are dropped. The
    rarest words whose counts add up to at most ``budget`` are ranked together (OR, every
    match scored); the commoner rest come along as ``also``. If even the rarest word is
    over budget, the newest rows holding all words are taken (within the last
    ``WITHIN_BUDGETS * budget`` rows), else the newest holding any; all words are ``also``.
    """
    if len(words) != len(counts):
        raise ValueError("one count per word")
    if budget < 1:
        raise ValueError("budget must be at least 1")
    live = sorted((c, i) for i, c in enumerate(counts) if c > 0)
    if not live:
        return ()
    chosen: list[int] = []
    ranked = 0
    for count, i in live:
        if ranked + count > budget:
            break
        chosen.append(i)
        ranked += count
    weights = {i: weight(counts[i], total) for _, i in live}
    if chosen:
        picked = [words[i] for i in sorted(chosen)]
        left = sorted(i for _, i in live[len(chosen) :])
        also = tuple((words[i], weights[i]) for i in left)
        return (Attempt(any_of(picked, prefix_min=prefix_min), "rank", also),)
    order = sorted(i for _, i in live)
    everything = [words[i] for i in order]
    also = tuple((words[i], weights[i]) for i in order)
    attempts: list[Attempt] = []
    if len(everything) > 1:
        attempts.append(
            Attempt(
                all_of(everything, prefix_min=prefix_min),
                "newest",
                also,
                within=WITHIN_BUDGETS * budget,
            )
        )
    attempts.append(Attempt(any_of(everything, prefix_min=prefix_min), "newest", also))
    return tuple(attempts)
