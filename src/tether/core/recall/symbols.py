"""Emoji and other symbols as words the full-text index keeps. Pure.

FTS5's unicode61 tokenizer keeps letters and digits and treats every other character as a
separator, so 🍵, ♥, €, ✓ or ∑ are in no token: a turn saying "🍵 matcha" is indexed as
"matcha" alone, and a search for "🍵" has no word to look for. As ``core.recall.cjk`` does for
unspaced scripts, each symbol is indexed a second time (in the same ``seg`` column) as a
token unicode61 keeps: ``zsym`` and its code point in decimal (🍵 is ``zsym127861``;
decimal, so the porter stemmer, which strips English endings such as "-ed", never changes
one). A question's symbols are searched as the same tokens.

Symbols are the non-ASCII characters of Unicode's symbol categories (So, Sm, Sc, Sk: emoji,
dingbats, arrows, maths, currencies). ASCII ones (``+ = $ <``) are left out: code is full
of them and nobody searches for one.

Emoji sequences are one cluster: base emoji joined by a zero-width joiner (👩‍💻), a base
with a skin-tone modifier (👍🏽), a pair of regional indicators (🇫🇷); variation selectors,
keycap marks and tag characters are dropped. A cluster is indexed as its bases (👩, 💻; 👍
with its modifier dropped) and, when it has more than one part, as the whole sequence too
(``zsym128105x128187``). A search for 👩‍💻 looks for the sequence and, at a lower weight
(``query``), each base; a search for 👍 finds 👍🏽 too.
"""

from __future__ import annotations

import re
import unicodedata

from tether.core.recall import cjk

PREFIX = "zsym"
_CATEGORIES = frozenset({"So", "Sm", "Sc", "Sk"})
#: Candidates: non-ASCII characters that are neither letters, digits nor blanks (a fast
#: scan over ordinary text; the category is checked only for what it finds).
_CANDIDATE = re.compile(r"[^\w\s\x00-\x7f]+")
_ZWJ = 0x200D
_DROPPED = frozenset({0xFE0E, 0xFE0F, 0x20E3})
_TAGS = range(0xE0020, 0xE0080)
_MODIFIERS = range(0x1F3FB, 0x1F400)
_REGIONAL = range(0x1F1E6, 0x1F200)
#: Parts of one sequence indexed whole: a longer run of joined emoji is only its bases.
MAX_PARTS = 8
_TOKEN = re.compile(rf"{PREFIX}[0-9]+(?:x[0-9]+)*")


def is_token(word: str) -> bool:
    """Whether ``word`` is a symbol's index token (not a word of any text)."""
    return _TOKEN.fullmatch(word) is not None


def _token(parts: list[int]) -> str:
    return PREFIX + "x".join(str(p) for p in parts)


def clusters(text: str) -> list[list[int]]:
    """The symbol clusters of ``text`` in order, each its code points (bases and
    modifiers; joiners, variation selectors and tags dropped)."""
    out: list[list[int]] = []
    for run in _CANDIDATE.findall(text):
        current: list[int] = []
        joined = False
        for ch in run:
            cp = ord(ch)
            if cp == _ZWJ:
                joined = bool(current)
                continue
            if cp in _DROPPED or cp in _TAGS:
                continue
            if cp in _MODIFIERS and current and current[-1] not in _MODIFIERS:
                current.append(cp)
                continue
            if unicodedata.category(ch) not in _CATEGORIES:
                if current:
                    out.append(current)
                current, joined = [], False
                continue
            pair = cp in _REGIONAL and len(current) == 1 and current[0] in _REGIONAL and not joined
            if current and (joined or pair):
                current.append(cp)
            else:
                if current:
                    out.append(current)
                current = [cp]
            joined = False
        if current:
            out.append(current)
    return out


def pieces(text: str) -> list[tuple[str, bool]]:
    """(token, is one base of a longer sequence) for each cluster of ``text``: the whole
    sequence first (when it has more than one part), then its bases."""
    out: list[tuple[str, bool]] = []
    for parts in clusters(text):
        bases = [p for p in parts if p not in _MODIFIERS] or parts
        whole = len(parts) > 1
        if whole and len(parts) <= MAX_PARTS:
            out.append((_token(parts), False))
        out.extend((_token([b]), whole) for b in dict.fromkeys(bases))
    return out


def segment(text: str) -> str | None:
    """What to index beside ``text`` for its symbols: their tokens, space-separated; None
    when it has none."""
    found = pieces(text)
    return " ".join(t for t, _ in found) if found else None


def seg(text: str) -> str | None:
    """The ``seg`` column of an index row: what is indexed beside ``text`` so that words
    inside CJK runs (``cjk.segment``) and symbols (``segment``) are found; None for text
    with neither."""
    found = [s for s in (cjk.segment(text), segment(text)) if s is not None]
    return " ".join(found) if found else None
