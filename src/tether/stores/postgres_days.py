"""What the sweep reads of a day, and the budget gate's spend ledger, in the PostgreSQL
store: the same statements and rules as ``sqlite_days`` and ``sqlite_budget``, so a
sweep worker that has only the store URL reads exactly what a home's sweep would.

A mixin of ``PostgresStore`` (``self._r`` and ``self._w`` run one transaction each). A
budget reservation reads the day's totals and writes under an advisory lock per day, as
SQLite's ``BEGIN IMMEDIATE`` does, so two calls at once never see the same totals; a new
session's onboarding mark is counted under one lock too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import psycopg

from tether.records import (
    BudgetReason,
    EpochSummary,
    LogRow,
    SessionDigest,
    SessionMeta,
    SessionState,
    SpendRow,
    SpendSettle,
    SpendState,
    SpentToday,
)
from tether.stores import sqlite_budget
from tether.stores.sqlite_days import (
    _DAY_FIELDS,
    _META,
    ONBOARDING_SESSIONS,
    _iso,
    _log_row,
    _meta,
    _micros,
)
from tether.stores.sqlite_file import from_iso, iso
from tether.stores.sqlite_search import EPOCH, MICRO

Conn = psycopg.Connection[Any]
_LOG = "SELECT d.session, d.epoch, d.turn, d.field, d.text, d.tainted, d.time"


class PostgresDays:
    if TYPE_CHECKING:

        def _w(
            self, doing: str, work: Callable[[Conn], Any], *, guard: str | None = None
        ) -> Any: ...

        def _r(self, doing: str, work: Callable[[Conn], Any]) -> Any: ...

    # -- session metadata ---------------------------------------------------------------

    def session_meta(self, session: str) -> SessionMeta | None:
        row = self._r(
            "reading a session's metadata",
            lambda c: c.execute(
                f"SELECT {_META} FROM session_meta WHERE session = %s", (session,)
            ).fetchone(),
        )
        return None if row is None else _meta(row)

    def sessions_meta(self, sessions: Sequence[str] | None = None) -> dict[str, SessionMeta]:
        def work(c: Conn) -> list[Any]:
            if sessions is None:
                return c.execute(f"SELECT {_META} FROM session_meta").fetchall()
            return c.execute(
                f"SELECT {_META} FROM session_meta WHERE session = ANY(%s)", (list(sessions),)
            ).fetchall()

        return {r[0]: _meta(r) for r in self._r("reading session metadata", work)}

    def put_session_meta(self, meta: SessionMeta) -> None:
        values = (
            meta.session,
            meta.owner,
            _iso(meta.discarded_at),
            meta.folder,
            meta.folder_by,
            int(meta.onboarding),
            _iso(meta.open_since),
            _iso(meta.first_seen),
            int(meta.imported),
        )
        sets = ", ".join(f"{col} = excluded.{col}" for col in _META.split(", ")[1:])
        self._w(
            "writing a session's metadata",
            lambda c: c.execute(
                f"INSERT INTO session_meta ({_META}) VALUES"
                f" (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (session) DO UPDATE SET {sets}",
                values,
            ),
        )

    def track_sessions(self, states: Sequence[SessionState]) -> None:
        if not states:
            return

        def work(c: Conn) -> None:
            for s in states:
                row = c.execute(
                    "SELECT owner FROM session_meta WHERE session = %s", (s.session,)
                ).fetchone()
                if row is None:
                    marked = c.execute(
                        "SELECT count(*) FROM session_meta WHERE owner IS NULL AND onboarding = 1"
                    ).fetchone()
                    n = int(marked[0]) if marked else 0
                    c.execute(
                        "INSERT INTO session_meta (session, onboarding, open_since, first_seen,"
                        " imported) VALUES (%s, %s, %s, %s, %s)",
                        (
                            s.session,
                            int(not s.imported and n < ONBOARDING_SESSIONS),
                            _iso(s.open_since),
                            iso(s.first_time),
                            int(s.imported),
                        ),
                    )
                elif s.open_known:
                    c.execute(
                        "UPDATE session_meta SET open_since = %s WHERE session = %s",
                        (_iso(s.open_since), s.session),
                    )

        self._w("tracking sessions", work, guard="sessions")

    # -- a day's rows -------------------------------------------------------------------

    def day_rows(
        self, start: datetime, end: datetime, *, owner: str, home: bool = False
    ) -> list[LogRow]:
        window = (_micros(start), _micros(end))

        def work(c: Conn) -> list[Any]:
            if home:
                return c.execute(
                    f"{_LOG} FROM doc d LEFT JOIN session_meta m ON m.session = d.session"
                    f" WHERE d.kind = 'turn' AND d.field IN {_DAY_FIELDS}"
                    " AND d.time >= %s AND d.time < %s AND coalesce(m.owner, %s) = %s"
                    " ORDER BY d.session, d.turn, d.id",
                    (*window, owner, owner),
                ).fetchall()
            return c.execute(
                f"{_LOG} FROM session_meta m JOIN doc d ON d.session = m.session"
                f" AND d.kind = 'turn' WHERE m.owner = %s AND d.field IN {_DAY_FIELDS}"
                " AND d.time >= %s AND d.time < %s ORDER BY d.session, d.turn, d.id",
                (owner, *window),
            ).fetchall()

        return [_log_row(r) for r in self._r("reading a day's rows", work)]

    def session_turns(self, session: str, first: int, last: int) -> list[LogRow]:
        rows = self._r(
            "reading a session's turns",
            lambda c: c.execute(
                f"{_LOG} FROM doc d WHERE d.kind = 'turn' AND d.session = %s"
                f" AND d.turn BETWEEN %s AND %s AND d.field IN {_DAY_FIELDS}"
                " ORDER BY d.turn, d.id",
                (session, first, last),
            ).fetchall(),
        )
        return [_log_row(r) for r in rows]

    # -- epoch summaries and session-day digests ----------------------------------------

    def put_epoch_summaries(self, summaries: Sequence[EpochSummary]) -> None:
        if not summaries:
            return
        self._w(
            "storing epoch summaries",
            lambda c: c.cursor().executemany(
                "INSERT INTO epoch_summary (session, epoch, time, text) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (session, epoch) DO UPDATE SET time = excluded.time,"
                " text = excluded.text",
                [(s.session, s.epoch, _micros(s.time), s.text) for s in summaries],
            ),
        )

    def epoch_summaries(
        self, start: datetime, end: datetime, *, sessions: Sequence[str] | None = None
    ) -> list[EpochSummary]:
        window = (_micros(start), _micros(end))

        def work(c: Conn) -> list[Any]:
            if sessions is None:
                return c.execute(
                    "SELECT session, epoch, time, text FROM epoch_summary"
                    " WHERE time >= %s AND time < %s ORDER BY session, epoch",
                    window,
                ).fetchall()
            return c.execute(
                "SELECT session, epoch, time, text FROM epoch_summary WHERE session = ANY(%s)"
                " AND time >= %s AND time < %s ORDER BY session, epoch",
                (list(sessions), *window),
            ).fetchall()

        return [
            EpochSummary(session=r[0], epoch=r[1], time=EPOCH + r[2] * MICRO, text=r[3])
            for r in self._r("reading epoch summaries", work)
        ]

    def session_digest(
        self, session: str, window_id: str, content_hash: str
    ) -> SessionDigest | None:
        row = self._r(
            "reading a session-day digest",
            lambda c: c.execute(
                "SELECT text, time FROM session_digest"
                " WHERE session = %s AND window_id = %s AND content_hash = %s",
                (session, window_id, content_hash),
            ).fetchone(),
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
        self._w(
            "storing a session-day digest",
            lambda c: c.execute(
                "INSERT INTO session_digest (session, window_id, content_hash, text, time)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (
                    digest.session,
                    digest.window_id,
                    digest.content_hash,
                    digest.text,
                    iso(digest.time),
                ),
            ),
        )

    # -- the budget gate's spend ledger -------------------------------------------------

    def _spent(self, c: Conn, day: str, kind: str) -> SpentToday:
        row = c.execute(
            "SELECT coalesce(sum(CASE WHEN kind = %s THEN tokens END), 0),"
            " coalesce(sum(CASE WHEN kind != 'live' THEN usd END), 0)"
            " FROM budget_total WHERE day = %s",
            (kind, day),
        ).fetchone()
        assert row is not None
        return SpentToday(tokens=int(row[0]), usd=float(row[1]))

    def _add(self, c: Conn, day: str, kind: str, tokens: int, usd: float) -> None:
        c.execute(
            "INSERT INTO budget_total (day, kind, tokens, usd) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (day, kind) DO UPDATE SET tokens = budget_total.tokens"
            " + excluded.tokens, usd = budget_total.usd + excluded.usd",
            (day, kind, tokens, usd),
        )

    def budget_reserve(
        self,
        row: SpendRow,
        decide: Callable[[SpentToday], BudgetReason | None],
        settles: Sequence[SpendSettle] = (),
    ) -> SpendRow:
        def work(c: Conn) -> SpendRow:
            for s in settles:  # before the read, so the decision weighs what they used
                self._settle(c, s)
            reason = decide(self._spent(c, row.day, row.kind))
            state: SpendState = "refused" if reason else "reserved"
            found = c.execute(
                "INSERT INTO budget_spend (time, day, kind, session, state, reason,"
                " bound_tokens, bound_usd) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (
                    iso(row.time),
                    row.day,
                    row.kind,
                    row.session,
                    state,
                    reason,
                    row.bound_tokens,
                    row.bound_usd,
                ),
            ).fetchone()
            assert found is not None
            if reason is None:
                self._add(c, row.day, row.kind, row.bound_tokens, row.bound_usd)
            return SpendRow(
                id=int(found[0]),
                time=row.time,
                day=row.day,
                kind=row.kind,
                session=row.session,
                state=state,
                reason=reason,
                bound_tokens=row.bound_tokens,
                bound_usd=row.bound_usd,
            )

        return cast(SpendRow, self._w("reserving a model call's budget", work, guard="budget"))

    def _settle(self, c: Conn, s: SpendSettle) -> bool:
        found = c.execute(
            "UPDATE budget_spend SET state = 'settled', tokens = %s, usd = %s, cache_n = %s,"
            " prompt_n = %s, predicted_n = %s WHERE id = %s AND state = 'reserved'"
            " RETURNING day, kind, bound_tokens, bound_usd",
            (s.tokens, s.usd, s.cache_n, s.prompt_n, s.predicted_n, s.id),
        ).fetchone()
        if found is None:
            return False
        day, kind, bound_tokens, bound_usd = found
        self._add(c, day, kind, s.tokens - int(bound_tokens), s.usd - float(bound_usd))
        return True

    def budget_settle_all(self, settles: Sequence[SpendSettle]) -> None:
        def work(c: Conn) -> None:
            for s in settles:
                self._settle(c, s)

        if settles:
            self._w("settling model calls' budget", work, guard="budget")

    def budget_settle(
        self,
        spend_id: int,
        *,
        tokens: int,
        usd: float,
        cache_n: int = 0,
        prompt_n: int = 0,
        predicted_n: int = 0,
    ) -> bool:
        settle = SpendSettle(
            id=spend_id,
            tokens=tokens,
            usd=usd,
            cache_n=cache_n,
            prompt_n=prompt_n,
            predicted_n=predicted_n,
        )
        return bool(
            self._w(
                "settling a model call's budget", lambda c: self._settle(c, settle), guard="budget"
            )
        )

    def budget_spent(self, day: str, kind: str) -> SpentToday:
        return cast(
            SpentToday, self._r("reading the day's spend", lambda c: self._spent(c, day, kind))
        )

    def budget_rows(self, since: str | None = None) -> list[SpendRow]:
        cols = sqlite_budget._COLUMNS

        def work(c: Conn) -> list[Any]:
            if since is None:
                return c.execute(f"SELECT {cols} FROM budget_spend ORDER BY id").fetchall()
            return c.execute(
                f"SELECT {cols} FROM budget_spend WHERE day >= %s ORDER BY id", (since,)
            ).fetchall()

        return [sqlite_budget._row(tuple(r)) for r in self._r("reading the spend ledger", work)]
