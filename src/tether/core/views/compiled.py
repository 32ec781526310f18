"""Compiled views: the owner's pages as a context file another harness loads (a CLAUDE.md
``@import`` fragment, an AGENTS.md managed block, an OpenClaw workspace file).

Selection is three arms over the pages, all deterministic:

- **pinned**: pages tagged ``compile-context``, always candidates, ranked above every
  other page;
- **durable**: pages under ``concepts/``, ``people/``, ``companies/`` and ``originals/``,
  the newest ``PREFIX_CAP`` of each prefix;
- **recent**: pages updated within ``RECENT_DAYS`` of the newest page, the newest
  ``RECENT_CAP`` of them.

Only pages that may leave the home are candidates: ``world`` visibility, trusted (a page
the agent wrote from fetched content must never instruct another agent), outside
``corpus/``. Recency is measured from the newest ``updated_at`` among the candidates,
never the wall clock, and the order is total (pinned first, then weight, then slug), so
an unchanged set of pages gives identical bytes on any day. An entry is the page's title,
its ``tether://`` link and an excerpt of at most ``EXCERPT_CHARS`` characters.

``pack`` fits the whole file (header included) into a token budget (``core.context.tokens``);
what is left out is reported by the caller, never silently. What may not leave the home
(secrets, personal data, the owner's blocklist) is dropped by the caller before packing.
Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, Literal, TypeVar

from tether.core.context import tokens
from tether.errors import ManagedBlockError
from tether.records import Page

Target = Literal["claude-code", "codex", "openclaw"]
TARGETS: tuple[Target, ...] = ("claude-code", "codex", "openclaw")
#: Where each target's file goes, relative to the directory it is compiled in.
DEFAULT_PATHS: dict[Target, str] = {
    "claude-code": ".claude/tether-context.md",
    "codex": "AGENTS.md",
    "openclaw": ".tether/compiled-context.md",
}
PIN_TAG = "compile-context"
DURABLE_PREFIXES = ("concepts/", "people/", "companies/", "originals/")
PREFIX_CAP = 50
RECENT_DAYS = 30
RECENT_CAP = 500
EXCERPT_CHARS = 600
DEFAULT_BUDGET = 3000
#: A durable page keeps at least this weight however old it is (a person does not fade).
DURABLE_FLOOR = 0.5

Arm = Literal["pinned", "durable", "recent"]
R = TypeVar("R")


@dataclass(frozen=True)
class Chosen:
    """A selected page: why (``arm``) and its weight."""

    page: Page
    arm: Arm
    weight: float


@dataclass(frozen=True)
class Packed(Generic[R]):
    """The file's text, the entries in it (slugs, in order), the entries ``refuse`` kept
    out (slug, its reason), those left out for the budget (slugs), and the token count."""

    text: str
    included: tuple[str, ...]
    refused: tuple[tuple[str, R], ...]
    over_budget: tuple[str, ...]
    tokens: int


def leaves_home(page: Page) -> str | None:
    """Why ``page`` may not be in a view (``private``, ``untrusted``, ``corpus``), or None."""
    if page.slug.startswith("corpus/"):
        return "corpus"
    if page.visibility != "world":
        return "private"
    if page.untrusted:
        return "untrusted"
    return None


def select(pages: Iterable[Page]) -> list[Chosen]:
    """The candidates of a view, best first (see the module docstring)."""
    candidates = sorted(
        (p for p in pages if leaves_home(p) is None), key=lambda page: (-_micros(page), page.slug)
    )
    if not candidates:
        return []
    anchor = candidates[0].updated_at  # the newest page: recency never reads a clock
    arms: dict[str, Arm] = {}
    per_prefix: dict[str, int] = {}
    recent = 0
    for p in candidates:  # newest first, so each cap keeps the newest
        if PIN_TAG in p.tags:
            arms[p.slug] = "pinned"
            continue
        prefix = next((x for x in DURABLE_PREFIXES if p.slug.startswith(x)), None)
        if prefix is not None and per_prefix.get(prefix, 0) < PREFIX_CAP:
            per_prefix[prefix] = per_prefix.get(prefix, 0) + 1
            arms[p.slug] = "durable"
        elif anchor - p.updated_at <= timedelta(days=RECENT_DAYS) and recent < RECENT_CAP:
            recent += 1
            arms[p.slug] = "recent"
    chosen = [
        Chosen(p, arms[p.slug], _weight(p, anchor, arms[p.slug]))
        for p in candidates
        if p.slug in arms
    ]
    chosen.sort(
        key=lambda choice: (
            choice.arm != "pinned",
            -choice.weight,
            -_micros(choice.page),
            choice.page.slug,
        )
    )
    return chosen


def _micros(page: Page) -> int:
    return int(page.updated_at.timestamp() * 1_000_000)


def _weight(page: Page, anchor: datetime, arm: Arm) -> float:
    """Halves every ``RECENT_DAYS`` of age behind the newest page; durable pages keep at
    least ``DURABLE_FLOOR``. Rounded so the order never hangs on a float's last bit."""
    age_days = (anchor - page.updated_at).total_seconds() / 86_400
    weight = math.pow(0.5, age_days / RECENT_DAYS)
    if arm == "durable":
        weight = max(weight, DURABLE_FLOOR)
    return round(weight, 9)


_HEADING = re.compile(r"\A\s*#[^\n]*\n")
_SPACE = re.compile(r"[ \t]+")
_BLANKS = re.compile(r"\n{3,}")


def excerpt(body: str, title: str, limit: int = EXCERPT_CHARS) -> str:
    """The body without a first heading that repeats the title, runs of spaces and of
    blank lines squeezed, cut to ``limit`` characters at a word boundary with an
    ellipsis."""
    text = body.replace("\r\n", "\n")
    first = _HEADING.match(text)
    if first and first.group().strip().lstrip("#").strip() == title.strip():
        text = text[first.end() :]
    # Squeezing a prefix gives a prefix of the whole text squeezed (it only shortens and
    # never looks ahead), so once that is over the limit the cut is the same: a long
    # page is not squeezed whole.
    window = limit * 4 + 256
    squeezed = squeeze(text[:window])
    if len(squeezed) <= limit and len(text) > window:
        squeezed = squeeze(text)
    return cut(squeezed, limit)


def squeeze(text: str) -> str:
    """Spaces and tabs squeezed to one space, lines right-stripped, three or more line
    breaks to two, the whole stripped."""
    lines = (_SPACE.sub(" ", line).rstrip() for line in text.split("\n"))
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip()


def cut(text: str, limit: int) -> str:
    """``text`` if it fits ``limit`` characters, else its start up to a word boundary
    (when one falls in the second half) and an ellipsis, ``limit`` characters at most."""
    if len(text) <= limit:
        return text
    start = text[: limit - 1]
    space = start.rfind(" ")
    if space > limit // 2:
        start = start[:space]
    return start.rstrip() + "…"


def entry(page: Page) -> str:
    """A page's entry in the file: a heading with its title and link, then the excerpt.

    An HTML comment opener in a page is written ``&lt;!--`` (Markdown shows the same
    text): a page quoting the managed block's markers must not end the block early, and
    a comment must not hide the rest of the file from a reader."""
    title = _no_comment(" ".join(page.title.split()) or page.slug)
    body = _no_comment(excerpt(page.body, page.title))
    heading = f"## {title} (tether://{page.slug})\n\n"
    return f"{heading}{body}\n\n" if body else heading


def _no_comment(text: str) -> str:
    return text.replace("<!--", "&lt;!--")


def header(target: Target) -> str:
    """The fixed opening of every file: byte-stable (no date), saying how to refresh it."""
    return (
        f"<!-- tether compile-context --target {target}: generated from the owner's pages; "
        "do not edit by hand, run the command again -->\n"
        "# Memory from tether\n\n"
        "Pages the owner keeps in tether, most relevant first. Read a whole page with "
        "`tether page show SLUG`.\n\n"
    )


def pack(
    chosen: Sequence[Chosen],
    target: Target,
    budget: int,
    refuse: Callable[[str], R | None] = lambda _entry: None,
) -> Packed[R]:
    """The file: the header, then entries in order while the whole stays within
    ``budget`` tokens, then a line saying how many did not fit. ``refuse`` is asked about
    each entry that would fit (and only those: a scan is not paid for what the budget
    leaves out); an entry it gives a reason for is kept out and the next one tried.

    A budget too small for the header and that line gives the header and a comment
    saying that nothing fits; no page at all gives the header and ``NO_PAGES``. Only
    those two files may exceed ``budget`` (a view always says what it is, and why it is
    empty)."""
    head = header(target)
    used = tokens.count(head)
    if not chosen:
        text = head + NO_PAGES
        return Packed(text, (), (), (), tokens.count(text))
    reserve = tokens.count(_more_line(len(chosen)))
    if used + reserve > budget:
        text = head + no_fit(budget)
        return Packed(text, (), (), tuple(c.page.slug for c in chosen), tokens.count(text))
    parts: list[str] = []
    included: list[str] = []
    refused: list[tuple[str, R]] = []
    stop = len(chosen)
    for n, c in enumerate(chosen):
        text = entry(c.page)
        cost = tokens.count(text)
        if used + cost + reserve > budget:
            stop = n
            break
        reason = refuse(text)
        if reason is not None:
            refused.append((c.page.slug, reason))
            continue
        parts.append(text)
        included.append(c.page.slug)
        used += cost
    left = tuple(c.page.slug for c in chosen[stop:])
    out = head + "".join(parts) + (_more_line(len(left)) if left else "")
    out = out.rstrip("\n") + "\n"  # dropping blank lines never adds a token
    return Packed(out, tuple(included), tuple(refused), left, tokens.count(out))


NO_PAGES = "(no pages to show: write one with `tether page write`, visibility world)\n"


def no_fit(budget: int) -> str:
    """The comment of a view whose budget holds no page."""
    return f"<!-- no page fits a budget of {budget} tokens -->\n"


def _more_line(count: int) -> str:
    pages = "page" if count == 1 else "pages"
    return f"({count} more {pages} did not fit; ask tether's recall for them)\n"


#: The markers of the block ``codex`` keeps in AGENTS.md; the rest of the file is the
#: owner's and is never touched.
BLOCK_BEGIN = "<!-- tether:begin compile-context -->"
BLOCK_END = "<!-- tether:end compile-context -->"


def managed(block: str) -> str:
    """``block`` between the markers, as it stands in the file."""
    return f"{BLOCK_BEGIN}\n{block}{BLOCK_END}\n"


def _markers(text: str, source: str) -> tuple[int, int] | None:
    """(start, end) offsets of the managed block in ``text`` (markers included, through
    the end marker's line), None when there is none; malformed markers are an error."""
    begins: list[tuple[int, int]] = []  # (line number, offset)
    ends: list[tuple[int, int]] = []
    offset = 0
    for n, line in enumerate(text.splitlines(keepends=True), start=1):
        stripped = line.strip()
        if stripped == BLOCK_BEGIN:
            begins.append((n, offset))
        elif stripped == BLOCK_END:
            ends.append((n, offset + len(line)))
        offset += len(line)
    if not begins and not ends:
        return None
    if len(begins) != 1 or len(ends) != 1:
        where = (begins[1:] or ends[1:] or begins or ends)[0][0]
        raise ManagedBlockError(
            source, where, f"expected one {BLOCK_BEGIN} line and one {BLOCK_END} line after it"
        )
    if ends[0][1] <= begins[0][1]:
        raise ManagedBlockError(source, ends[0][0], f"{BLOCK_END} comes before {BLOCK_BEGIN}")
    return begins[0][1], ends[0][1]


def current_block(text: str, source: str) -> str | None:
    """The managed block as it stands in ``text`` (markers included), or None."""
    span = _markers(text, source)
    return None if span is None else text[span[0] : span[1]]


def splice(text: str | None, block: str, source: str) -> str:
    """``text`` (the owner's file, None when absent) with its managed block replaced by
    ``block`` (or appended after a blank line when it has none)."""
    new = managed(block)
    if not text:
        return new
    span = _markers(text, source)
    if span is None:
        return text + ("\n" if text.endswith("\n") else "\n\n") + new
    start, end = span
    return text[:start] + new + text[end:]
