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
  continuation lines indented so no text can forge a turn line); ``parse_rendered``, its
  inverse: a banked segment's turns again (what recall indexes of it).
- ``coverage``: the session-end decision (``remainder``, ``skip_covered``, ``full_fallback``)
  from exact-set hashes, never counts.
- ``build_pack``: the context pack within a token budget (``core.context.tokens``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from tether.core.context import tokens

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


_BLOCK = re.compile(r"\[([^\]\n]*)\] (USER|ASSISTANT): ?(.*)")


def parse_rendered(body: str) -> list[Turn]:
    """The turns ``render`` wrote (its inverse, for a segment's body: header line removed),
    each text as the segment holds it: private spans ``[private]``, secrets redacted.

    A line at column 0 that reads ``[time] USER: `` or ``[time] ASSISTANT: `` opens a turn;
    the lines after it indented by two spaces continue it (``render`` indents every
    continuation line, so a text cannot forge a turn line); blank lines separate turns.
    Anything else (a line a hand edit left unindented) is kept as a continuation."""
    turns: list[Turn] = []
    role: Literal["user", "assistant"] | None = None
    time = ""
    lines: list[str] = []

    def close() -> None:
        if role is not None:
            text = "\n".join(lines).strip()
            if text:
                turns.append(Turn(role, text, time))

    for line in body.split("\n"):
        if not line:
            continue
        m = _BLOCK.fullmatch(line)
        if m is not None:
            close()
            time, role = m.group(1), "user" if m.group(2) == "USER" else "assistant"
            lines = [m.group(3)]
        elif role is not None:
            lines.append(line[2:] if line.startswith("  ") else line)
    close()
    return turns


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
#: What the agent is told to do with a link (the MCP server's tool names: mcp.server).
READ_GUIDE = (
    "Each tether:// link below is the raw text of what an earlier compaction summarised: "
    "read one with the `read` tool of the `tether` MCP server (in Claude Code: "
    "`mcp__tether__read`), or search with its `recall` tool (`mcp__tether__recall`).\n\n"
)
#: Claude Code keeps a hook's ``additionalContext`` up to 10,000 characters and files
#: the rest away behind a preview: the pack stays under this, whatever its token budget.
MAX_PACK_CHARS = 9_500
_OMITTED = "({} more lines not shown; use `tether memory recall`)\n"


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint's link and its digest lines (``core.checkpoints.digest``), for the pack."""

    link: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Item:
    section: int  # 0 checkpoints, 1 identity, 2 facts; -1 the guide
    owner: int  # the checkpoint a link or note belongs to (its index), else -1
    line: str


_TITLES = {0: CHECKPOINTS, 1: "## Identity\n\n", 2: "## Facts\n\n"}


def _render(chosen: Sequence[_Item], omitted: int) -> str:
    out = [PACK_HEADER]
    if any(i.section == -1 for i in chosen):
        out.append(READ_GUIDE)
    for section, title in _TITLES.items():
        lines = [i for i in chosen if i.section == section]
        if section == 0:  # each checkpoint's notes under its link
            lines.sort(key=lambda item: (item.owner, item.line.startswith("  ")))
        if lines:
            out += [title, *(i.line for i in lines), "\n"]
    if omitted:
        out.append(_OMITTED.format(omitted))
    return "".join(out)


def build_pack(
    identity: Sequence[str],
    facts: Sequence[str],
    links: Sequence[str | Checkpoint],
    budget: int,
    *,
    max_chars: int = MAX_PACK_CHARS,
) -> str:
    """The context pack: a header, the checkpoints (the links of those with a digest
    first: they are what the agent re-pulls after a compaction; how to read one; their
    digest lines; the other links), then identity entries, then facts; each line while it fits
    ``budget`` tokens and ``max_chars`` characters, the first that does not ending the
    pack, with a line saying how many did not (when it fits). Never over either (a budget
    below the header gives "")."""
    if tokens.count(PACK_HEADER) > budget or len(PACK_HEADER) > max_chars:
        return ""
    points = [c if isinstance(c, Checkpoint) else Checkpoint(c) for c in links]
    noted = [i for i, c in enumerate(points) if c.notes]
    bare = [i for i, c in enumerate(points) if not c.notes]
    # the links with a digest, how to read them, their digests, then the other links
    order: list[_Item] = [_Item(0, i, f"- {points[i].link}\n") for i in noted]
    order += [_Item(0, i, f"  - {n}\n") for i in noted for n in points[i].notes]
    order += [_Item(0, i, f"- {points[i].link}\n") for i in bare]
    if points:
        order.insert(1, _Item(-1, -1, READ_GUIDE))
    order += [_Item(1, -1, f"- {t}\n") for t in identity]
    order += [_Item(2, -1, f"- {t}\n") for t in facts]
    lines = sum(1 for i in order if i.section >= 0)
    note = _OMITTED.format(lines)
    used, chars = tokens.count(PACK_HEADER), len(PACK_HEADER)
    chosen: list[int] = []
    titled: set[int] = set()
    for n, item in enumerate(order):
        title = _TITLES[item.section] if item.section >= 0 and item.section not in titled else ""
        cost = tokens.count(title + item.line) + (1 if title else 0)
        size = len(title) + len(item.line) + (1 if title else 0)
        more = n + 1 < len(order)
        reserve, room = (tokens.count(note), len(note)) if more else (0, 0)
        if used + cost + reserve > budget or chars + size + room > max_chars:
            if item.section == -1:  # the guide is worth having, not worth stopping for
                continue
            break
        chosen.append(n)
        titled.add(item.section)
        used, chars = used + cost, chars + size

    def text_of(picked: list[int], with_note: bool = True) -> str:
        left = lines - sum(1 for n in picked if order[n].section >= 0)
        return _render([order[n] for n in picked], left if with_note else 0)

    text = text_of(chosen)
    while chosen and (tokens.count(text) > budget or len(text) > max_chars):
        chosen.pop()  # the estimate above was short: give up lines from the end
        text = text_of(chosen)
    if tokens.count(text) > budget or len(text) > max_chars:
        text = text_of(chosen, with_note=False)  # not even the omitted line fits
    return text
