"""Words people use for the same act, for the words neither a stemmer nor ``inflections``
can join.

A question asks "what did I buy" or "which pieces did I acquire"; the owner wrote "I just
got a smoker" or "I purchased a bookshelf". ``synonyms`` gives the other words of such a
group, which recall searches for at the same lower weight as a verb's irregular forms.

A group is added only when the LongMemEval benchmark's tuning half says it helps (see
``benchmarks/RESULTS.md``): a synonym finds the turn that says it another way, and also
every turn that uses the word for something else ("I got a question"), so a group that
does not find more than it drowns is left out. Words are stems the index folds (porter:
"purchase" finds "purchased"), plus the irregular forms the stemmer leaves apart.
"""

from __future__ import annotations

from tether.core.recall.inflections import forms, word_groups

_GROUPS = """
buy bought purchase acquire got
spend spent pay paid cost
"""


_SYNONYMS = word_groups(_GROUPS)


def synonyms(word: str) -> tuple[str, ...]:
    """The other words of ``word``'s group (``word`` lower case, or one of its irregular
    forms: "bought" is in the group of "buy"), else ()."""
    for key in (word, *forms(word), *_bases(word)):
        if key in _SYNONYMS:
            return tuple(w for w in _SYNONYMS[key] if w != word)
    return ()


def _bases(word: str) -> tuple[str, ...]:
    """What ``word`` may be an inflection of ("purchases", "purchased", "purchasing")."""
    out = []
    for suffix, restore in (
        ("s", ""),
        ("es", ""),
        ("d", ""),
        ("ed", ""),
        ("ing", ""),
        ("ing", "e"),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            out.append(word[: -len(suffix)] + restore)
    return tuple(out)
