"""Natural-language query analysis: what an owner or agent types -> a ``SearchQuery``.

Queries are questions ("when did I buy my bike?"), never search syntax: the words of
the input become ``SearchTerm`` records holding plain text, which each store renders
safely for its own index (``stores.sqlite.fts`` for FTS5), so ``AND``, ``NEAR``, ``:``,
parentheses or quotes in the input are plain words or separators and no query built here
can be rejected. What the input may say on purpose is honoured: a "double-quoted" or
'single-quoted' phrase (a title, a name) is also searched as a phrase, and ``word*`` as a
prefix. Stop words (how a question is asked, not what it is about) are dropped; the
irregular forms of a verb ("buy": "bought") and its synonyms are searched too, at
``VARIANT_WEIGHT``. Any term may match: a row holding more of them, and rarer ones, ranks
higher (bm25).

Scale: bm25 costs about a microsecond per matching row, and FTS5 computes a term's idf by
reading every posting of it, so a term found in a million rows would make every recall
slow while adding little to the ranking (a common word says little about which turn is
meant). ``plan`` therefore ranks by the rarest terms whose matches fit a budget, and the
commoner terms only re-order what those found (``bonus``: their weight for each found row
holding them). When every term is that common there is nothing distinctive to rank by:
recall takes the newest rows holding all of them (then any of them), scored by ``bonus``.
The counts come from the store; this module does no I/O.

Weights: a ranked term's bm25 is rescaled from FTS5's idf (``fts5_idf``, which is zero
for a word in half the rows or more, so every score on a small index prints as 0) to
Lucene's (``idf``, always positive), times the term's weight: a score is positive for
every real match, higher is better, and comparable between the terms of a query.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tether.core.recall import cjk, symbols
from tether.core.recall.inflections import forms
from tether.core.recall.synonyms import synonyms
from tether.records import SearchQuery, SearchTerm

#: Distinct words kept from one query: a pasted 10 KB text still searches quickly.
MAX_TERMS = 32
#: Longer "words" (hashes, base64, unspaced scripts) are dropped: nobody types them to
#: find a turn, and the index would only ever match them exactly.
MAX_TERM_CHARS = 64
#: Rows a ranked search may score (see the module docstring); about 5 ms at 2M rows.
DEFAULT_BUDGET = 4000
#: When every word is common, the newest rows holding all of them are looked for among
#: this many times ``budget`` most recently indexed rows (bounding an AND that finds few).
WITHIN_BUDGETS = 100
#: Weight of a verb's irregular forms beside the word asked for (measured on LongMemEval:
#: at 1.0 they outrank the word itself too often).
VARIANT_WEIGHT = 0.5
#: A ``word*`` prefix must be at least this long (shorter ones match half the index).
PREFIX_MIN = 3
#: Phrases searched from one query, and words in one phrase.
MAX_PHRASES = 4
MAX_PHRASE_WORDS = 8

# Python's \w minus "_": the index's tokenizer (FTS5's unicode61) treats "_" as a
# separator, so a term never straddles what the index sees as two tokens.
_WORD = re.compile(r"[^\W_]+")
#: Characters inside one pair of quotes: a longer span is no title (and a bound keeps an
#: unclosed quote in a pasted 10 KB text from making the search for its end quadratic).
MAX_PHRASE_CHARS = 200
_PHRASE = re.compile(rf"[\"“”„]([^\"“”„]{{1,{MAX_PHRASE_CHARS}}})[\"“”„]")
# 'Single-quoted' titles ('The Power', 'Book Lovers Unite'): the opening quote starts a
# word after a non-word, the closing one ends a word before a non-word, and apostrophes
# inside a word ("Mary's", 'The Handmaid's Tale') neither open nor close one.
_SINGLE = re.compile(
    rf"(?<![^\W_])['‘]([^\W_](?:[^'‘’\n]|['’](?=[^\W_])){{0,{MAX_PHRASE_CHARS}}}?)['’](?![^\W_])"
)

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
    """The searchable words of ``text``: lower-cased, stop words dropped, distinct, in
    first-appearance order, at most ``max_terms``.

    Stop words and duplicates are compared casefolded ("Straße" = "STRASSE"), but the term
    kept is only lower-cased: the index lower-cases what it holds and would not find
    "strasse" in "straße".

    The index tokens of its symbols (``core.recall.symbols``: emoji, ♥, €) follow, within the
    same ``max_terms``: "🍵" is a question too.
    """
    words = [word for word, _ in _words(text, max_terms)]
    extra = [t for t, _ in symbols.pieces(text) if t not in words]
    return tuple([*words, *dict.fromkeys(extra)][:max_terms])


def _words(text: str, max_terms: int) -> list[tuple[str, bool]]:
    """(word, typed as a prefix ``word*``) for ``terms``."""
    seen: set[str] = set()
    out: list[tuple[str, bool]] = []
    for m in _WORD.finditer(text):
        word = m.group()
        if len(word) > MAX_TERM_CHARS:
            continue
        key = word.casefold()
        if key in seen or key in STOP_WORDS:
            continue
        seen.add(key)
        out.append((word.lower(), text.startswith("*", m.end()) and len(word) >= PREFIX_MIN))
        if len(out) >= max_terms:
            break
    return out


def plain(
    text: str, *, prefix_min: int | None = None, max_terms: int = MAX_TERMS
) -> SearchQuery | None:
    """Any of the words of ``text`` (``terms``), nothing else; None when nothing
    searchable is left.

    ``prefix_min``: words at least this long also match as prefixes. Off by default: the
    index stems English (porter), which already folds "adopted" into "adopt".
    """
    words = terms(text, max_terms=max_terms)
    if not words:
        return None
    return SearchQuery(
        tuple(
            SearchTerm(w, "prefix" if prefix_min is not None and len(w) >= prefix_min else "term")
            for w in words
        )
    )


def word_of(term: SearchTerm) -> str | None:
    """The single word ``term`` stands for, which ``bonus`` can look for in a row's text:
    None for phrases, prefixes, CJK pieces (no word boundaries to look for) and symbol
    tokens (which are not in the text)."""
    if term.kind != "term" or cjk.has_cjk(term.text) or symbols.is_token(term.text):
        return None
    return term.text


def analyse(text: str, *, max_terms: int = MAX_TERMS) -> SearchQuery:
    """Any of the terms of a question: its words (``terms``), ``word*`` prefixes, quoted
    phrases, the pairs and characters of its CJK runs, its symbols' tokens, and the
    irregular forms and synonyms of its verbs; no terms when nothing searchable is left."""
    words = _words(text, max_terms)
    out: list[SearchTerm] = []
    seen: set[str] = set()
    for w, prefix in words:
        if cjk.has_cjk(w):
            # A run of CJK is one token to the index; its bigrams are searched instead
            # (``core.recall.cjk``), its characters at the variant weight, and the other pieces
            # of the word as words of their own.
            for piece, weight in _cjk_pieces(w):
                if piece not in seen and len(out) < max_terms:
                    seen.add(piece)
                    out.append(SearchTerm(piece, "term", weight))
            continue
        seen.add(w)
        out.append(SearchTerm(w, "prefix" if prefix else "term"))
    # Symbols have no word of their own: their index tokens (``core.recall.symbols``), a base of
    # a longer sequence (💻 of 👩‍💻) at the variant weight.
    for token, part in symbols.pieces(text):
        if token not in seen and len(out) < max_terms:
            seen.add(token)
            out.append(SearchTerm(token, "term", VARIANT_WEIGHT if part else 1.0))
    phrases = 0
    for inside in _phrases(text):
        inner = [w.lower() for w in _WORD.findall(inside) if len(w) <= MAX_TERM_CHARS]
        phrase = " ".join(inner[:MAX_PHRASE_WORDS])
        if len(inner) >= 2 and phrase not in seen:
            seen.add(phrase)
            out.append(SearchTerm(phrase, "phrase"))
            phrases += 1
            if phrases >= MAX_PHRASES:
                break
    for w, prefix in words:
        if cjk.has_cjk(w):
            continue
        others = synonyms(w)
        for form in () if prefix or VARIANT_WEIGHT <= 0 else (*forms(w), *others):
            # A synonym may be a stop word ("got"): the group says it means the act here.
            if form not in seen and (form not in STOP_WORDS or form in others):
                seen.add(form)
                out.append(SearchTerm(form, "term", VARIANT_WEIGHT))
    return SearchQuery(tuple(out))


def _cjk_pieces(word: str) -> list[tuple[str, float]]:
    """(piece, weight) of a word holding CJK (``cjk.pieces``): the bigrams (or a lone
    character) and other pieces at 1, then the single characters at ``VARIANT_WEIGHT``."""
    found = cjk.pieces(word)
    return [(p, 1.0) for p, single in found if not single] + [
        (p, VARIANT_WEIGHT) for p, single in found if single
    ]


def _phrases(text: str) -> list[str]:
    """What the question puts in double or single quotes, in order of appearance."""
    found = [(m.start(), m.group(1)) for m in _PHRASE.finditer(text)]
    found += [(m.start(), m.group(1)) for m in _SINGLE.finditer(text)]
    return [inside for _, inside in sorted(found)]


def weight(count: int, total: int) -> float:
    """bm25's idf of a word in ``count`` of ``total`` rows, as FTS5 computes it."""
    return fts5_idf(count, total)


def fts5_idf(count: int, total: int) -> float:
    """FTS5's idf: ``log((N - n + 0.5) / (n + 0.5))``, floored at 1e-6."""
    total = max(total, count)
    return max(math.log((total - count + 0.5) / (count + 0.5)), 1e-6)


def idf(count: int, total: int) -> float:
    """Lucene's idf, ``log(1 + (N - n + 0.5) / (n + 0.5))``: positive even for a word in
    every row (on a small index, most words are in half of it)."""
    total = max(total, count)
    return math.log(1 + (total - count + 0.5) / (count + 0.5))


def _stem(word: str) -> str:
    """A crude English suffix strip, so "booked" in a row counts for "book" in a query.

    The index stems with porter; this only has to agree often enough for a tie-break.
    """
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def stem(word: str) -> str:
    """``_stem`` of the lower-cased word (what ``bonus`` compares)."""
    return _stem(word.lower())


@functools.lru_cache(maxsize=256)
def _finder(word: str) -> tuple[str, re.Pattern[str]]:
    """(crude stem of ``word``, a pattern for the words of a text that may share it)."""
    target = _stem(word.lower())
    pattern = rf"(?<![^\W_]){re.escape(target)}(?:ing|ed|es|s)?(?![^\W_])"
    return target, re.compile(pattern, re.IGNORECASE)


def holds(text: str, word: str) -> bool:
    """Whether ``text`` has a word with the crude stem of ``word`` ("booked" for "book")."""
    target, pattern = _finder(word)
    return any(_stem(m.group().lower()) == target for m in pattern.finditer(text))


def bonus(text: str, also: Sequence[tuple[str, float]]) -> float:
    """What ``text`` adds to its score for holding the ``also`` words (weight per word
    present, as bm25 would give a word found once in a row of average length)."""
    return sum(w for word, w in also if holds(text, word))


@dataclass(frozen=True)
class Attempt:
    """One search to run.

    ``rank``: every row any term of ``query`` finds, scored by the sum over its terms of
    their bm25 times their weight (``Store.search_terms``). ``newest``: the newest rows
    ``query`` finds, among the last ``within`` indexed rows (None: all), in index order,
    unscored (``Store.newest``). ``also``: words with their weights that add to the score
    of what was found (see ``bonus``).
    """

    mode: Literal["rank", "newest"]
    query: SearchQuery
    also: tuple[tuple[str, float], ...] = ()
    within: int | None = None


def plan(
    query: SearchQuery,
    counts: Sequence[int],
    *,
    budget: int = DEFAULT_BUDGET,
    total: int = 0,
) -> tuple[Attempt, ...]:
    """Searches to try in order until one finds something; () when nothing can match.

    ``counts[i]`` is how many rows ``query.terms[i]`` matches (capped anywhere above
    ``budget``); ``total`` is how many rows the index holds. Terms that match nothing are
    dropped. The rarest terms whose counts add up to at most ``budget`` are ranked
    together, each bm25 rescaled to Lucene's idf times the term's weight; the commoner
    rest come along as ``also``. If even the rarest term is over budget, the newest rows
    holding all terms are taken (within the last ``WITHIN_BUDGETS * budget`` rows), else
    the newest holding any; every word is ``also``.
    """
    terms = query.terms
    if len(terms) != len(counts):
        raise ValueError("one count per term")
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

    def also(indexes: Sequence[int]) -> tuple[tuple[str, float], ...]:
        return tuple(
            (word, terms[i].weight * idf(counts[i], total))
            for i in sorted(indexes)
            if (word := word_of(terms[i])) is not None
        )

    if chosen:
        scaled = tuple(
            SearchTerm(
                terms[i].text,
                terms[i].kind,
                terms[i].weight * idf(counts[i], total) / fts5_idf(counts[i], total),
            )
            for i in sorted(chosen)
        )
        rest = also([i for _, i in live[len(chosen) :]])
        return (Attempt("rank", SearchQuery(scaled), also=rest),)
    order = sorted(i for _, i in live)
    everything = tuple(terms[i] for i in order if terms[i].weight >= 1)
    if not everything:
        everything = tuple(terms[i] for i in order)
    attempts: list[Attempt] = []
    if len(everything) > 1:
        attempts.append(
            Attempt(
                "newest",
                SearchQuery(everything, require="all"),
                also=also(order),
                within=WITHIN_BUDGETS * budget,
            )
        )
    attempts.append(Attempt("newest", SearchQuery(everything), also=also(order)))
    return tuple(attempts)
