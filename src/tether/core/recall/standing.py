"""Standing instructions and preferences the owner stated, and the requests they shape.
Pure, no I/O.

"From now on, give me distances in kilometres" shares no word with "How far is Boston
from New York?", yet it decides the answer. ``is_standing`` tells an owner's statement
that holds from then on (``STANDING``: "from now on", "always", "never", "I prefer", "keep
in mind"...); ``is_request`` a question that asks the agent to do or suggest something
(``REQUEST``: "can you", "write", "plan", "recommend", "what should I", "how far"...).
Recall (``memory.recall``) gives a request up to ``recall.STANDING_SLOTS`` of its last
places to standing statements its words did not find, the ones sharing most word stems
with it first, then the newest. ``search_terms`` is what the store is asked for them:
the markers, as phrases, any of them.
"""

from __future__ import annotations

import re

from tether.records import SearchQuery, SearchTerm

#: Phrases an owner states a standing instruction or preference with.
MARKERS = (
    "from now on",
    "going forward",
    "keep in mind",
    "whenever you",
    "every time you",
    "always",
    "never",
    "i prefer",
    "i'd prefer",
    "i would prefer",
    "i'd like",
    "i would like",
    "remember that",
    "don't ever",
    "i only",
    "i don't eat",
    "i can't stand",
)
STANDING = re.compile(
    r"\b(?:from now on|going forward|keep in mind|whenever you|every time you"
    r"|(?:please\s+)?(?:always|never)\s+(?:give|use|write|show|address|answer|recommend|"
    r"suggest|send|call|reply|keep|include|add|put|mention|ask|remind|format)"
    r"|i(?:'d| would)? prefer|i(?:'d| would) like (?:all|you|everything|my|it)"
    r"|remember that i|(?:do not|don't) ever|i only (?:travel|eat|drink|use|read|watch)"
    r"|i (?:don't|do not|never) eat|i can't stand)\b",
    re.IGNORECASE,
)
REQUEST = re.compile(
    r"^\s*(?:(?:can|could|would|will) you|please|write|draft|plan|make|give|suggest|"
    r"recommend|help|explain|summari[sz]e|create|tell me|show me|list|book|find|send|"
    r"prepare|translate|convert)\b"
    r"|\b(?:what should i|any (?:suggestions|recommendations|ideas|tips)|how (?:far|much does"
    r"|much is|long does)|what movie|which movie)\b",
    re.IGNORECASE,
)
_STEM = re.compile(r"[a-z]{4,}")


def search_terms() -> SearchQuery:
    return SearchQuery(
        tuple(SearchTerm(m, "phrase" if " " in m else "term") for m in MARKERS), require="any"
    )


def is_standing(text: str) -> bool:
    """Whether owner text states something that holds from then on."""
    return STANDING.search(text) is not None


def is_request(text: str) -> bool:
    """Whether a question asks the agent to do or suggest something."""
    return REQUEST.search(text) is not None


def shared_stems(question: str, text: str) -> int:
    """Word stems (first four letters of words of four or more) the two share."""
    stems = {w[:4] for w in _STEM.findall(question.lower())}
    return len(stems & {w[:4] for w in _STEM.findall(text.lower())})
