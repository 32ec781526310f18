"""The application: one object per process that opens each resource of a home once, on
first use, hands it out, and closes it once; and the one reader of the wall clock.

- ``App(home, config=None, clock=None, llm=None)``: nothing is opened when it is made, so a
  command that needs no store opens none (``benchmarks/cli_startup.py``). The config is
  read on first use (``config``), then kept.
- ``store()``, ``sweep(migrate=)``, ``vectors()``, ``llm()``, ``budget()``: each opened on
  its first call (under a lock: the page's requests run on a thread pool) and the same
  object handed out after. A failure to open is the caller's error and is not kept: the
  next call tries again.
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

_Closing = TypeVar("_Closing", "Store", "SweepStore")


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
        self._vectors: Vectors | None = None
        self._vectors_opened = False
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

    def vectors(self) -> Vectors | None:
        """Recall's vectors as ``[recall] vectors`` says (None: recall is lexical),
        after the store (which migrates the file the index lives in)."""
        with self._lock:
            if not self._vectors_opened:
                self.store()
                from tether.daemon.vectors import open_vectors

                vectors = open_vectors(self.home, self.config)
                if vectors is not None:
                    self._opened.append(vectors.index.close)
                self._vectors, self._vectors_opened = vectors, True
            return self._vectors

    def llm(self) -> Llm:
        """The model ``[llm]`` names (or the one this application was given)."""
        with self._lock:
            if self._llm is None:
                from tether.daemon.compose import build_llm

                self._llm = build_llm(self.config)
                self._llm_opened = True
            return self._llm

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
            if self._llm_opened and self._llm is not None:
                await self._llm.aclose()
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
