"""What the two SQLite stores share (``sqlite.SqliteStore``, the memory and its index;
``sqlite.sweep.SqliteSweepStore``, the daily sweep's tables, often in the same file).

- One connection per store object, guarded by a lock: a store may be handed between
  threads but runs one operation at a time. Other processes may use the same file (WAL:
  readers beside the one writer; a writer waits up to the busy timeout).
- SQLite errors become ``StoreError`` naming the file and what was being done; a full
  disk (``SQLITE_FULL``, or an I/O error with no room left) becomes ``DiskFullError``.
- Transactions are explicit (``isolation_level=None``): ``begun`` commits at the end of
  the block and rolls back on any exception, which propagates.
- Times are stored as fixed-width UTC text (``dialect.iso``), so SQL ``max()`` and
  ``ORDER BY`` sort them by time; a naive datetime is refused.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from tether.errors import DiskFullError, StoreError
from tether.stores.sqlite.health import note_lost_wal

#: SQLite's primary result codes for a full disk and a failed read or write.
_SQLITE_FULL = 13
_SQLITE_IOERR = 10
#: Below this much room, an I/O error SQLite reports is taken as the disk being full:
#: SQLite says "disk I/O error" when growing its WAL index or a journal hits ENOSPC.
_NEARLY_FULL = 1 << 20


def disk_full(exc: sqlite3.Error, path: Path) -> bool:
    """Whether ``exc`` (raised on the database at ``path``) means the disk is full."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return False
    primary = code & 0xFF
    if primary == _SQLITE_FULL:
        return True
    if primary != _SQLITE_IOERR:
        return False
    try:
        room = os.statvfs(path.parent)
    except OSError:
        return False
    return room.f_bavail * room.f_frsize < _NEARLY_FULL


@contextlib.contextmanager
def begun(conn: sqlite3.Connection, begin: str = "BEGIN IMMEDIATE") -> Iterator[None]:
    """``begin``, then COMMIT at the end of the block; ROLLBACK on any exception."""
    conn.execute(begin)
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def tables(conn: sqlite3.Connection) -> set[str]:
    """The names of the tables in the file (a store reading another's may find none)."""
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


class SqliteFile:
    """One locked connection to a SQLite file. A subclass sets ``busy_timeout_ms`` and
    ``_setup`` (pragmas, migrations), which runs once the connection is open; if it
    fails, the connection is closed and the error propagates."""

    busy_timeout_ms: int

    def __init__(self, path: Path | str, *, snapshot: bool = False) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        #: Opened read-only as the file stands, without the WAL (``immutable``): what a
        #: reader falls back on when the disk is too full to make the WAL index.
        self.snapshot = snapshot
        target = f"file:{self.path}?immutable=1" if snapshot else self.path
        if not snapshot:
            note_lost_wal(self.path)  # opening would hide it
        try:
            self._conn: sqlite3.Connection | None = sqlite3.connect(
                target,
                isolation_level=None,  # transactions are begun and ended explicitly
                check_same_thread=False,  # the lock serialises use instead
                timeout=self.busy_timeout_ms / 1000,
                uri=snapshot,
            )
        except sqlite3.Error as exc:
            if disk_full(exc, self.path):
                raise DiskFullError(self.path, "opening the store") from None
            raise StoreError(self.path, f"cannot open the store: {exc}") from None
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    def _setup(self) -> None:
        raise NotImplementedError

    def _c(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(self.path, "the store is closed")
        return self._conn

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """SQLite errors become StoreError naming the file and what we were doing (a full
        disk: DiskFullError)."""
        try:
            yield
        except sqlite3.Error as exc:
            if disk_full(exc, self.path):
                raise DiskFullError(self.path, doing) from None
            raise StoreError(self.path, f"{doing}: {exc}") from None

    def _busy_timeout_and_wal(self, conn: sqlite3.Connection) -> None:
        """The pragmas every store opens with: wait for another writer, journal in WAL."""
        conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(self.path, f"cannot use WAL journalling (got {mode})")

    def _truncate_wal(self) -> bool:
        """Checkpoint and truncate the WAL; False when a reader kept it from finishing."""
        with self._lock, self._errors("truncating the write-ahead log"):
            busy, _, _ = self._c().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return not busy

    def _secure_delete(self, on: bool) -> None:
        """Zero what a write frees (on) rather than only freeing it (SQLite's default)."""
        with self._lock, self._errors("setting secure_delete"):
            self._c().execute(f"PRAGMA secure_delete = {'ON' if on else 'OFF'}")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
