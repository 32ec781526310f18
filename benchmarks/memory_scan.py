"""`tether memory scan` over a large home: seconds, beside a plain read of the same text.

A home with N notes (each journalled: a journal row holds the note again) and N/10
pages, one note in 1,000 holding a key. The scan (read every cell, run the secret rules,
name each place) is timed beside the baseline: the same cells read with one SELECT each
and nothing done with them. Then --redact is timed (rewrite the places with
secure_delete, truncate the log). Prints one JSON line per figure.

    .venv/bin/python benchmarks/memory_scan.py [--notes 20000]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from tether.home import init_home
from tether.memory.identity import Identity
from tether.memory.secret_scan import scan_memory
from tether.records import JournalEntry, Page
from tether.stores.sqlite import SqliteStore

T = datetime(2026, 11, 1, tzinfo=UTC)
KEY = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"
WORDS = [
    "the",
    "owner",
    "prefers",
    "short",
    "answers",
    "and",
    "keeps",
    "the",
    "deploy",
    "notes",
    "in",
    "the",
    "ops",
    "folder",
]


def note_text(i: int) -> str:
    words = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(40))
    return f"note {i}: {words}" + (f" token {KEY}" if i % 1000 == 0 else "")


def build(home: Path, notes: int) -> None:
    init_home(home)
    with SqliteStore(home / "tether.db") as st:
        for i in range(notes):
            n = st.add_note(note_text(i), untrusted=False, session=None, time=T)
            st.journal_append(JournalEntry(T, "agent", None, "note", f"note:{n.id}", None, n.text))
        for i in range(notes // 10):
            body = "\n".join(note_text(i * 10 + j) for j in range(5))
            st.put_page(Page(f"p/{i}", f"page {i}", body, (), "private", False, T))


def baseline(db: Path) -> tuple[float, int]:
    start = time.perf_counter()
    c = sqlite3.connect(db)
    total = 0
    for sql in (
        "SELECT id, text FROM note",
        "SELECT slug, title, body FROM page",
        "SELECT id, text FROM doc WHERE kind IN ('note', 'page')",
        "SELECT id, before, after FROM journal",
    ):
        for row in c.execute(sql):
            total += sum(len(v) for v in row[1:] if isinstance(v, str))
    c.close()
    return time.perf_counter() - start, total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        build(home, args.notes)
        size = (home / "tether.db").stat().st_size
        base_s, chars = baseline(home / "tether.db")
        with SqliteStore(home / "tether.db") as st:
            start = time.perf_counter()
            report = scan_memory(Identity(home, st), st, allow=frozenset(), fix=False, time=T)
            scan_s = time.perf_counter() - start
            start = time.perf_counter()
            fixed = scan_memory(Identity(home, st), st, allow=frozenset(), fix=True, time=T)
            redact_s = time.perf_counter() - start
        common = {"notes": args.notes, "db_mb": round(size / 1e6, 1), "chars": chars}
        for figure, value in (
            ("baseline_read_s", round(base_s, 3)),
            ("scan_s", round(scan_s, 3)),
            ("scan_over_read", round(scan_s / base_s, 2)),
            ("scan_mb_per_s", round(chars / 1e6 / scan_s, 1)),
            ("places", len(report.places)),
            ("redact_s", round(redact_s, 3)),
            ("redacted", len(fixed.places) - fixed.remaining),
        ):
            print(json.dumps({"figure": figure, "value": value, **common}))


if __name__ == "__main__":
    main()
