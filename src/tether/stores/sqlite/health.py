"""Is the SQLite store whole? What ``tether doctor`` checks of ``tether.db``: a lost
write-ahead log, ``PRAGMA quick_check``, and the full-text index (missing or emptied).

Each finding is a ``StoreProblem`` named after its runbook entry. The WAL check reads the
files only and must run before anything opens the store: opening it rebuilds the WAL
index and the trace is gone. So every open of the store checks it first too
(``note_lost_wal``) and records what it found in ``telemetry/store.jsonl`` beside the
database (a time and a count, never content), where ``tether doctor`` finds it later.
The other checks open the file read-only and write nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import struct
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import msgspec

log = logging.getLogger("tether.store")
EVENTS = Path("telemetry") / "store.jsonl"

#: Where the WAL index (``-shm``) keeps ``mxFrame``, the last valid frame of the WAL (a
#: native u32 at byte 16 of SQLite's ``WalIndexHdr``), and ``nBackfill``, how many of
#: them a checkpoint copied into the database (byte 96: ``WalCkptInfo``, after the
#: header's two copies).
_MX_FRAME_AT = 16
_BACKFILL_AT = 96
#: Findings ``quick_check`` lists at most.
QUICK_CHECK_ROWS = 20


@dataclass(frozen=True)
class StoreProblem:
    name: str  # the runbook entry: store-wal-lost, store-malformed, fts-missing, fts-empty
    detail: str
    frames: int = 0  # store-wal-lost: the committed page writes lost


def wal_lost(path: Path) -> StoreProblem | None:
    """A WAL index (``-shm``) that counts committed frames no checkpoint copied while the
    WAL they are in is gone: transactions committed after the last checkpoint were lost
    with it."""
    shm = path.with_name(path.name + "-shm")
    wal = path.with_name(path.name + "-wal")
    if wal.exists() or not shm.exists():
        return None
    try:
        with shm.open("rb") as f:
            header = f.read(_BACKFILL_AT + 4)
    except OSError:
        return None
    if len(header) < _BACKFILL_AT + 4:
        return None
    (mx_frame,) = struct.unpack_from("=I", header, _MX_FRAME_AT)
    (backfilled,) = struct.unpack_from("=I", header, _BACKFILL_AT)
    frames = mx_frame - backfilled
    if frames <= 0:
        # Everything was checkpointed (a last connection closing deletes the WAL after
        # a full checkpoint, then the index): nothing was lost.
        return None
    return StoreProblem(
        "store-wal-lost",
        f"{wal.name} is gone while {shm.name} counts {frames} committed page write(s) in it "
        "that no checkpoint copied: "
        "what was committed after the last checkpoint is lost",
        frames,
    )


class WalLost(msgspec.Struct, frozen=True):
    """A lost WAL found when the store was opened (``telemetry/store.jsonl``)."""

    time: datetime
    frames: int
    event: str = "wal_lost"


_wal_lost = msgspec.json.Decoder(WalLost)


def note_lost_wal(path: Path) -> None:
    """Before the store at ``path`` is opened: record a lost WAL (opening hides it)."""
    found = wal_lost(path)
    if found is None:
        return
    log.warning("%s: %s (runbook: store-wal-lost)", path, found.detail)
    events = path.parent / EVENTS
    with contextlib.suppress(OSError):
        events.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(events, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            record = WalLost(time=datetime.now(UTC), frames=found.frames)
            os.write(fd, msgspec.json.encode(record) + b"\n")
        finally:
            os.close(fd)


def lost_wals(path: Path) -> list[WalLost]:
    """Every lost WAL recorded beside the store at ``path``, oldest first."""
    try:
        data = (path.parent / EVENTS).read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in data.splitlines():
        with contextlib.suppress(msgspec.DecodeError):
            out.append(_wal_lost.decode(line))
    return out


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)


def quick_check(path: Path) -> StoreProblem | None:
    """``PRAGMA quick_check``: pages, records and indexes well formed."""
    try:
        c = _connect(path)
        try:
            rows = [r[0] for r in c.execute(f"PRAGMA quick_check({QUICK_CHECK_ROWS})")]
        finally:
            c.close()
    except sqlite3.Error as exc:
        return StoreProblem("store-malformed", str(exc))
    if rows == ["ok"]:
        return None
    return StoreProblem("store-malformed", f"quick_check: {'; '.join(rows)}")


def fts_problem(path: Path) -> StoreProblem | None:
    """The full-text index table missing, or empty while there are rows to index."""
    try:
        c = _connect(path)
        try:
            names = {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
            if "doc" not in names:
                return None  # a store not made yet: nothing to index
            if "doc_fts" not in names:
                return StoreProblem("fts-missing", "the full-text index table doc_fts is missing")
            rows = c.execute("SELECT EXISTS (SELECT 1 FROM doc)").fetchone()[0]
            indexed = c.execute("SELECT EXISTS (SELECT 1 FROM doc_fts_idx)").fetchone()[0]
        finally:
            c.close()
    except sqlite3.Error as exc:
        return StoreProblem("store-malformed", f"reading the index: {exc}")
    if rows and not indexed:
        return StoreProblem("fts-empty", "the full-text index is empty while the store has rows")
    return None
