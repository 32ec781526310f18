"""Checkpoint windows of a harness's transcript, pure: private text, windows between
compaction boundaries, their rendering, the coverage decision, and the context pack.

A harness (Claude Code, Codex) owns its context window; what tether sees is its transcript:
turns, and now and then a compaction boundary (Claude Code's ``compact_boundary`` record,
Codex's ``compacted`` one). The turns between two boundaries are a **window**: what the
harness is about to summarise (or did). The harness's own summary record after a boundary
(``isCompactSummary``) is never a turn of any window: the reader drops it before it gets here.

- ``strip_private``: text the owner wraps in ``<private>`` ... ``</private>`` becomes
  ``[private]`` before anything is banked, indexed or extracted. An opening tag that is
  never closed hides everything after it (the safe side).
- ``split_windows``: entries (turns and boundaries, file order) -> windows. ``complete`` is
  False for the first window when the read began mid-file (only a tail was read): its
  start is unknown, so its hash cannot be compared with one computed from a full parse.
- ``render``: a window as the plain text a segment holds (deterministic: one block a turn,
  continuation lines indented so no text can forge a turn line).
- ``coverage``: the session-end decision (``remainder``, ``skip_covered``, ``full_fallback``)
  from exact-set hashes, never counts.
- ``build_pack``: the context pack within a token budget (``core.tokens``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from tether.core import tokens

PRIVATE_MARK = "[private]"
_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.DOTALL | re.IGNORECASE)


def strip_private(text: str) -> str:
    """``text`` with every ``<private>...</private>`` span replaced by ``[private]``."""
    if "<" not in text:
        return text
    return _PRIVATE.sub(PRIVATE_MARK, text)


@dataclass(frozen=True)
class Turn:
    """One turn of a transcript: who, what, when (RFC 3339 text, as the harness wrote it),
    and the harness's id of the record (Claude Code's ``uuid``; "" when there is none)."""

    role: Literal["user", "assistant"]
    text: str
    time: str
    uid: str = ""


@dataclass(frozen=True)
class BoundaryMark:
    """A compaction boundary in the transcript (``trigger``: manual, auto, or "")."""

    trigger: str = ""
    uid: str = ""


Entry = Turn | BoundaryMark


@dataclass(frozen=True)
class Window:
    """The turns between two boundaries. ``closed``: a boundary ends it (the harness
    compacted it); the last window of a transcript is open until the next compaction.
    ``complete``: its start is known (a boundary, or the file's first byte, was read)."""

    ordinal: int  # 0 for the first window read
    turns: tuple[Turn, ...]
    closed: bool
    complete: bool

    @property
    def first(self) -> str:
        return self.turns[0].uid if self.turns else ""

    @property
    def last(self) -> str:
        return self.turns[-1].uid if self.turns else ""


def split_windows(entries: Sequence[Entry], *, from_start: bool) -> list[Window]:
    """Windows in file order; the last one is open (it may be empty). ``from_start``: the
    entries begin at the transcript's first line (else the first window is incomplete)."""
    windows: list[Window] = []
    current: list[Turn] = []
    for entry in entries:
        if isinstance(entry, BoundaryMark):
            complete = from_start or bool(windows)
            windows.append(Window(len(windows), tuple(current), True, complete))
            current = []
        else:
            current.append(entry)
    windows.append(Window(len(windows), tuple(current), False, from_start or bool(windows)))
    return windows


def render(turns: Sequence[Turn]) -> str:
    """``[time] USER: text`` / ``[time] ASSISTANT: text`` blocks, a blank line between;
    private spans already ``[private]``; "" when there is no turn with text."""
    blocks = []
    for t in turns:
        text = strip_private(t.text).strip()
        if not text:
            continue
        who = "USER" if t.role == "user" else "ASSISTANT"
        blocks.append(f"[{t.time}] {who}: {text}".replace("\n", "\n  "))
    return "\n\n".join(blocks) + "\n" if blocks else ""


SessionEndMode = Literal["remainder", "skip_covered", "full_fallback"]


def coverage(
    windows: Sequence[Window], banked: frozenset[str], hash_of: Callable[[Window], str | None]
) -> SessionEndMode:
    """What session end writes: ``full_fallback`` unless every closed, complete window's
    hash (``hash_of``: None for an empty one) is in ``banked``; then ``remainder`` when
    the open window has text not banked yet, else ``skip_covered``."""
    for w in windows:
        if w.closed and w.complete:
            h = hash_of(w)
            if h is not None and h not in banked:
                return "full_fallback"
    if not windows or windows[-1].closed:
        return "skip_covered"
    h = hash_of(windows[-1])
    return "skip_covered" if h is None or h in banked else "remainder"


PACK_HEADER = "# tether memory\n\n"
CHECKPOINTS = "## Compaction checkpoints\n\n"


def build_pack(
    identity: Sequence[str], facts: Sequence[str], links: Sequence[str], budget: int
) -> str:
    """The context pack: a header, the checkpoint links (first: they are what the agent
    re-pulls after a compaction), then identity entries, then facts, each line while it
    fits ``budget`` tokens, with a line saying how many did not (when it fits). Never over
    budget (a budget below the header gives "")."""
    used = tokens.count(PACK_HEADER)
    if used > budget:
        return ""
    out = [PACK_HEADER]
    omitted = 0
    sections = (
        (CHECKPOINTS, [f"- {link}\n" for link in links]),
        ("## Identity\n\n", [f"- {text}\n" for text in identity]),
        ("## Facts\n\n", [f"- {text}\n" for text in facts]),
    )
    note = "({} more lines not shown; use `tether memory recall`)\n"
    reserve = tokens.count(note.format(sum(len(lines) for _, lines in sections)))
    for title, lines in sections:
        if not lines:
            continue
        head = title
        for line in lines:
            cost = tokens.count(head + line)
            if omitted == 0 and used + cost + 1 + reserve <= budget:
                out.append(head + line)
                used += cost
                head = ""
            else:
                omitted += 1
        if not head:
            out.append("\n")
            used += 1
    if omitted and used + tokens.count(note.format(omitted)) <= budget:
        out.append(note.format(omitted))
    return "".join(out)
