"""The application: one object per process that opens each resource of a home once, on
first use, hands it out, and closes it once; and the one reader of the wall clock.

- ``App(home, config=None, clock=None, llm=None)``: nothing is opened when it is made, so a
  command that needs no store opens none (``benchmarks/cli_startup.py``). The config is
  read on first use (``config``), then kept.
- ``store()``, ``sweep(migrate=)``, ``vectors(required=)``, ``llm()``, ``budget()``: each
  opened on its first call (under a lock: the page's requests run on a thread pool) and
  the same object handed out after. A failure to open is the caller's error and is not
  kept: the next call tries again. ``store_info()``: where both stores stand, after
  opening (so migrating) them (``tether store migrate``, doctor). ``snapshot()``: the
  SQLite file read as it stands, when a full disk keeps ``store`` from opening it.
- A sweep worker's (``daemon.fleet``, an application over the worker's config):
  ``pool(url)``, one pool of connections to the shared PostgreSQL, and on it
  ``owner_sweep(url, owner)`` and ``owner_store(url, owner)``, each opened once.
- ``wrap_llm(wrap)``: the model, wrapped (the demo records each request), handed out from
  then on. ``aclose_llm()``: the model's client closed, once, if this application opened
  it (a sweep closes it in the portal its calls ran in).
- The house test holds that nothing outside the application opens a store, a pool, the
  vectors or the model (``opened_by_app``): a module that needs one asks its ``App``.
- ``close()`` (or leaving ``with App(...)``) closes what was opened, each once, the last
  opened first; ``aclose()`` also closes the model's client. The CLI closes its ``App``
  when the command ends (``cli.context``), the page when it stops, the daemon with its
  ``Runtime``.
- ``now()``: the time, from ``clock`` (the wall clock in UTC unless one is given). The
  house test holds that nothing else in ``src/tether`` reads the wall clock (``time.time``,
  ``datetime.now``, ``date.today``; the monotonic clock, which only measures how long
  something took, is not the time of day). Tests give a clock through here:
  ``build_runtime(clock=)`` in process, ``python -m tether.testing.cli`` for a child
  process (``tether.testing.cli``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self, TypeVar

from tether.config import Config, load_config

if TYPE_CHECKING:  # loaded on use: the CLI imports this module for every command
    from tether.agent.budget import BudgetGate
    from tether.memory.vectors import Vectors
    from tether.ports import Clock, Llm, Store, SweepStore
    from tether.stores import StoreInfo
    from tether.stores.postgres import PostgresStore
    from tether.stores.postgres.conn import PgPool
    from tether.stores.postgres.sweep import PostgresSweepStore

_Closing = TypeVar(
    "_Closing", bound="Store | SweepStore | PgPool | PostgresStore | PostgresSweepStore"
)
_Wrapped = TypeVar("_Wrapped", bound="Llm")


class SystemClock:
    """The wall clock, in UTC. Only the application reads it (``App.now``)."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FixedClock:
    """A clock stopped at one time (a one-off ``sweep run`` at ``now``, a test's child)."""

    def __init__(self, time: datetime) -> None:
        self.time = time

    def now(self) -> datetime:
        return self.time


class App:
    """A home's resources, each opened once on first use and closed once (module doc)."""

    def __init__(
        self,
        home: Path,
        config: Config | None = None,
        *,
        clock: Clock | None = None,
        llm: Llm | None = None,
    ) -> None:
        self.home = home
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._config = config
        self._lock = threading.RLock()
        self._store: Store | None = None
        self._sweeps: dict[bool, SweepStore] = {}
        self._snapshot: Store | None = None
        #: Recall's vectors, by ``required`` (None: lexical).
        self._vectors: dict[bool, Vectors | None] = {}
        self._pools: dict[str, PgPool] = {}
        self._owner_sweeps: dict[tuple[str, str], PostgresSweepStore] = {}
        self._owner_stores: dict[tuple[str, str], PostgresStore] = {}
        self._llm = llm
        self._llm_opened = llm is not None
        self._budget: BudgetGate | None = None
        #: What to close, in the order opened (closed last first).
        self._opened: list[Callable[[], None]] = []
        self._closed = False

    def now(self) -> datetime:
        """The time (UTC): the one read of the clock."""
        return self.clock.now()

    @property
    def config(self) -> Config:
        """``<home>/tether.toml``, read on first use and kept."""
        with self._lock:
            if self._config is None:
                self._config = load_config(self.home)
            return self._config

    def store(self) -> Store:
        """The home's store as ``[store]`` names it (created and migrated if need be)."""
        if self._store is not None:  # held: no lock (the page's requests ask often)
            return self._store
        with self._lock:
            if self._store is None:
                from tether.stores import open_store  # on use: most commands need none

                self._store = self._open(open_store(self.home, self.config))
            return self._store

    def sweep(self, *, migrate: bool = True) -> SweepStore:
        """The sweep's store. With ``migrate`` False, a reader (recall, the memory scan):
        a SQLite file the sweep never ran in is left without the sweep's tables; a
        migrated one, once open, serves readers too."""
        with self._lock:
            held = self._sweeps.get(True) or (None if migrate else self._sweeps.get(False))
            if held is None:
                from tether.stores import open_sweep_store

                held = self._open(open_sweep_store(self.home, self.config, migrate=migrate))
                self._sweeps[migrate] = held
            return held

    def snapshot(self) -> Store:
        """The SQLite file as it stands, read-only (``stores.open_snapshot``): what recall
        answers from when a full disk keeps ``store`` from opening it."""
        with self._lock:
            if self._snapshot is None:
                from tether.stores import open_snapshot

                self._snapshot = self._open(open_snapshot(self.home, self.config))
            return self._snapshot

    def store_info(self) -> StoreInfo:
        """Where the store stands (``stores.store_info``), once it and the sweep's store
        are open, so migrated to the schema this tether knows (``tether store migrate``,
        doctor). A store newer than this tether raises StoreVersionError."""
        from tether.stores import store_info

        return store_info(self.home, self.config, self.store(), self.sweep())

    def vectors(self, *, required: bool = False) -> Vectors | None:
        """Recall's vectors as ``[recall] vectors`` says (None: recall is lexical), after
        the store (which migrates the file the index lives in). ``required``: whatever the
        setting says (``memory reindex --vectors``; the extra must be there)."""
        with self._lock:
            held = self._vectors.get(False)
            if required and held is not None:  # the same model and index
                return held
            if required not in self._vectors:
                self.store()
                import msgspec

                from tether.daemon.vectors import open_vectors

                config = self.config
                if required:
                    recall = msgspec.structs.replace(config.recall, vectors=True)
                    config = msgspec.structs.replace(config, recall=recall)
                vectors = open_vectors(self.home, config)
                if vectors is not None:
                    self._opened.append(vectors.index.close)
                self._vectors[required] = vectors
            return self._vectors[required]

    def vectors_on(self) -> bool:
        """Whether ``vectors`` may give any: ``[recall] vectors`` is not false and the
        extra tether[vectors] is installed (nothing loaded to tell)."""
        from tether.llm import embedder

        return self.config.recall.vectors is not False and embedder.available()

    def pool(self, url: str, *, max_size: int, name: str) -> PgPool:
        """One pool of at most ``max_size`` connections to the PostgreSQL database at
        ``url``, shared by the owners' stores on it (a sweep worker's); its connections
        named ``name`` in ``pg_stat_activity``. Closed after them."""
        with self._lock:
            if url not in self._pools:
                from tether.stores import open_pool

                self._pools[url] = self._open(open_pool(url, max_size=max_size, name=name))
            return self._pools[url]

    def owner_sweep(self, url: str, owner: str) -> PostgresSweepStore:
        """``owner``'s sweep store on the pool of ``url`` (``pool`` first), migrated."""
        with self._lock:
            held = self._owner_sweeps.get((url, owner))
            if held is None:
                from tether.stores import open_owner_sweep

                held = self._open(open_owner_sweep(self._pool_of(url), owner))
                self._owner_sweeps[url, owner] = held
            return held

    def owner_store(self, url: str, owner: str) -> PostgresStore:
        """``owner``'s main store on the pool of ``url`` (``pool`` first), as it stands
        (its schema is its home's to migrate)."""
        with self._lock:
            held = self._owner_stores.get((url, owner))
            if held is None:
                from tether.stores import open_owner_store

                held = self._open(open_owner_store(self._pool_of(url), owner))
                self._owner_stores[url, owner] = held
            return held

    def _pool_of(self, url: str) -> PgPool:
        pool = self._pools.get(url)
        if pool is None:  # a store on a pool of its own would hold connections unshared
            raise RuntimeError("the owners' stores open on the worker's pool: App.pool first")
        return pool

    def llm(self) -> Llm:
        """The model ``[llm]`` names (or the one this application was given)."""
        with self._lock:
            if self._llm is None:
                from tether.daemon.compose import build_llm

                self._llm = build_llm(self.config)
                self._llm_opened = True
            return self._llm

    def wrap_llm(self, wrap: Callable[[Llm], _Wrapped]) -> _Wrapped:
        """The model wrapped by ``wrap`` (the demo records each request), handed out by
        ``llm`` from now on; its client is closed through the wrapper."""
        with self._lock:
            wrapped = wrap(self.llm())
            self._llm = wrapped
            return wrapped

    async def aclose_llm(self) -> None:
        """Close the model's client, once, if this application opened it (or was given
        it): a sweep closes it in the portal its calls ran in."""
        with self._lock:
            llm, opened = self._llm, self._llm_opened
            self._llm_opened = False
        if opened and llm is not None:
            await llm.aclose()

    def budget(self) -> BudgetGate:
        """The spend gate of the model calls (``[budget]``), over the store, counting in
        the home owner's zone; its pending settles written when the application closes."""
        with self._lock:
            if self._budget is None:
                from tether.daemon.compose import build_budget

                store, sweep = self.store(), self.sweep(migrate=False)
                self._budget = build_budget(self.home, self.config, store, self.clock, sweep)
                self._opened.append(self._budget.flush)
            return self._budget

    def _open(self, opened: _Closing) -> _Closing:
        if self._closed:  # nothing would close it: a use after the end is a bug
            opened.close()
            raise RuntimeError("the application is closed; nothing more opens in it")
        self._opened.append(opened.close)
        return opened

    def close(self) -> None:
        """Close what was opened, last opened first, once; every close is tried."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            opened, self._opened = self._opened, []
        with contextlib.ExitStack() as stack:
            for close in opened:  # an ExitStack calls them last first, each despite errors
                stack.callback(close)

    async def aclose(self) -> None:
        """``close``, after the model's client (the daemon's shutdown)."""
        try:
            await self.aclose_llm()
        finally:
            self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
