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
- ``covered`` / ``pieces``: banking by content range. A banked range is the harness's ids of
  its first and last record; a transcript is append-only, so a range whose last id is in a
  read covers every turn from its first id (or the read's start) to it. A window is cut
  into parts on a grid fixed by its own turns (``grid``: greedy from its first turn, at
  most ``max_chars`` of rendering a part), so two readers of the same window, whatever
  they banked before, cut the same parts; what a part lacks is banked as a ``Piece``.
- ``build_pack``: the context pack within a token budget (``core.tokens``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
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


# -- banking by content range ---------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """Turns of a window still to bank: within part ``part`` (1-based) of the ``parts`` of
    the window's grid; ``key`` is the id of the window's first record."""

    turns: tuple[Turn, ...]
    part: int
    parts: int
    key: str

    @property
    def first(self) -> str:
        return self.turns[0].uid

    @property
    def last(self) -> str:
        return self.turns[-1].uid


def grid(turns: Sequence[Turn], max_chars: int) -> list[tuple[int, int]]:
    """The window's parts as ``[start, end)`` turn indexes: greedy from the first turn,
    each at most ``max_chars`` of rendering (a longer turn is a part alone)."""
    out: list[tuple[int, int]] = []
    start = used = 0
    for i, t in enumerate(turns):
        cost = len(render((t,))) + 1
        if i > start and used + cost > max_chars:
            out.append((start, i))
            start, used = i, 0
        used += cost
    if start < len(turns):
        out.append((start, len(turns)))
    return out


def covered(turns: Sequence[Turn], spans: Iterable[tuple[str, str]]) -> list[bool]:
    """Which ``turns`` (one read, file order) the banked ranges ``spans`` (first id, last
    id) hold. A range whose last id is not in the read covers nothing of it (it ended
    before, or the read does not know where); one whose first id is not in the read began
    before it."""
    at: dict[str, int] = {}
    for i, t in enumerate(turns):
        if t.uid:
            at.setdefault(t.uid, i)
    out = [False] * len(turns)
    for first, last in spans:
        j = at.get(last) if last else None
        if j is None:
            continue
        i = at.get(first, 0) if first else j
        if i > j:
            continue
        for k in range(i, j + 1):
            out[k] = True
    return out


def pieces(turns: Sequence[Turn], cover: Sequence[bool], max_chars: int) -> list[Piece]:
    """What is left to bank of a window: for each part of its grid, every run of turns
    not covered that has text, in order."""
    parts = grid(turns, max_chars)
    key = turns[0].uid if turns else ""
    out: list[Piece] = []
    for n, (a, b) in enumerate(parts, start=1):
        run: list[Turn] = []
        for k in range(a, b + 1):
            if k < b and not cover[k]:
                run.append(turns[k])
                continue
            if run and render(run):
                out.append(Piece(tuple(run), n, len(parts), key))
            run = []
    return out
