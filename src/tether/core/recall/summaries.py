"""Session and epoch summaries as recall units: what each says and the turns it points to.

A recall unit is one indexed row that stands for a range of turns, so a question about
how something went over a session ("what did we settle about the flat") can be answered
with one hit that a caller then opens (``tether session show --turns``, the MCP
``read`` of its ``tether://turn:`` link). Two kinds:

- **epoch** (``epoch-summary``): the summary a compaction carried into the next epoch
  (``EpochEnd.summary``: the model's, or the owner's own messages when the model call
  failed); it covers the turns of the epoch that ended.
- **session** (``session-summary``): an extractive digest of the whole session, in its own
  words (nothing generated, so it costs no model call and works with the bundled model or
  no server at all): the owner's first request (what the session was about), then
  ``core.checkpoints.digest``'s asked / decided / open lines over the session's last
  ``DIGEST_TURNS`` turns. It covers turns 1 to the last indexed one and is rebuilt when
  the session grows (the indexer replaces it by session; the old one goes).

A unit's ref names its range, ``summary:<session>:<first>-<last>`` or
``summary:<session>:e<epoch>:<first>-<last>`` (session ids hold no ``:``), so a hit
carries it with no extra column and a grown session's unit is a new ref. Pure: rows in,
text out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tether.core.checkpoints import digest
from tether.records import LogRow

#: Turns of a session read for its digest (the newest; plus its first request): a long
#: session's digest costs the same as a short one's.
DIGEST_TURNS = 60
#: Turns a session needs before it gets a digest: a shorter one's digest would repeat its
#: turns word for word (one more near-duplicate in every recall that finds them).
MIN_TURNS = 3
#: Characters of the owner's first request kept as the session's topic.
TOPIC_CHARS = 240
#: Characters of an epoch's summary kept in its unit (compaction caps it already).
EPOCH_CHARS = 4000

_REF = re.compile(r"^summary:([a-z0-9-]{1,64}):(?:e([0-9]{1,9}):)?([0-9]{1,12})-([0-9]{1,12})$")


@dataclass(frozen=True)
class Span:
    """The turns a unit covers: ``epoch`` None for a session's digest."""

    session: str
    epoch: int | None
    first: int
    last: int

    @property
    def ref(self) -> str:
        where = "" if self.epoch is None else f"e{self.epoch}:"
        return f"summary:{self.session}:{where}{self.first}-{self.last}"

    @property
    def kind(self) -> str:
        return "session-summary" if self.epoch is None else "epoch-summary"


@dataclass(frozen=True)
class Unit:
    """A unit as the indexer hands it to the store: its span, text, when it was written
    (its last turn's time, so recall ``--as-of`` an earlier day leaves it out) and taint
    (any tainted row it was made from)."""

    span: Span
    text: str
    time: datetime
    tainted: bool


def span_of(ref: str) -> Span | None:
    """The span a unit's ref names; None for any other ref."""
    m = _REF.match(ref)
    if m is None:
        return None
    epoch = None if m.group(2) is None else int(m.group(2))
    return Span(m.group(1), epoch, int(m.group(3)), int(m.group(4)))


def _rendered(rows: Sequence[LogRow]) -> str:
    """Rows as a banked segment's blocks, what ``core.checkpoints.digest`` reads."""
    out = []
    for r in rows:
        who = "USER" if r.field == "user" else "ASSISTANT"
        body = r.text.replace("\n", "\n  ")
        out.append(f"[t{r.turn}] {who}: {body}")
    return "\n".join(out)


def session_unit(
    session: str, first: Sequence[LogRow], recent: Sequence[LogRow], turns: int
) -> Unit | None:
    """The digest unit of a session of ``turns`` turns from its first turn's rows (empty
    when ``recent`` holds it) and its newest turns' rows (as the index holds them:
    redacted; other fields are left out); None when the session has no owner words or
    fewer than ``MIN_TURNS`` turns."""
    if turns < MIN_TURNS:
        return None
    rows = [r for r in (*first, *recent) if r.field in ("user", "assistant")]
    owner = [r for r in rows if r.field == "user" and r.text.strip()]
    if not owner:
        return None
    topic = digest.clip(owner[0].text, TOPIC_CHARS)
    lines = [f"about: {topic}"]
    lines += [ln for ln in digest.digest(_rendered(recent)).lines() if ln != f"asked: {topic}"]
    tainted = any(r.tainted for r in rows)
    when = max(r.time for r in rows)
    return Unit(Span(session, None, 1, max(turns, 1)), "\n".join(lines), when, tainted)


def epoch_unit(span: Span, text: str, time: datetime, *, tainted: bool = False) -> Unit | None:
    """The unit of a compaction's summary of ``span.epoch``; None when the epoch held no
    turn or the summary says nothing. ``tainted``: the session had read untrusted content
    by the epoch's end (the summary may repeat it)."""
    body = text.strip()
    if not body or span.last < span.first or span.last < 1:
        return None
    return Unit(span, body[:EPOCH_CHARS], time, tainted)
