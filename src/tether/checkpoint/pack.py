"""The context pack: what a SessionStart hook hands the harness (``additionalContext``)
and ``tether context-pack`` prints for the pull protocol (Codex, opencode).

Within ``[checkpoint] pack_tokens`` (``core.tokens`` counts; default 1,500): re-injecting a
large memory right after a compaction would undo the compaction. In order: the session's
``## Compaction checkpoints`` (the ``tether://`` links of its banked segments and of the
pages its harvests verified, newest first), the owner's identity entries (``memory.md``),
then the facts harvested from the session's segments. Links that a harvest still running
misses appear at the next start.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tether.checkpoint.bank import LINK_PREFIX, ledger
from tether.checkpoint.manifest import manifest_path, read_manifests
from tether.core import tokens
from tether.core.checkpoint import build_pack
from tether.core.memory_block import parse_entries
from tether.errors import CorruptLedgerError, TetherError
from tether.files import read_home_text


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


def context_pack(home: Path, session: str | None, *, budget: int) -> Pack:
    identity = _identity(home)
    links: list[str] = []
    facts: list[str] = []
    if session is not None:
        try:
            banked = ledger(home, session)
        except CorruptLedgerError:
            banked = []
        links = [LINK_PREFIX + b.segment.removesuffix(".txt") for b in reversed(banked)]
        if manifest_path(home, session).exists():
            more, facts = _manifest_lines(home, session)
            links = [*dict.fromkeys([*more, *links])]
    text = build_pack(identity, facts, links, budget)
    shown = sum(1 for link in links if f"- {link}\n" in text)
    return Pack(text, shown, tokens.count(text))
