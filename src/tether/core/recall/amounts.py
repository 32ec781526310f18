"""Questions about money, and the turns where the owner stated a sum. Pure, no I/O.

A question that asks how much was spent, paid, earned, raised or saved ("How much total
money did I spend on workshops?", "the total cost of the bowl and the collar I got for
Max") is answered by the turns where the owner said a sum ("I paid $200 to attend"). Its
words find the right conversations, but in a conversation about workshops every turn says
"workshop": the ones holding the amounts are what the question needs, and a count or a
total needs all of them. ``asks_amount`` reads such a question; ``lift`` raises the found
turns whose owner's words hold an amount (``$20``, ``20 dollars``, ``€15``) by
``AMOUNT_LIFT``. It adds no turn the search did not find, and a sum that only a reply
names (the assistant quoting prices) lifts nothing.

Measured on LongMemEval (``benchmarks/longmemeval_retrieval.py``; benchmarks/RESULTS.md,
branch ``turns``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from tether.core.recall.ranking import Scored

#: A found turn stating an amount scores ``1 + AMOUNT_LIFT`` times its score.
AMOUNT_LIFT = 1.0

_MONEY = re.compile(
    r"\b(?:money|cost|costs|spend|spent|paid|pay|price|earn|earned|raise|raised|save|saved"
    r"|budget|dollars?|expenses?)\b|\$",
    re.IGNORECASE,
)
_HOW_MUCH = re.compile(r"\b(?:how much|total|amount)\b", re.IGNORECASE)
# "How many days did I spend", "how much time": a quantity, not a sum of money.
_NOT_MONEY = re.compile(
    r"\bhow (?:many|much) (?:days|weeks|months|years|hours|minutes|time|weight)\b",
    re.IGNORECASE,
)
_AMOUNT = re.compile(
    r"[$€£¥]\s?\d|\b\d+(?:[.,]\d+)?\s?(?:dollars|bucks|euros|pounds|usd|eur|gbp)\b",
    re.IGNORECASE,
)


def asks_amount(question: str) -> bool:
    """Whether ``question`` asks for a sum of money (how much, a total, an amount, of
    something spent, paid, earned...). Never raises on any text."""
    return (
        _MONEY.search(question) is not None
        and _HOW_MUCH.search(question) is not None
        and _NOT_MONEY.search(question) is None
    )


def states_amount(text: str) -> bool:
    """Whether ``text`` names a sum of money ("$200", "30 dollars", "€15")."""
    return _AMOUNT.search(text) is not None


def lift(turns: Sequence[Scored], by: float | None = None) -> list[Scored]:
    """``turns`` with each one whose owner's words state an amount scoring ``1 + by`` times
    as much (``by``: ``AMOUNT_LIFT``, read when called), best first; ties keep their order.
    The same turns, none added or lost."""
    by = AMOUNT_LIFT if by is None else by
    out = [
        replace(t, score=t.score * (1 + by))
        if any(r.field == "user" and states_amount(r.text) for r in t.rows)
        else t
        for t in turns
    ]
    out.sort(key=lambda turn: -turn.score)
    return out
