"""The context pack: what a SessionStart hook hands the harness (``additionalContext``)
and ``tether context-pack`` prints for the pull protocol (Codex, opencode).

Within ``[checkpoint] pack_tokens`` (``core.context.tokens`` counts; default 1,500) and under
9,500 characters (Claude Code files away a hook's context past 10,000): re-injecting a
large memory right after a compaction would undo the compaction. In order: the session's
``## Compaction checkpoints`` (the ``tether://`` links of its banked segments and of the
pages its harvests verified, newest first), a line saying how to read a link (the MCP
server's ``read`` tool), each segment's digest (``core.checkpoints.digest``: the owner's last
requests, decisions, open tasks, taken from the banked, redacted text), the owner's
identity entries (``memory.md``), then the facts harvested from the session's segments.
Links that a harvest still running misses appear at the next start.

Digests are read from the newest ``DIGESTS`` segments only, the last ``DIGEST_BYTES`` of
each (a hook has seconds; the newest part of a window holds the last requests).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tether.checkpoint.bank import LINK_PREFIX, corpus_dir, ledger
from tether.checkpoint.manifest import manifest_path, read_manifests
from tether.core.checkpoints.digest import digest
from tether.core.checkpoints.window import Checkpoint, build_pack
from tether.core.context import tokens
from tether.core.context.memory_block import parse_entries
from tether.errors import CorruptLedgerError, TetherError
from tether.files import read_home_text

#: How many of the newest segments get a digest in the pack, and how much of each is read.
DIGESTS = 8
DIGEST_BYTES = 256 * 1024


@dataclass(frozen=True)
class Pack:
    text: str
    links: int
    tokens: int


def _identity(home: Path) -> list[str]:
    try:
        text = read_home_text(home / "memory" / "memory.md")
    except (OSError, TetherError):
        return []
    return [e.text for e in parse_entries(text)]


def _manifest_lines(home: Path, session: str) -> tuple[list[str], list[str]]:
    """(links, facts) of the session's harvest manifests, newest first."""
    links: list[str] = []
    facts: list[str] = []
    for m in read_manifests(home, session):
        links.extend(m.links)
        facts.extend(m.facts)
    return links, facts


def _digest_lines(home: Path, segment: str) -> tuple[str, ...]:
    """The digest lines of a banked segment (its file name); () when it cannot be read."""
    path = corpus_dir(home) / segment
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - DIGEST_BYTES))
            data = handle.read()
    except OSError:
        return ()
    text = data.decode("utf-8", errors="replace")
    if size > DIGEST_BYTES:  # a tail: start at the first whole block
        cut = text.find("\n[")
        text = text[cut + 1 :] if cut >= 0 else ""
    return tuple(digest(text).lines())


def context_pack(home: Path, session: str | None, *, budget: int) -> Pack:
    identity = _identity(home)
    points: list[Checkpoint] = []
    facts: list[str] = []
    if session is not None:
        try:
            banked = ledger(home, session)
        except CorruptLedgerError:
            banked = []
        newest = list(reversed(banked))
        points = [
            Checkpoint(
                LINK_PREFIX + b.segment.removesuffix(".txt"),
                _digest_lines(home, b.segment) if i < DIGESTS else (),
            )
            for i, b in enumerate(newest)
        ]
        if manifest_path(home, session).exists():
            more, facts = _manifest_lines(home, session)
            known = {p.link for p in points}
            pages = [Checkpoint(link) for link in dict.fromkeys(more) if link not in known]
            points = [*pages, *points]
    text = build_pack(identity, facts, points, budget)
    shown = sum(1 for p in points if f"- {p.link}\n" in text)
    return Pack(text, shown, tokens.count(text))
