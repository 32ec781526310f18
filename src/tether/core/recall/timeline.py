"""What a question asks of time and of the spread of its answers. Pure, no I/O, no clock.

``intent`` reads a question (and "now", passed in) into an ``Intent``:

- ``period``: the window it names (``core.recall.periods``: "last week", "on May 30", "recently");
- ``listing``: it asks what happened in that window and names no subject ("What did we
  talk about on May 30?", "what did I do last week"): every word left once the period's
  words are gone is one of ``GENERIC_WORDS``. Recall then answers with the turns of the
  window, oldest first, since the words alone find nothing;
- ``order``: it asks which came first or last, or for an order ("Which did I buy
  first", "in what order", "most recently", "how many days between");
- ``aggregate``: it asks how many, which ones, how much in total, or how something
  developed ("How many plants", "all the", "in total", "over time").

A question with ``order`` or ``aggregate`` wants evidence from many conversations, not
ten near-duplicates of one: ``spread`` keeps at most ``SESSION_CAP`` hits of a session in
the first places, the rest after (the ranking within each group unchanged).
``chronological`` is the order ``recall --timeline`` shows hits in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from tether.core.recall import periods, query

#: Words that name no subject: with only these left, a question names a period alone.
GENERIC_WORDS = frozenset(
    {
        "talk",
        "talked",
        "talking",
        "discuss",
        "discussed",
        "chat",
        "chatted",
        "say",
        "said",
        "tell",
        "told",
        "happen",
        "happened",
        "happening",
        "do",
        "did",
        "done",
        "doing",
        "speak",
        "spoke",
        "mention",
        "mentioned",
        "conversation",
        "conversations",
        "going",
        "remind",
        "summarise",
        "summarize",
        "summary",
        "recap",
        "day",
        "up",
    }
)
_ORDER = re.compile(
    r"\b(?:first|earliest|latest|most recent(?:ly)?|in (?:what|which|chronological) order"
    r"|the order|order of|before or after|how (?:many|much) (?:days|weeks|months|years|time)"
    r"|how long)\b",
    re.IGNORECASE,
)
_AGGREGATE = re.compile(
    r"\b(?:how many|how much|in total|total|all the|all of the|every|which ones|list"
    r"|over time|so far|developed|changed|progress(?:ed)?)\b",
    re.IGNORECASE,
)
#: Hits of one session allowed in the first places of a spread ranking.
SESSION_CAP = 2


@dataclass(frozen=True)
class Intent:
    period: periods.Period | None
    listing: bool
    order: bool
    aggregate: bool

    @property
    def spread(self) -> bool:
        """Whether the answer is expected across several conversations."""
        return self.order or self.aggregate


def intent(text: str, now: datetime) -> Intent:
    """What ``text`` asks of time, relative to ``now`` (an aware datetime). Never raises
    on any text (``now`` naive: ValueError, as ``periods.find_period``)."""
    period = periods.find_period(text, now)
    listing = False
    if period is not None:
        rest = query.terms(periods.without(text, period))
        months = {w.lower() for w in period.text.replace(",", " ").split()}
        listing = all(t in GENERIC_WORDS or t in months or t.isdigit() for t in rest)
    return Intent(
        period=period,
        listing=listing,
        order=_ORDER.search(text) is not None,
        aggregate=_AGGREGATE.search(text) is not None,
    )


T = TypeVar("T")


def spread(
    ranked: Sequence[T], session_of: Callable[[T], str | None], cap: int | None = None
) -> list[T]:
    """``ranked`` with at most ``cap`` items of one session first (in rank order), then the
    items held back (in rank order). Items with no session are never held back. The same
    items, none lost or doubled. (``cap``: ``SESSION_CAP`` when None, read at the call.)"""
    cap = SESSION_CAP if cap is None else cap
    first: list[T] = []
    later: list[T] = []
    seen: dict[str, int] = {}
    for item in ranked:
        session = session_of(item)
        if session is not None:
            seen[session] = seen.get(session, 0) + 1
            if seen[session] > cap:
                later.append(item)
                continue
        first.append(item)
    return first + later


def chronological(
    items: Sequence[T], time_of: Callable[[T], datetime | None], key: Callable[[T], str]
) -> list[T]:
    """``items`` oldest first; items without a time last; ties by ``key`` (session, turn)."""
    dated = [(when, key(i), n, i) for n, i in enumerate(items) if (when := time_of(i)) is not None]
    dated.sort(key=lambda dated_item: (dated_item[0], dated_item[1], dated_item[2]))
    return [d[3] for d in dated] + [i for i in items if time_of(i) is None]
