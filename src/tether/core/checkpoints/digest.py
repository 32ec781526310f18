"""A checkpoint's digest, pure and extractive: what the context pack says of a banked
window beside its link, so the agent knows which link to read after a compaction.

Input is a segment's text as banked (``core.checkpoints.window.render`` or
``checkpoint.bank.render_window``): a header line, then ``[time] WHO: text`` blocks
whose continuation lines are indented two spaces; it is already secret-redacted and its
private spans are ``[private]``. Three kinds of line are taken, in the window's own words
(nothing is generated, so nothing can be made up):

- ``asked``: the owner's last requests: the newest ``USER`` blocks that say something
  (three words or more; not the harness's own ``<command-...>`` or caveat notes);
- ``decided``: sentences with a decision word (decided, settled on, going with, chose,
  agreed, instead of, switch to, from now on, ...), newest first, from either side;
- ``open``: open tasks (TODO, FIXME, next step, still need, remaining, follow-up, an
  unticked ``- [ ]``), newest first.

Each kind keeps at most ``PER_KIND`` lines of at most ``ITEM_CHARS`` characters
(whitespace squashed, cut at a word with an ellipsis); a line is used once. A
``<private>`` span that reached the text anyway is hidden again before anything is taken.
Tool calls (``[tool ...]``, ``TOOL ...`` blocks) are never taken: they are not the
conversation.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from tether.core.checkpoints.window import strip_private

PER_KIND = 3
ITEM_CHARS = 160
MIN_REQUEST_WORDS = 3

_BLOCK = re.compile(r"^\[[^\]\n]{1,40}\] ([A-Z]+)\b(.*)$")
_SPEAKER = re.compile(r"^(?: \([^)\n]*\))?: ?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_DECIDED = re.compile(
    r"\b(?:decided|decide to|decision|settled on|settle on|going with|go with|chose|chosen|"
    r"agreed|we(?:'ll| will) use|let's use|instead of|switch(?:ed|ing)? to|from now on|"
    r"stick with|sticking with|opted)\b",
    re.IGNORECASE,
)
_OPEN = re.compile(
    r"(?:\bTODO\b|\bFIXME\b|\bnext steps?\b|\bstill (?:need|have) to\b|\bremaining\b|"
    r"\bleft to do\b|\bfollow[- ]up\b|\bopen question|\bnot (?:done|finished) yet\b|"
    r"^- \[ \])",
    re.IGNORECASE,
)
_HARNESS_NOTE = ("<", "Caveat:", "[Request interrupted")
#: A literal that every match of ``_DECIDED`` / ``_OPEN`` holds (case folded): a block
#: holding none of them has no sentence to take, and is skipped without running the
#: patterns over it (their alternations cost ~40 us a sentence; a session digest
#: (``core.recall.summaries``) reads long replies).
_DECIDED_WORDS: tuple[str, ...] = (
    "decid",
    "decision",
    "settle",
    "go with",
    "going with",
    "chose",
    "agreed",
    "we'll use",
    "we will use",
    "let's use",
    "instead of",
    "switch",
    "from now on",
    "stick",
    "opted",
)
_OPEN_WORDS: tuple[str, ...] = (
    "todo",
    "fixme",
    "next step",
    "still",
    "remaining",
    "left to do",
    "follow",
    "open question",
    "yet",
    "- [ ]",
)


@dataclass(frozen=True)
class Digest:
    asked: tuple[str, ...] = ()
    decided: tuple[str, ...] = ()
    open: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """``asked: ...``, ``decided: ...``, ``open: ...`` lines, in that order."""
        return [
            *(f"asked: {a}" for a in self.asked),
            *(f"decided: {d}" for d in self.decided),
            *(f"open: {o}" for o in self.open),
        ]


def blocks(text: str) -> Iterator[tuple[str, str]]:
    """(who, text) of each block: ``USER``, ``ASSISTANT``, ``TOOL``..., with continuation
    lines joined back; the header and anything before the first block are skipped."""
    who: str | None = None
    lines: list[str] = []
    for line in text.split("\n"):
        m = _BLOCK.match(line)
        if m is not None:
            if who is not None:
                yield who, "\n".join(lines)
            who, rest = m.group(1), m.group(2)
            lines = [_SPEAKER.sub("", rest, count=1)]
        elif who is not None:
            lines.append(line.removeprefix("  "))
    if who is not None:
        yield who, "\n".join(lines)


def clip(text: str, limit: int = ITEM_CHARS) -> str:
    """``text`` on one line (whitespace squashed), cut at a word within ``limit``."""
    one = " ".join(text.split())
    if len(one) <= limit:
        return one
    cut = one[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def _sentences(text: str) -> Iterator[str]:
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line.startswith("[tool "):
            continue
        yield from (s for s in _SENTENCE.split(line) if s.strip())


def _request(text: str) -> str | None:
    body = text.strip()
    if body.startswith(_HARNESS_NOTE) or body.replace("[private]", "").strip() == "":
        return None
    if len(body.split()) < MIN_REQUEST_WORDS:
        return None
    return clip(body)


def digest(text: str) -> Digest:
    """The digest of a segment's text (see the module doc)."""
    convo = [
        (who, body) for who, body in blocks(strip_private(text)) if who in ("USER", "ASSISTANT")
    ]
    used: set[str] = set()

    def take(candidates: Iterator[str]) -> tuple[str, ...]:
        out: list[str] = []
        for c in candidates:
            if len(out) == PER_KIND:
                break
            if c and c not in used:
                used.add(c)
                out.append(c)
        return tuple(out)

    def newest_sentences(pattern: re.Pattern[str], words: tuple[str, ...]) -> Iterator[str]:
        for _, body in reversed(convo):
            folded = body.casefold()
            if not any(w in folded for w in words):
                continue
            for s in reversed(list(_sentences(body))):
                folded = s.casefold()
                if any(w in folded for w in words) and pattern.search(s):
                    yield clip(s)

    asked = take(r for who, body in reversed(convo) if who == "USER" for r in [_request(body)] if r)
    decided = take(newest_sentences(_DECIDED, _DECIDED_WORDS))
    open_ = take(newest_sentences(_OPEN, _OPEN_WORDS))
    return Digest(tuple(reversed(asked)), decided, open_)
