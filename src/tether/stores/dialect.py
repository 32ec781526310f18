"""The little that SQLite and PostgreSQL say differently, so a repository's SQL is written
once for both stores.

Statements are written in one dialect: ``?`` placeholders (PostgreSQL's driver wants
``%s``, and a literal ``%`` doubled: ``Dialect.sql`` rewrites them, once per statement
text), ``INSERT ... ON CONFLICT (...) DO UPDATE`` / ``DO NOTHING`` and ``RETURNING``
(SQLite has both since 3.35; no ``INSERT OR REPLACE``), ``<>`` for inequality, flags as
integers. What is left differs and is said here:

- ``false``: a constant false (SQLite has no boolean literal before 3.23 in every
  position; PostgreSQL wants a boolean where one is compared);
- ``any_of``: a column matching one of a list (``IN (?, ?)`` on SQLite, ``= ANY(?)``
  with one array parameter on PostgreSQL);
- ``Sql.hold``: the lock that keeps two writers of one owner (or one day's budget) in
  turns: nothing on SQLite, whose ``BEGIN IMMEDIATE`` already holds the file's one write
  lock; a transaction-level advisory lock on PostgreSQL, where writers only wait on what
  they lock.

``Sql`` is one connection inside a transaction the store has begun, speaking its dialect:
both drivers' connections have ``execute`` returning a cursor with ``fetchone``,
``fetchall`` and ``rowcount``, which is all a repository uses. The connections, the
tenancy (a file; a schema per owner), the DDL, the full-text index (FTS5; ``tsvector``)
and COPY stay in ``stores/sqlite`` and ``stores/postgres``.

A ``?`` inside a string literal would be rewritten too: statements keep values in
parameters, never in literals with a question mark.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar

T = TypeVar("T")


def utc(time: datetime) -> datetime:
    if time.tzinfo is None or time.utcoffset() is None:
        raise ValueError(f"naive datetime {time.isoformat()}: times in the store are UTC")
    return time.astimezone(UTC)


def iso(time: datetime) -> str:
    """Fixed-width UTC text, so SQL ``max()`` and ``ORDER BY`` sort it by time (the column
    type of every time of both stores but the index's, which are unix microseconds)."""
    return utc(time).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def from_iso(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


#: The index's times (``doc.time``, ``epoch_summary.time``) are unix microseconds.
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
MICRO: Final = timedelta(microseconds=1)


def micros(time: datetime) -> int:
    """A time as the index stores it: unix microseconds."""
    return (time - EPOCH) // MICRO


def from_micros(value: int) -> datetime:
    return EPOCH + value * MICRO


def opt_iso(time: datetime | None) -> str | None:
    return None if time is None else iso(time)


def opt_from_iso(text: str | None) -> datetime | None:
    return None if text is None else from_iso(text)


class Dialect:
    """One backend's way of saying the few things that differ (module docstring)."""

    __slots__ = ("false", "lock_sql", "name")

    def __init__(self, name: str, *, false: str, lock_sql: str | None) -> None:
        self.name: Final = name
        self.false: Final = false
        #: The statement that takes a transaction-level lock on a text key (None: the
        #: transaction already holds the store's one write lock).
        self.lock_sql: Final = lock_sql

    def sql(self, text: str) -> str:
        """``text`` (written with ``?`` placeholders) as this backend's driver takes it."""
        return text if self is SQLITE else _percent(text)

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        """``column`` equal to one of ``values``: the condition and its parameters."""
        if self is SQLITE:
            return f"{column} IN ({', '.join('?' * len(values))})", tuple(values)
        return f"{column} = ANY(?)", (list(values),)

    def __repr__(self) -> str:
        return f"Dialect({self.name})"


@functools.lru_cache(maxsize=1024)
def _percent(text: str) -> str:
    return text.replace("%", "%%").replace("?", "%s")


SQLITE: Final = Dialect("sqlite", false="0", lock_sql=None)
POSTGRES: Final = Dialect(
    "postgres", false="false", lock_sql="SELECT pg_advisory_xact_lock(hashtextextended(?, 0))"
)


class Sql:
    """One connection inside an open transaction, in its dialect (module docstring). The
    store begins and ends the transaction; this only runs statements in it."""

    __slots__ = ("_held", "c", "dialect")

    def __init__(self, conn: Any, dialect: Dialect) -> None:
        self.c = conn
        self.dialect = dialect
        self._held: set[str] = set()

    def execute(self, text: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement; the driver's cursor (``fetchone``, ``fetchall``, ``rowcount``)."""
        return self.c.execute(self.dialect.sql(text), params)

    def one(self, text: str, params: Sequence[Any] = ()) -> Any:
        """The first row of a statement, or None."""
        return self.c.execute(self.dialect.sql(text), params).fetchone()

    def all(self, text: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of a statement."""
        return list(self.c.execute(self.dialect.sql(text), params).fetchall())

    def count(self, text: str, params: Sequence[Any] = ()) -> int:
        """How many rows a write statement touched."""
        return max(int(self.c.execute(self.dialect.sql(text), params).rowcount), 0)

    def many(self, text: str, rows: Iterable[Sequence[Any]]) -> int:
        """One statement for each of ``rows``; how many rows they touched in all."""
        cur = self.c.cursor()
        cur.executemany(self.dialect.sql(text), list(rows))
        return max(int(cur.rowcount), 0)

    def hold(self, key: str) -> None:
        """Lock ``key`` until the transaction ends, once per key (nothing on SQLite, whose
        write transaction already holds the file)."""
        lock = self.dialect.lock_sql
        if lock is not None and key not in self._held:
            self.c.execute(self.dialect.sql(lock), (key,))
            self._held.add(key)


def upsert(table: str, columns: Sequence[str], keys: Sequence[str]) -> str:
    """``INSERT`` of every column, updating every non-key column where the key is taken."""
    names = ", ".join(columns)
    marks = ", ".join("?" * len(columns))
    sets = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in keys)
    return (
        f"INSERT INTO {table} ({names}) VALUES ({marks})"
        f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets}"
    )


def columns(text: str) -> tuple[str, ...]:
    """``"id, owner, text"`` as its names."""
    return tuple(c.strip() for c in text.split(","))


#: Rows one query of ``text_rows`` reads.
TEXT_BATCH = 500


def text_rows(
    db: Sql,
    table: str,
    keys: tuple[str, ...],
    column: str,
    *,
    extra: str = "",
    only: str = "",
) -> Iterator[tuple[Any, ...]]:
    """Each row of ``table`` whose ``column`` holds text, in key order, as its key columns,
    the column, then the ``extra`` expressions (``, ref``); ``only`` narrows the rows (SQL
    ending in ``AND``). Read ``TEXT_BATCH`` rows a query, each after the last key seen, so
    a large journal is never held at once and the scan never restarts from the top."""
    cols = ", ".join(keys)
    after: tuple[Any, ...] | None = None
    while True:
        where = f"({cols}) > ({', '.join('?' * len(keys))}) AND " if after else ""
        rows = db.all(
            f"SELECT {cols}, {column}{extra} FROM {table} AS t "
            f"WHERE {where}{only}{column} IS NOT NULL AND {column} <> '' "
            f"ORDER BY {cols} LIMIT ?",
            (*(after or ()), TEXT_BATCH),
        )
        yield from (tuple(r) for r in rows)
        if len(rows) < TEXT_BATCH:
            return
        after = tuple(rows[-1][: len(keys)])


class Repository:
    """What a repository written once (a mixin of both stores: ``budget.BudgetLedger``,
    ``days.Days``) needs of its store: one transaction around a piece of work, given the
    transaction's ``Sql``. ``guard`` names what a write reads before it writes (the day's
    budget, the sessions' onboarding count): PostgreSQL locks it first, as SQLite's
    ``BEGIN IMMEDIATE`` does for the whole file; ``durable`` False lets SQLite commit
    without waiting for the disk (a power cut may lose the last few)."""

    def _in_write(
        self,
        doing: str,
        work: Callable[[Sql], T],
        *,
        guard: str | None = None,
        durable: bool = True,
    ) -> T:
        raise NotImplementedError

    def _in_read(self, doing: str, work: Callable[[Sql], T]) -> T:
        raise NotImplementedError
