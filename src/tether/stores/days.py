"""What the sweep's producer reads of a day, written once for both stores (main schema:
SQLite's migration 6, PostgreSQL's first): log rows by time window and by session and turn
range, session metadata (owner, discard, folder, onboarding mark, open turn), epoch
summaries, session-day digests. A sweep worker that has only the PostgreSQL URL reads
exactly what a home's sweep reads of its file.

A mixin of both stores (``dialect.Repository``). A new session's onboarding mark counts
the sessions marked before it, so ``track_sessions`` is guarded (``sessions``): two
indexers at once never mark more than the first few.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from tether.records import (
    EpochSummary,
    FolderBy,
    LogField,
    LogRow,
    SessionDigest,
    SessionMeta,
    SessionState,
)
from tether.stores.dialect import (
    Repository,
    Sql,
    from_iso,
    from_micros,
    iso,
    micros,
    opt_from_iso,
    opt_iso,
    upsert,
)

#: How many of an owner's first sessions (not imported) the runtime marks onboarding.
ONBOARDING_SESSIONS = 3
_DAY_FIELDS = "('user', 'assistant')"
_META = (
    "session, owner, discarded_at, folder, folder_by, onboarding, open_since, first_seen, imported"
)
_SUMMARY = ("session", "epoch", "time", "text")
_LOG = "SELECT d.session, d.epoch, d.turn, d.field, d.text, d.tainted, d.time"
#: Sessions one statement names (SQLite's bound parameters are limited).
_CHUNK = 500


def _meta(row: Sequence[Any]) -> SessionMeta:
    return SessionMeta(
        session=row[0],
        owner=row[1],
        discarded_at=opt_from_iso(row[2]),
        folder=row[3],
        folder_by=cast("FolderBy | None", row[4]),
        onboarding=bool(row[5]),
        open_since=opt_from_iso(row[6]),
        first_seen=opt_from_iso(row[7]),
        imported=bool(row[8]),
    )


def _chunks(items: Sequence[str]) -> list[tuple[str, ...]]:
    return [tuple(items[i : i + _CHUNK]) for i in range(0, len(items), _CHUNK)]


def log_row(row: Sequence[Any]) -> LogRow:
    return LogRow(
        session=row[0],
        epoch=row[1],
        turn=row[2],
        field=cast("LogField", row[3]),
        text=row[4],
        tainted=bool(row[5]),
        time=from_micros(row[6]),
    )


def _track(db: Sql, states: Sequence[SessionState]) -> None:
    for s in states:
        row = db.one("SELECT owner FROM session_meta WHERE session = ?", (s.session,))
        if row is None:
            (marked,) = db.one(
                "SELECT count(*) FROM session_meta WHERE owner IS NULL AND onboarding = 1"
            )
            db.execute(
                "INSERT INTO session_meta (session, onboarding, open_since, first_seen,"
                " imported) VALUES (?, ?, ?, ?, ?)",
                (
                    s.session,
                    int(not s.imported and int(marked) < ONBOARDING_SESSIONS),
                    opt_iso(s.open_since),
                    iso(s.first_time),
                    int(s.imported),
                ),
            )
        elif s.open_known:
            db.execute(
                "UPDATE session_meta SET open_since = ? WHERE session = ?",
                (opt_iso(s.open_since), s.session),
            )


class Days(Repository):
    """The ``Store`` port's methods of a day, for both stores (a mixin)."""

    # -- session metadata -----------------------------------------------------------------

    def session_meta(self, session: str) -> SessionMeta | None:
        row = self._in_read(
            "reading a session's metadata",
            lambda db: db.one(f"SELECT {_META} FROM session_meta WHERE session = ?", (session,)),
        )
        return None if row is None else _meta(row)

    def sessions_meta(self, sessions: Sequence[str] | None = None) -> dict[str, SessionMeta]:
        def work(db: Sql) -> list[Any]:
            if sessions is None:
                return db.all(f"SELECT {_META} FROM session_meta")
            rows: list[Any] = []
            for part in _chunks(sessions):
                match, params = db.dialect.any_of("session", part)
                rows += db.all(f"SELECT {_META} FROM session_meta WHERE {match}", params)
            return rows

        return {r[0]: _meta(r) for r in self._in_read("reading session metadata", work)}

    def put_session_meta(self, meta: SessionMeta) -> None:
        values = (
            meta.session,
            meta.owner,
            opt_iso(meta.discarded_at),
            meta.folder,
            meta.folder_by,
            int(meta.onboarding),
            opt_iso(meta.open_since),
            opt_iso(meta.first_seen),
            int(meta.imported),
        )
        self._in_write(
            "writing a session's metadata",
            lambda db: db.execute(upsert("session_meta", _META.split(", "), ("session",)), values),
        )

    def track_sessions(self, states: Sequence[SessionState]) -> None:
        """Record what an indexing pass learnt: a new session gets its row (and the
        onboarding mark while its owner has fewer than ``ONBOARDING_SESSIONS`` marked
        sessions that are not imports); a known one its open turn, when the pass read a
        record that decides it."""
        if states:
            self._in_write(
                "tracking sessions", lambda db: _track(db, states), guard="sessions", durable=False
            )

    # -- a day's rows -----------------------------------------------------------------------

    def day_rows(
        self, start: datetime, end: datetime, *, owner: str, home: bool = False
    ) -> list[LogRow]:
        """Owner and assistant rows in ``[start, end)`` of ``owner``'s sessions (with
        ``home``, also every session with no owner: the home owner's), by session, turn."""
        window = (micros(start), micros(end))

        def work(db: Sql) -> list[Any]:
            if home:
                return db.all(
                    f"{_LOG} FROM doc d LEFT JOIN session_meta m ON m.session = d.session"
                    f" WHERE d.kind = 'turn' AND d.field IN {_DAY_FIELDS}"
                    " AND d.time >= ? AND d.time < ? AND coalesce(m.owner, ?) = ?"
                    " ORDER BY d.session, d.turn, d.id",
                    (*window, owner, owner),
                )
            return db.all(
                f"{_LOG} FROM session_meta m JOIN doc d ON d.session = m.session"
                f" AND d.kind = 'turn' WHERE m.owner = ? AND d.field IN {_DAY_FIELDS}"
                " AND d.time >= ? AND d.time < ? ORDER BY d.session, d.turn, d.id",
                (owner, *window),
            )

        return [log_row(r) for r in self._in_read("reading a day's rows", work)]

    def session_turns(self, session: str, first: int, last: int) -> list[LogRow]:
        """Owner and assistant rows of turns ``first..last`` of one session, in order."""
        rows = self._in_read(
            "reading a session's turns",
            lambda db: db.all(
                f"{_LOG} FROM doc d WHERE d.kind = 'turn' AND d.session = ?"
                f" AND d.turn BETWEEN ? AND ? AND d.field IN {_DAY_FIELDS}"
                " ORDER BY d.turn, d.id",
                (session, first, last),
            ),
        )
        return [log_row(r) for r in rows]

    # -- epoch summaries and session-day digests ----------------------------------------------

    def put_epoch_summaries(self, summaries: Sequence[EpochSummary]) -> None:
        if summaries:
            self._in_write(
                "storing epoch summaries",
                lambda db: db.many(
                    upsert(
                        "epoch_summary", ("session", "epoch", "time", "text"), ("session", "epoch")
                    ),
                    [(s.session, s.epoch, micros(s.time), s.text) for s in summaries],
                ),
                durable=False,
            )

    def epoch_summaries(
        self, start: datetime, end: datetime, *, sessions: Sequence[str] | None = None
    ) -> list[EpochSummary]:
        """Epoch summaries written in ``[start, end)`` (of ``sessions`` only, when
        given), by session and epoch."""
        window = (micros(start), micros(end))
        cols = "SELECT session, epoch, time, text FROM epoch_summary"

        def work(db: Sql) -> list[Any]:
            if sessions is None:
                return db.all(
                    f"{cols} WHERE time >= ? AND time < ? ORDER BY session, epoch", window
                )
            rows: list[Any] = []
            for part in _chunks(sessions):
                match, params = db.dialect.any_of("session", part)
                rows += db.all(
                    f"{cols} WHERE {match} AND time >= ? AND time < ?", (*params, *window)
                )
            return sorted(rows, key=lambda row: (row[0], row[1]))

        return [
            EpochSummary(session=r[0], epoch=r[1], time=from_micros(r[2]), text=r[3])
            for r in self._in_read("reading epoch summaries", work)
        ]

    def session_digest(
        self, session: str, window_id: str, content_hash: str
    ) -> SessionDigest | None:
        row = self._in_read(
            "reading a session-day digest",
            lambda db: db.one(
                "SELECT text, time FROM session_digest"
                " WHERE session = ? AND window_id = ? AND content_hash = ?",
                (session, window_id, content_hash),
            ),
        )
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
        self._in_write(
            "storing a session-day digest",
            lambda db: db.execute(
                "INSERT INTO session_digest (session, window_id, content_hash, text, time)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    digest.session,
                    digest.window_id,
                    digest.content_hash,
                    digest.text,
                    iso(digest.time),
                ),
            ),
        )
