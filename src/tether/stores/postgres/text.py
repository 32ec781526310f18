"""Text as the PostgreSQL store indexes and searches it: the SAME tokens SQLite's FTS5
index holds, so a search finds and ranks the same rows on both backends.

PostgreSQL's own parsers and dictionaries (``to_tsvector('english', ...)``) split and stem
differently from FTS5's ``porter unicode61 remove_diacritics 2`` (apostrophes, digits
inside words, a different snowball stemmer), and recall@k would drift between backends.
So the tokens come from FTS5 itself: the ``sqlite3`` module every Python carries runs
the text through an in-memory FTS5 table with the very tokenizer the SQLite store
declares, and ``fts5vocab`` hands back each token with its position. They go to
PostgreSQL as a ``tsvector`` literal (quoted lexemes are taken verbatim, no dictionary),
and a query term as a ``tsquery`` literal built from the same tokens: a phrase is its
tokens joined by ``<->``, a prefix ends with ``:*``.

Limits of ``tsvector`` (checked here, said in docs/architecture.md): positions stop at
16,383 and a lexeme keeps at most 256 of them, so in a very long row a late phrase may
be missed and a term's count saturates (bm25 saturates long before that); a lexeme over
2,046 bytes is left out (no word is that long). The row's length for bm25 is counted
here, exactly, and stored beside the vector.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

from tether.core.recall import symbols
from tether.records import SearchQuery, SearchTerm

#: The tokenizer of the SQLite store's index (``stores.migrations``): keep them equal.
TOKENIZE = "porter unicode61 remove_diacritics 2"
MAX_POSITION = 16_383
MAX_POSITIONS = 256
MAX_LEXEME_BYTES = 2_046
#: Rows tokenized in one pass through the in-memory index.
BATCH = 500

_local = threading.local()


def _tokenizer() -> sqlite3.Connection:
    c: sqlite3.Connection | None = getattr(_local, "c", None)
    if c is None:
        c = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=True)
        c.execute(f"CREATE VIRTUAL TABLE t USING fts5 (x, tokenize = '{TOKENIZE}')")
        c.execute("CREATE VIRTUAL TABLE v USING fts5vocab (t, 'instance')")
        _local.c = c
    return c


def tokens_of(texts: Sequence[str]) -> list[list[str]]:
    """Each text's tokens in order, as FTS5 indexes them."""
    out: list[list[str]] = []
    c = _tokenizer()
    for start in range(0, len(texts), BATCH):
        part = texts[start : start + BATCH]
        found: list[list[tuple[int, str]]] = [[] for _ in part]
        c.execute("BEGIN")
        try:
            c.executemany(
                "INSERT INTO t (rowid, x) VALUES (?, ?)",
                ((i + 1, text.replace("\x00", " ")) for i, text in enumerate(part)),
            )
            for doc, term, offset in c.execute("SELECT doc, term, offset FROM v"):
                found[doc - 1].append((offset, term))
        finally:
            c.execute("ROLLBACK")  # the table is a scratchpad: nothing is kept
        for row in found:
            row.sort()
            out.append([term for _, term in row])
    return out


def indexed_text(text: str) -> str:
    """What the SQLite index holds of a row: its text, then its CJK bigrams and symbol
    tokens (``symbols.seg``)."""
    seg = symbols.seg(text)
    return text if seg is None else f"{text} {seg}"


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _fits(lexeme: str) -> bool:
    return len(lexeme.encode()) <= MAX_LEXEME_BYTES


def vector(tokens: Sequence[str]) -> str:
    """A ``tsvector`` literal of ``tokens`` with their 1-based positions."""
    positions: dict[str, list[int]] = {}
    for i, tok in enumerate(tokens, start=1):
        if not _fits(tok):
            continue
        at = positions.setdefault(tok, [])
        if len(at) < MAX_POSITIONS:
            at.append(min(i, MAX_POSITION))
    return " ".join(
        f"{_quote(tok)}:{','.join(map(str, sorted(set(at))))}" for tok, at in positions.items()
    )


def documents(texts: Sequence[str]) -> list[tuple[str, int]]:
    """Per text: its ``tsvector`` literal and its length in tokens (bm25's ``dl``)."""
    return [(vector(toks), len(toks)) for toks in tokens_of([indexed_text(t) for t in texts])]


class Rendered:
    """One query term as PostgreSQL searches it: the ``tsquery`` literal that finds its
    rows, and what counts its matches in a row (the tokens, the last a prefix or not)."""

    __slots__ = ("prefix", "query", "tokens", "weight")

    def __init__(self, query: str, tokens: list[str], prefix: bool, weight: float) -> None:
        self.query = query
        self.tokens = tokens
        self.prefix = prefix
        self.weight = weight


def render(terms: Sequence[SearchTerm]) -> list[Rendered | None]:
    """Each term rendered; None for a term with no token (it matches nothing, as an
    empty FTS5 string does) or one too long to be a lexeme."""
    out: list[Rendered | None] = []
    for t, toks in zip(terms, tokens_of([t.text for t in terms]), strict=True):
        if not toks or not all(_fits(tok) for tok in toks):
            out.append(None)
            continue
        prefix = t.kind == "prefix"
        parts = [_quote(tok) for tok in toks]
        if prefix:
            parts[-1] += ":*"
        out.append(Rendered(" <-> ".join(parts), toks, prefix, t.weight))
    return out


def whole(query: SearchQuery) -> str | None:
    """The ``tsquery`` of the whole query (its terms joined by ``|`` or ``&``), or None
    when it can match nothing."""
    rendered = render(query.terms)
    if query.require == "all" and any(r is None for r in rendered):
        return None
    found = [f"({r.query})" for r in rendered if r is not None]
    if not found:
        return None
    return (" & " if query.require == "all" else " | ").join(found)
