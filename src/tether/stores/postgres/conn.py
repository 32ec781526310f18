"""What the PostgreSQL stores share: the URL, the owner's schema, a connection pool, and
the one rule for errors and retries.

Tenancy: every owner (``[store] owner``) has its own schema, ``tether_<owner>``, in the
one database, and every connection a store takes has ``search_path`` set to it alone, so
no statement of one owner's store can read or write another's rows (there is no owner
column to forget in a WHERE clause). A daemon's store (one owner) has a pool of its own
whose connections are set to the owner's schema once, when made. A sweep worker, which
serves every owner it finds (``PgPool.owner_schemas``), holds one pool (``PgPool``) for
all of them, so its connections do not grow with the owners: those connections' own
``search_path`` names no schema at all, and every transaction of an owner's store on it
begins with ``SET LOCAL search_path`` to that owner's schema, which ends with the
transaction (commit or rollback), so no statement can run under another owner's path or
find a table outside one.

Retries: an operation of the main store is a function run inside one transaction; when
the server reports a serialization failure or a deadlock, or the connection is found
dead before the transaction committed, the transaction is rolled back (or was never
there) and the function runs again, up to ``ATTEMPTS`` times, on a fresh connection.
When the connection is lost during COMMIT the outcome is unknown: that is never retried
but reported (``StoreError``, "may or may not have been saved"), so nothing is applied
twice. Any other database error is reported at once, naming the database (the URL
without its password) and what was being done.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from tether.errors import StoreConnectionLostError, StoreError
from tether.stores.postgres import schema

T = TypeVar("T")
# The pool logs every failed connection attempt while it retries; tether reports the
# failure once, as a StoreError naming the database, so those lines are only noise.
logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
ATTEMPTS = 5
SCHEMA_PREFIX = "tether_"
_READ_ONLY = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_RETRY = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)


def redacted(url: str) -> str:
    """``url`` without its password (it goes into messages and reports)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


def schema_of(owner: str) -> str:
    return SCHEMA_PREFIX + owner


_OWNER_SCHEMAS = "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s) ORDER BY 1"


@contextlib.contextmanager
def connect(url: str) -> Iterator[psycopg.Connection[Any]]:
    """One plain connection (autocommit), errors as ``StoreError``."""
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise StoreError(redacted(url), f"cannot connect: {_first_line(exc)}") from None
    try:
        yield conn
    finally:
        conn.close()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


#: SQLSTATEs that say the session is gone: the connection exceptions (class 08), and the
#: server terminating it (``pg_terminate_backend``, a shutdown, a crash, not yet up).
_GONE = ("08", "57P01", "57P02", "57P03")


def _lost(exc: BaseException, conn: psycopg.Connection[Any] | None = None) -> bool:
    """Whether ``exc`` means the connection was lost, not that the statement failed."""
    if conn is not None and (conn.closed or conn.broken):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = getattr(exc, "sqlstate", None) or ""
    return not state or state.startswith(_GONE)


def _store_error(where: str, doing: str, exc: BaseException, conn: Any = None) -> StoreError:
    """``exc`` as tether reports it: a lost connection as ``StoreConnectionLostError``."""
    kind = StoreConnectionLostError if _lost(exc, conn) else StoreError
    return kind(where, f"{doing}: {_first_line(exc)}")


def _open_pool(
    url: str,
    max_size: int,
    configure: Callable[[psycopg.Connection[Any]], None],
    application_name: str | None = None,
) -> ConnectionPool[psycopg.Connection[Any]]:
    kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": 10}
    if application_name is not None:
        kwargs["application_name"] = application_name
    pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        kwargs=kwargs,
        configure=configure,
        check=ConnectionPool.check_connection,
        open=False,
    )
    try:
        pool.open(wait=True, timeout=15)
    except Exception as exc:
        pool.close()
        raise StoreError(redacted(url), f"cannot connect: {_first_line(exc)}") from None
    return pool


def _no_schema(conn: psycopg.Connection[Any]) -> None:
    """A shared connection's own path: no schema (a table outside a transaction's
    ``SET LOCAL search_path`` is not found)."""
    conn.execute("SET search_path TO ''")


class PgPool:
    """One pool of connections to a database, shared by the stores of many owners (a
    sweep worker's): at most ``max_size`` connections, however many owners. Each store on
    it sets its schema inside every transaction (``PgStore``, ``pool=``). Close it after
    the stores."""

    def __init__(self, url: str, *, max_size: int = 4, application_name: str | None = None):
        self.url = url
        self.where = redacted(url)
        self.max_size = max_size
        self.pool = _open_pool(url, max_size, _no_schema, application_name)
        #: Transactions of the stores on this pool run again because their connection was
        #: lost before they committed (``PgStore.run``): a worker reports them.
        self.reruns = 0
        self._reruns_lock = threading.Lock()  # the stores on the pool run in many threads

    def rerun(self) -> None:
        """Count one transaction run again after its connection was lost."""
        with self._reruns_lock:
            self.reruns += 1

    def owner_schemas(self) -> list[str]:
        """The owners with a schema in the database, sorted."""
        try:
            with self.pool.connection() as conn:
                rows = conn.execute(_OWNER_SCHEMAS, (SCHEMA_PREFIX,)).fetchall()
        except psycopg.Error as exc:
            raise _store_error(self.where, "listing the owners", exc) from None
        return [r[0].removeprefix(SCHEMA_PREFIX) for r in rows]

    def stats(self) -> dict[str, int]:
        """The pool's counters (``psycopg_pool``): ``pool_max``, ``pool_size``, ..."""
        return dict(self.pool.get_stats())

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> PgPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PgStore:
    """Connections to one owner's schema, migrated on open (``migrate``): a pool of its
    own (``max_size``), or a ``PgPool`` shared with other owners' stores (``pool``)."""

    def __init__(
        self,
        url: str,
        owner: str,
        *,
        migrate: bool = True,
        max_size: int = 4,
        pool: PgPool | None = None,
    ) -> None:
        self.url = url
        self.where = redacted(url)
        self.owner = owner
        self.schema = schema_of(owner)
        self._closed = False
        self._lock = threading.Lock()
        self._shared_pool = pool  # None: a pool of its own
        ident = sql.Identifier(self.schema)
        #: What opens each transaction: on a shared pool, the owner's path with it.
        self._begin = {
            write: sql.SQL("{}; SET LOCAL search_path TO {}").format(sql.SQL(b), ident)
            if self._shared_pool is not None
            else sql.SQL(b)
            for write, b in ((True, "BEGIN"), (False, _READ_ONLY))
        }
        if pool is not None:
            with pool.pool.connection() as conn:
                self._migrate(conn, migrate)
            self.pool = pool.pool
            return
        with connect(url) as conn:
            self._migrate(conn, migrate)
        self.pool = _open_pool(url, max_size, self._configure)

    def _migrate(self, conn: psycopg.Connection[Any], migrate: bool) -> None:
        with self._errors("migrating the schema"):
            if migrate:
                schema.migrate(conn, self.schema, self.where)
            self.level = schema.version(conn, self.schema)
        if self.level > schema.KNOWN:
            from tether.errors import StoreVersionError

            raise StoreVersionError(self.where, self.level, schema.KNOWN)

    def track_level(self, track: schema.Track, *, migrate: bool = True) -> int:
        """Another migration track in this owner's schema (the sweep's), brought to the
        level it knows when ``migrate``; its level. A newer one is refused unchanged."""
        self._check_open()
        with self._connection("migrating the schema") as conn, self._errors("migrating the schema"):
            if migrate:
                schema.migrate(conn, self.schema, self.where, track)
            level = track.level(conn, self.schema)
        if level > track.known:
            from tether.errors import StoreVersionError

            raise StoreVersionError(self.where, level, track.known)
        return level

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))

    # -- errors --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as exc:
            raise StoreError(self.where, f"{doing}: {_first_line(exc)}") from None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(self.where, "the store is closed")

    # -- transactions ------------------------------------------------------------------

    def run(
        self,
        doing: str,
        work: Callable[[psycopg.Connection[Any]], T],
        *,
        write: bool = True,
        hold: str | None = None,
    ) -> T:
        """``work`` in one transaction, retried on a serialization failure, a deadlock or
        a connection lost before COMMIT; ``hold``: an advisory lock key taken first (a
        write that must see no other writer of the same thing meanwhile)."""
        self._check_open()
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with self.pool.connection() as conn:
                    return self._once(conn, work, write=write, hold=hold)
            except _RETRY as exc:
                if attempt == ATTEMPTS:
                    raise StoreError(self.where, f"{doing}: {_first_line(exc)}") from None
            except _Uncommitted:
                if attempt == ATTEMPTS:
                    raise StoreConnectionLostError(
                        self.where, f"{doing}: the connection was lost (nothing was saved)"
                    ) from None
                if self._shared_pool is not None:
                    self._shared_pool.rerun()
            except _CommitLost:
                raise StoreConnectionLostError(
                    self.where,
                    f"{doing}: the connection was lost while committing; the change may or"
                    " may not have been saved",
                ) from None
            except psycopg.Error as exc:
                raise self._error(doing, exc) from None
        raise AssertionError("unreachable")

    def _once(
        self,
        conn: psycopg.Connection[Any],
        work: Callable[[psycopg.Connection[Any]], T],
        *,
        write: bool,
        hold: str | None,
    ) -> T:
        try:
            conn.execute(self._begin[write])
            if hold is not None:
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (hold,))
            result = work(conn)
        except psycopg.OperationalError as exc:
            if conn.closed or conn.broken:
                raise _Uncommitted from exc
            _rollback(conn)
            raise
        except BaseException:
            _rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except _RETRY:
            raise  # the server refused the commit: rolled back, safe to run again
        except psycopg.OperationalError as exc:
            if conn.closed or conn.broken:
                raise _CommitLost from exc
            raise
        return result

    @contextlib.contextmanager
    def transaction(self, doing: str, *, write: bool = True) -> Iterator[psycopg.Connection[Any]]:
        """One transaction around a block the caller runs (the sweep's): a dead pooled
        connection is replaced before it begins; once the block runs, any failure rolls
        back and is reported, never retried (the block cannot be run again here)."""
        self._check_open()
        with self._connection(doing) as conn:
            try:
                conn.execute(self._begin[write])
            except psycopg.Error as exc:
                raise self._error(doing, exc, conn) from None
            try:
                yield conn
            except psycopg.Error as exc:
                _rollback(conn)
                raise self._error(doing, exc, conn) from None
            except BaseException:
                _rollback(conn)
                raise
            try:
                conn.execute("COMMIT")
            except psycopg.Error as exc:
                if not _lost(exc, conn):
                    raise StoreError(self.where, f"{doing}: {_first_line(exc)}") from None
                raise StoreConnectionLostError(
                    self.where,
                    f"{doing}: the connection was lost while committing; the change may or"
                    " may not have been saved",
                ) from None

    @contextlib.contextmanager
    def _connection(self, doing: str) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; none to be had in the pool's time (the server down or
        refusing) is a lost connection, not a traceback."""
        try:
            cm = self.pool.connection()
            conn = cm.__enter__()
        except psycopg.Error as exc:
            raise StoreConnectionLostError(self.where, f"{doing}: {_first_line(exc)}") from None
        try:
            yield conn
        except BaseException as exc:
            if not cm.__exit__(type(exc), exc, exc.__traceback__):
                raise
        else:
            cm.__exit__(None, None, None)

    def _error(self, doing: str, exc: BaseException, conn: Any = None) -> StoreError:
        return _store_error(self.where, doing, exc, conn)

    def server_version(self) -> str:
        row = self.run(
            "reading the server version",
            lambda conn: conn.execute("SHOW server_version").fetchone(),
            write=False,
        )
        return str(row[0]) if row else "unknown"

    def close(self) -> None:
        """Close the store (its own pool; a shared one stays open for the others)."""
        if not self._closed:
            self._closed = True
            if self._shared_pool is None:
                self.pool.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Uncommitted(Exception):
    """The connection died before COMMIT was sent: nothing of the transaction is kept."""


class _CommitLost(Exception):
    """The connection died during COMMIT: the outcome is unknown."""


def _rollback(conn: psycopg.Connection[Any]) -> None:
    if conn.closed or conn.broken:
        return
    with contextlib.suppress(psycopg.Error):
        conn.execute("ROLLBACK")
