"""Banked ranges the ledger lost, and the lock the hooks bank a session under.

A hook writes a segment, then its ledger entry (``bank.bank_redacted``); a crash between
the two leaves a segment the ledger lacks, an **orphan**. Its header line names the range
of records it holds (``records <first> .. <last>``, and ``part i of n of window <id>``), so
the next hook reads the range back (``orphans``) and either banks that exact range again
(the same text: a ``segment_dup`` that records the entry) or adopts the segment as it is
(``adopt_orphan``); never a second copy of the text.

``session_lock`` serialises the hooks of one session (``corpus/<session>.lock``, flock):
reading the ledger, working out what is left of a window and banking it happen under it,
so a hook, its detached child and the backstop never cut the same window two ways.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tether import files
from tether.checkpoint.bank import (
    Boundary,
    corpus_dir,
    ledger,
    parse_segment_link,
    record_entry,
)
from tether.ids import session_id

_RANGE_NOTE = re.compile(
    r", records (?P<first>\S+) \.\. (?P<last>\S+)"
    r"(?:, part (?P<part>\d+) of (?P<parts>\d+) of window (?P<window>\S+))? \(secrets redacted\)$"
)
_SOURCE_NOTE = re.compile(r" window \((?P<source>[a-z:-]+)\), .*, (?P<turns>\d+) turns, records ")


@dataclass(frozen=True)
class Orphan:
    """A segment of a session's hook lane that its ledger lacks (a crash came between
    its write and its entry), and the range its header names."""

    path: Path
    hash: str
    first: str
    last: str
    source: str
    turns: int
    window: str
    part: int
    parts: int


def orphans(home: Path, session: str) -> list[Orphan]:
    """The session's segments whose header names a range and which its ledger lacks."""
    folder = corpus_dir(home)
    if not folder.is_dir():
        return []
    held = {b.segment for b in ledger(home, session)}
    out = []
    for path in sorted(folder.glob(f"{session_id(session)}.seg-*.txt")):
        if path.name in held:
            continue
        try:
            with path.open("rb") as handle:
                head = handle.readline(4096).decode(errors="replace").rstrip("\n")
        except OSError:
            continue
        m, src = _RANGE_NOTE.search(head), _SOURCE_NOTE.search(head)
        if m is None or src is None:
            continue
        _, hash24 = parse_segment_link(path.name.removesuffix(".txt"))
        out.append(
            Orphan(
                path,
                hash24,
                m["first"],
                m["last"],
                src["source"],
                int(src["turns"]),
                m["window"] or "",
                int(m["part"] or 0),
                int(m["parts"] or 0),
            )
        )
    return out


def adopt_orphan(home: Path, session: str, orphan: Orphan, *, at: datetime, retired: bool) -> None:
    """Record ``orphan``'s ledger entry from its header (redaction counts are unknown: the
    text was redacted before it was written)."""
    boundary = Boundary(
        epoch=0,
        hash=orphan.hash,
        segment=orphan.path.name,
        time=at,
        bytes=orphan.path.stat().st_size,
        source=orphan.source,
        first=orphan.first,
        last=orphan.last,
        turns=orphan.turns,
        retired=retired,
        window=orphan.window,
        part=orphan.part,
        parts=orphan.parts,
    )
    record_entry(home, session, boundary)


@contextmanager
def session_lock(home: Path, session: str, wait_s: float | None) -> Iterator[bool]:
    """Hold the session's banking lock (``corpus/<session>.lock``): the hooks read the
    ledger, work out what is left and bank it under it, so two hooks never cut the same
    window twice. Yields False when it was not free within ``wait_s`` (None: wait)."""
    folder = corpus_dir(home)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    with files.locked_within(folder / f"{session_id(session)}.lock", wait_s) as held:
        yield held
