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


def segment(text: str) -> str | None:
    """What to index beside ``text``: the bigrams and characters of its CJK runs, and the
    other pieces of a word that holds a run ("iPhone15手机" gives "iPhone15 手机 手 机"),
    space-separated; None when ``text`` has no CJK letter."""
    found = parts(text) if has_cjk(text) else []
    if not found:
        return None
    pieces = [
        p
        for part in found
        for p in ([*bigrams(part), *unigrams(part)] if has_cjk(part) else [part])
    ]
    return " ".join(pieces)
