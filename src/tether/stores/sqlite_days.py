"""What the sweep's producer reads of a day, in the main SQLite store (migration 6): log
rows by time window and by session and turn range, session metadata (owner, discard,
folder, onboarding mark, open turn), epoch summaries, session-day digests.

A mixin of ``SqliteStore``: every method runs in the store's own locked connection and
transactions (``_read``, ``_write``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from tether.records import (
    EpochSummary,
    FolderBy,
    LogField,
    LogRow,
    SessionDigest,
    SessionMeta,
    SessionState,
)
from tether.stores.sqlite_file import from_iso, iso
from tether.stores.sqlite_search import EPOCH, MICRO

#: How many of an owner's first sessions (not imported) the runtime marks onboarding.
ONBOARDING_SESSIONS = 3
_DAY_FIELDS = "('user', 'assistant')"
_META = (
    "session, owner, discarded_at, folder, folder_by, onboarding, open_since, first_seen, imported"
)


def _micros(time: datetime) -> int:
    return (time - EPOCH) // MICRO


def _opt(text: str | None) -> datetime | None:
    return None if text is None else from_iso(text)


def _iso(time: datetime | None) -> str | None:
    return None if time is None else iso(time)


def _meta(row: Sequence[Any]) -> SessionMeta:
    return SessionMeta(
        session=row[0],
        owner=row[1],
        discarded_at=_opt(row[2]),
        folder=row[3],
        folder_by=cast("FolderBy | None", row[4]),
        onboarding=bool(row[5]),
        open_since=_opt(row[6]),
        first_seen=_opt(row[7]),
        imported=bool(row[8]),
    )


def _chunks(items: Sequence[str], size: int = 500) -> list[tuple[str, ...]]:
    return [tuple(items[i : i + size]) for i in range(0, len(items), size)]


def _log_row(row: Sequence[Any]) -> LogRow:
    return LogRow(
        session=row[0],
        epoch=row[1],
        turn=row[2],
        field=cast("LogField", row[3]),
        text=row[4],
        tainted=bool(row[5]),
        time=EPOCH + row[6] * MICRO,
    )


class SqliteDays:
    if TYPE_CHECKING:

        def _write(
            self, doing: str, *, durable: bool = True
        ) -> AbstractContextManager[sqlite3.Connection]: ...

        def _read(self, doing: str) -> AbstractContextManager[sqlite3.Connection]: ...

    # -- session metadata -----------------------------------------------------------------

    def session_meta(self, session: str) -> SessionMeta | None:
        with self._read("reading a session's metadata") as c:
            row = c.execute(
                f"SELECT {_META} FROM session_meta WHERE session = ?", (session,)
            ).fetchone()
        return None if row is None else _meta(row)

    def sessions_meta(self, sessions: Sequence[str] | None = None) -> dict[str, SessionMeta]:
        with self._read("reading session metadata") as c:
            if sessions is None:
                rows = c.execute(f"SELECT {_META} FROM session_meta").fetchall()
            else:
                rows = []
                for part in _chunks(sessions):
                    marks = ", ".join("?" * len(part))
                    rows += c.execute(
                        f"SELECT {_META} FROM session_meta WHERE session IN ({marks})", part
                    ).fetchall()
        return {r[0]: _meta(r) for r in rows}

    def put_session_meta(self, meta: SessionMeta) -> None:
        with self._write("writing a session's metadata") as c:
            c.execute(
                f"INSERT OR REPLACE INTO session_meta ({_META}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    meta.session,
                    meta.owner,
                    _iso(meta.discarded_at),
                    meta.folder,
                    meta.folder_by,
                    int(meta.onboarding),
                    _iso(meta.open_since),
                    _iso(meta.first_seen),
                    int(meta.imported),
                ),
            )

    def track_sessions(self, states: Sequence[SessionState]) -> None:
        """Record what an indexing pass learnt: a new session gets its row (and the
        onboarding mark while its owner has fewer than ``ONBOARDING_SESSIONS`` marked
        sessions that are not imports); a known one its open turn, when the pass read a
        record that decides it."""
        if not states:
            return
        with self._write("tracking sessions", durable=False) as c:
            for s in states:
                row = c.execute(
                    "SELECT owner FROM session_meta WHERE session = ?", (s.session,)
                ).fetchone()
                if row is None:
                    marked = c.execute(
                        "SELECT count(*) FROM session_meta WHERE owner IS NULL AND onboarding = 1"
                    ).fetchone()[0]
                    c.execute(
                        "INSERT INTO session_meta (session, onboarding, open_since, first_seen,"
                        " imported) VALUES (?, ?, ?, ?, ?)",
                        (
                            s.session,
                            int(not s.imported and marked < ONBOARDING_SESSIONS),
                            _iso(s.open_since),
                            iso(s.first_time),
                            int(s.imported),
                        ),
                    )
                elif s.open_known:
                    c.execute(
                        "UPDATE session_meta SET open_since = ? WHERE session = ?",
                        (_iso(s.open_since), s.session),
                    )

    # -- a day's rows -----------------------------------------------------------------------

    def day_rows(
        self, start: datetime, end: datetime, *, owner: str, home: bool = False
    ) -> list[LogRow]:
        """Owner and assistant rows in ``[start, end)`` of ``owner``'s sessions (with
        ``home``, also every session with no owner: the home owner's), by session, turn."""
        with self._read("reading a day's rows") as c:
            if home:
                rows = c.execute(
                    "SELECT d.session, d.epoch, d.turn, d.field, d.text, d.tainted, d.time"
                    " FROM doc d LEFT JOIN session_meta m ON m.session = d.session"
                    f" WHERE d.kind = 'turn' AND d.field IN {_DAY_FIELDS}"
                    " AND d.time >= ? AND d.time < ? AND coalesce(m.owner, ?) = ?"
                    " ORDER BY d.session, d.turn, d.id",
                    (_micros(start), _micros(end), owner, owner),
                ).fetchall()
            else:
                rows = c.execute(
                    "SELECT d.session, d.epoch, d.turn, d.field, d.text, d.tainted, d.time"
                    " FROM session_meta m JOIN doc d ON d.session = m.session"
                    f" AND d.kind = 'turn' WHERE m.owner = ? AND d.field IN {_DAY_FIELDS}"
                    " AND d.time >= ? AND d.time < ? ORDER BY d.session, d.turn, d.id",
                    (owner, _micros(start), _micros(end)),
                ).fetchall()
        return [_log_row(r) for r in rows]

    def session_turns(self, session: str, first: int, last: int) -> list[LogRow]:
        """Owner and assistant rows of turns ``first..last`` of one session, in order."""
        with self._read("reading a session's turns") as c:
            rows = c.execute(
                "SELECT session, epoch, turn, field, text, tainted, time FROM doc"
                f" WHERE kind = 'turn' AND session = ? AND turn BETWEEN ? AND ?"
                f" AND field IN {_DAY_FIELDS} ORDER BY turn, id",
                (session, first, last),
            ).fetchall()
        return [_log_row(r) for r in rows]

    # -- epoch summaries and session-day digests ----------------------------------------------

    def put_epoch_summaries(self, summaries: Sequence[EpochSummary]) -> None:
        if not summaries:
            return
        with self._write("storing epoch summaries", durable=False) as c:
            c.executemany(
                "INSERT OR REPLACE INTO epoch_summary (session, epoch, time, text)"
                " VALUES (?, ?, ?, ?)",
                ((s.session, s.epoch, _micros(s.time), s.text) for s in summaries),
            )

    def epoch_summaries(
        self, start: datetime, end: datetime, *, sessions: Sequence[str] | None = None
    ) -> list[EpochSummary]:
        """Epoch summaries written in ``[start, end)`` (of ``sessions`` only, when
        given), by session and epoch."""
        window = (_micros(start), _micros(end))
        with self._read("reading epoch summaries") as c:
            if sessions is None:
                rows = c.execute(
                    "SELECT session, epoch, time, text FROM epoch_summary"
                    " WHERE time >= ? AND time < ? ORDER BY session, epoch",
                    window,
                ).fetchall()
            else:
                rows = []
                for part in _chunks(sessions):
                    marks = ", ".join("?" * len(part))
                    rows += c.execute(
                        "SELECT session, epoch, time, text FROM epoch_summary"
                        f" WHERE session IN ({marks}) AND time >= ? AND time < ?",
                        (*part, *window),
                    ).fetchall()
                rows.sort(key=lambda r: (r[0], r[1]))
        return [
            EpochSummary(session=r[0], epoch=r[1], time=EPOCH + r[2] * MICRO, text=r[3])
            for r in rows
        ]

    def session_digest(
        self, session: str, window_id: str, content_hash: str
    ) -> SessionDigest | None:
        with self._read("reading a session-day digest") as c:
            row = c.execute(
                "SELECT text, time FROM session_digest"
                " WHERE session = ? AND window_id = ? AND content_hash = ?",
                (session, window_id, content_hash),
            ).fetchone()
        if row is None:
            return None
        return SessionDigest(
            session=session,
            window_id=window_id,
            content_hash=content_hash,
            text=row[0],
            time=from_iso(row[1]),
        )

    def put_session_digest(self, digest: SessionDigest) -> None:
        """Store a digest; one already stored under its key is kept."""
        with self._write("storing a session-day digest") as c:
            c.execute(
                "INSERT OR IGNORE INTO session_digest"
                " (session, window_id, content_hash, text, time) VALUES (?, ?, ?, ?, ?)",
                (
                    digest.session,
                    digest.window_id,
                    digest.content_hash,
                    digest.text,
                    iso(digest.time),
                ),
            )
