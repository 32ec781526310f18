"""What ``tether mcp`` decides, pure: the ``tether://`` link grammar, the lanes' fences,
and compact recall hits packed within a token budget.

Links. A hit's ref becomes a link a client reads back with the ``read`` tool:

- ``tether://<slug>``: a page (``people/ada``; the slug grammar of ``tether.ids``);
- ``tether://fact:<id>``: one of the sweep's active facts;
- ``tether://note:<id>``, ``tether://identity:m-<6 hex>``: a note, an identity entry;
- ``tether://turn:<session>:<n>`` or ``...:<n>-<m>``: turns of a session (at most
  ``MAX_TURN_SPAN`` of them), rendered from its logs, redacted as the index holds them;
- ``tether://corpus/<session>.seg-<24 hex>``: a banked compaction window (its grammar is
  checked by ``tether.checkpoint.bank``).

A slug never holds ``:`` and never starts with ``corpus/``, so the forms cannot overlap;
no form admits ``..`` or a ``/`` outside a slug, so no link names a path.

Lanes. ``local`` (stdio: the owner's own harness started the server) sees everything.
``remote`` (streamable HTTP, a bearer token) sees world-visibility pages and facts only:
``fence`` refuses every other kind of link before anything is read, and the service
checks the visibility of the page or fact itself.

Budget. ``pack`` keeps the hits, in order, whose JSON fits ``result_tokens`` counted by
``tether.core.context.tokens`` (tether's deterministic counter: about one token per four
characters of prose), the envelope included; the first hit's text is cut to fit rather
than returning nothing, and ``left_out`` says how many did not fit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import msgspec

from tether.core.context import tokens
from tether.core.recall.summaries import span_of
from tether.errors import BadInputError, InvalidIdError
from tether.ids import is_page_slug, is_session_id

Lane = Literal["local", "remote"]
LinkKind = Literal["page", "fact", "note", "identity", "turns", "segment"]
#: The only kinds a remote client may read (and recall may hand it).
REMOTE_KINDS: frozenset[str] = frozenset({"page", "fact"})

PREFIX = "tether://"
SEGMENT_PREFIX = "tether://corpus/"
LINK_GRAMMAR = (
    "tether://<page slug>, tether://fact:<id>, tether://note:<id>, "
    "tether://identity:m-<6 hex>, tether://turn:<session>:<n>[-<m>] or "
    "tether://corpus/<session>.seg-<24 hex>"
)
#: The longest link accepted, in characters (a slug is at most 128).
MAX_LINK_CHARS = 256
#: Turns one ``tether://turn:`` link may span.
MAX_TURN_SPAN = 50
#: Characters of a hit's first line kept in a compact hit.
LINE_CHARS = 200

_NUMBER = re.compile(r"[0-9]{1,12}")
_IDENTITY = re.compile(r"m-[0-9a-f]{6}")
_TURNS = re.compile(r"([a-z0-9-]{1,64}):([0-9]{1,9})(?:-([0-9]{1,9}))?")


class FenceError(BadInputError):
    """A link outside the caller's lane: a remote client asked for a transcript, a
    segment, a note or identity, or for a page or fact that is not world-visible (lane,
    link)."""

    def __init__(self, lane: Lane, link: str, what: str) -> None:
        self.lane = lane
        self.link = link
        super().__init__(
            f"refused: {link} is {what}; a remote client (tether mcp --http) sees "
            "world-visibility pages and facts only"
        )


@dataclass(frozen=True)
class Link:
    """A parsed ``tether://`` link. ``key``: the page slug, the fact or note id, the
    identity entry id, the segment's name, or the session of a turn range."""

    kind: LinkKind
    text: str
    key: str
    first: int = 0
    last: int = 0


def _bad(text: str) -> InvalidIdError:
    return InvalidIdError("tether link", text[:MAX_LINK_CHARS], LINK_GRAMMAR)


def parse_link(text: str) -> Link:
    """The link ``text`` names; InvalidIdError (with the grammar) for anything else."""
    if len(text) > MAX_LINK_CHARS or not text.startswith(PREFIX):
        raise _bad(text)
    if text.startswith(SEGMENT_PREFIX):
        return Link("segment", text, text.removeprefix(SEGMENT_PREFIX))
    rest = text.removeprefix(PREFIX)
    head, colon, tail = rest.partition(":")
    if not colon:
        if not is_page_slug(rest):
            raise _bad(text)
        return Link("page", text, rest)
    if head == "fact" and _NUMBER.fullmatch(tail):
        return Link("fact", text, str(int(tail)))
    if head == "note" and _NUMBER.fullmatch(tail):
        return Link("note", text, str(int(tail)))
    if head == "identity" and _IDENTITY.fullmatch(tail):
        return Link("identity", text, tail)
    m = _TURNS.fullmatch(tail) if head == "turn" else None
    if m is None or not is_session_id(m.group(1)):
        raise _bad(text)
    first = int(m.group(2))
    last = int(m.group(3)) if m.group(3) is not None else first
    if last < first or last - first >= MAX_TURN_SPAN:
        raise BadInputError(
            f"{text}: a turn range runs from a turn to a later one, at most "
            f"{MAX_TURN_SPAN} turns (tether://turn:<session>:<n>-<m>)"
        )
    return Link("turns", text, m.group(1), first, last)


def link_of(ref: str) -> str:
    """The link of a recall hit's ref (``page:<slug>``, ``fact:<id>``, ``note:<id>``,
    ``identity:<id>``, ``turn:<session>:<n>``); a summary unit's (``core.recall.summaries``) is
    its turns, the first ``MAX_TURN_SPAN`` of them when it covers more."""
    kind, _, key = ref.partition(":")
    if kind == "page":
        return PREFIX + key
    span = span_of(ref)
    if span is not None:
        last = min(span.last, span.first + MAX_TURN_SPAN - 1)
        return f"{PREFIX}turn:{span.session}:{span.first}-{last}"
    return PREFIX + ref


def fence(link: Link, lane: Lane) -> None:
    """Refuse a link the lane may never read, before anything is read."""
    if lane == "local" or link.kind in REMOTE_KINDS:
        return
    what = {
        "turns": "a session transcript",
        "segment": "a banked session segment",
        "note": "a note",
        "identity": "an identity entry",
    }[link.kind]
    raise FenceError(lane, link.text, what)


# -- compact hits within the budget -------------------------------------------------------


@dataclass(frozen=True)
class CompactHit:
    """One recall hit as a client first sees it: enough to decide whether to ``read``."""

    id: str
    kind: str
    time: str | None
    link: str
    trust: Literal["trusted", "untrusted"]
    text: str  # the first non-blank line, at most LINE_CHARS characters
    session: str | None = None
    #: The banked window (``tether://corpus/...``) a harness session's hit came from.
    segment: str | None = None
    #: A summary unit's turns, ``<first>-<last>`` (its link reads at most
    #: ``MAX_TURN_SPAN`` of them), and when its first turn was written.
    turns: str | None = None
    since: str | None = None


def first_line(text: str, limit: int = LINE_CHARS) -> str:
    """The first non-blank line of ``text``, white space collapsed, cut to ``limit``."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _shape(hits: Sequence[CompactHit], left_out: int, notice: str | None) -> dict[str, Any]:
    shape: dict[str, Any] = {
        "hits": [{k: v for k, v in vars(h).items() if v is not None or k == "time"} for h in hits],
        "left_out": left_out,
    }
    if notice is not None:  # only when there is something to say: the key is then new
        shape["notice"] = notice
    return shape


def render(hits: Sequence[CompactHit], left_out: int, notice: str | None = None) -> str:
    """The JSON text the ``recall`` tool returns; ``notice``: one line the client should
    know about the search itself (that it was lexical, and why)."""
    return msgspec.json.encode(_shape(hits, left_out, notice)).decode()


def cost(hits: Sequence[CompactHit], left_out: int, notice: str | None = None) -> int:
    """Tokens of ``render(hits, left_out, notice)``."""
    return tokens.count(render(hits, left_out, notice))


def pack(
    hits: Sequence[CompactHit], budget: int, notice: str | None = None
) -> tuple[list[CompactHit], int]:
    """The longest prefix of ``hits`` whose rendering (``notice`` included) fits
    ``budget`` tokens, and how many were left out. When not even the first hit fits
    whole, its text is cut to fit (and it is left out if even an empty text does not)."""
    kept: list[CompactHit] = []
    for i, hit in enumerate(hits):
        rest = len(hits) - i - 1
        if cost([*kept, hit], rest, notice) <= budget:
            kept.append(hit)
            continue
        if not kept:
            cut = _cut_to_fit(hit, rest, budget, notice)
            if cut is not None:
                return [cut], rest
        return kept, len(hits) - len(kept)
    return kept, 0


def _cut_to_fit(hit: CompactHit, rest: int, budget: int, notice: str | None) -> CompactHit | None:
    lo, hi = 0, len(hit.text)  # the longest prefix that fits, by bisection
    if cost([replace(hit, text="")], rest, notice) > budget:
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cost([replace(hit, text=hit.text[:mid])], rest, notice) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return replace(hit, text=hit.text[:lo])
