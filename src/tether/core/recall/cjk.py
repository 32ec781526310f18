"""Chinese, Japanese and Korean text as overlapping bigrams, so that full-text search finds
words inside them. Pure.

FTS5's unicode61 tokenizer splits on spaces and punctuation, and these scripts write a
sentence without spaces (Korean puts them between phrases, particles attached): a whole
run such as 我喜欢乌龙茶 is one token, and a search for 乌龙茶 finds nothing. As
Lucene's CJK analyser does, every run of these characters is indexed a second time as
its overlapping pairs (我喜 喜欢 欢乌 乌龙 龙茶), and, since many words are one
character (茶 tea, 狗 dog), as its characters too. A question's runs are searched as
the same pairs, and its characters at a lower weight (``query``): a row holding more of
them, and rarer ones, ranks higher, like any other words.
"""

from __future__ import annotations

import re

#: Han (with extensions and compatibility ideographs), kana (with half-width katakana
#: and the prolonged sound mark), Hangul syllables and jamo.
_CJK_CHARS = (
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f"
)
_ANY = re.compile(f"[{_CJK_CHARS}]")
_SPLIT = re.compile(f"([{_CJK_CHARS}]+)")
# Words as the query analyser and FTS5 see them (letters and digits; "_" separates): a
# mark or punctuation inside the CJK blocks (゠, ゛) is never part of a run.
_WORD = re.compile(r"[^\W_]+")


def has_cjk(text: str) -> bool:
    return _ANY.search(text) is not None


def bigrams(run: str) -> list[str]:
    """The overlapping pairs of a run of CJK characters; a lone character is itself."""
    if len(run) < 2:
        return [run] if run else []
    return [run[i : i + 2] for i in range(len(run) - 1)]


def parts(text: str) -> list[str]:
    """The pieces of the words of ``text`` that hold CJK: CJK runs and what is between."""
    return [
        part for word in _WORD.findall(text) if has_cjk(word) for part in _SPLIT.split(word) if part
    ]


def runs(text: str) -> list[str]:
    """The runs of CJK letters in ``text``, in order."""
    return [part for part in parts(text) if has_cjk(part)]


def unigrams(run: str) -> list[str]:
    """The distinct characters of a run of two or more (a lone one is its own bigram)."""
    return list(dict.fromkeys(run)) if len(run) >= 2 else []


def pieces(text: str) -> list[tuple[str, bool]]:
    """(piece, is a single character) for what ``text`` is searched and indexed by beside
    its words: per word that holds CJK, each run's bigrams then its characters, and the
    other pieces of the word ("iPhone15手机": iPhone15, 手机, 手, 机)."""
    if not has_cjk(text):
        return []
    return [
        (p, single)
        for part in parts(text)
        for p, single in (
            [*((b, False) for b in bigrams(part)), *((u, True) for u in unigrams(part))]
            if has_cjk(part)
            else [(part, False)]
        )
    ]


def segment(text: str) -> str | None:
    """What to index beside ``text``: its ``pieces``, space-separated; None when ``text``
    has no CJK letter."""
    found = pieces(text)
    return " ".join(p for p, _ in found) if found else None
