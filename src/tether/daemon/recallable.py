"""What reaches a running daemon made recallable, vectors included: ``tether serve``'s
share of "recall is never silently lexical".

A turn's rows are indexed by the agent and embedded by the ``VectorIndexer`` it pokes.
The rest reaches the daemon from outside: a window a checkpoint hook banked and had no
time to put in its session, index or embed (the hook then schedules its harvest here),
rows an import or a hook left without a vector while the daemon was down or busy.
``CatchUp`` is the step the harvest queue runs

- for each segment it harvests (``[session]``): the windows banked but not in their
  sessions appended (``checkpoint.recallable.catch_up``), that session and every one
  changed indexed, then an embedding pass queued;
- when the daemon starts and at every maintenance pass (``()``): the same for every
  harness session, so what was left while it was down is embedded without waiting for a
  turn.

A failure (a full disk, the lock held by an import) is a warning: the next pass, or the
next recall, catches up.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from tether.checkpoint.recallable import catch_up
from tether.daemon.vectors import VectorIndexer
from tether.errors import TetherError
from tether.memory.indexer import index_home
from tether.ports import Store
from tether.scan.allow import home_allow
from tether.sessions import Session

log = logging.getLogger(__name__)


class CatchUp:
    """Banked windows into their sessions, indexed, embedded (see the module's doc)."""

    def __init__(
        self, home: Path, store: Store, indexer: VectorIndexer | None, *, slot: int = 0
    ) -> None:
        self.home = home
        self.store = store
        self.indexer = indexer
        self.slot = slot  # ``[slots] main``: the slot of a session the catch-up creates

    def __call__(self, sessions: Sequence[str] = ()) -> list[str]:
        """The sessions indexed (blocking: run it off the event loop)."""
        wanted: list[str] = []
        try:
            changed = catch_up(self.home, allow=home_allow(self.home), slot=self.slot)
            wanted = sorted(
                {*changed, *(s for s in sessions if s and Session.exists(self.home, s))}
            )
            if wanted:
                report = index_home(self.home, self.store, only=wanted)
                for sid, problem in report.errors:
                    log.warning("index session=%s skipped: %s", sid, problem)
        except (TetherError, OSError) as exc:
            log.warning("banked windows not made recallable yet (the next pass tries): %s", exc)
        if self.indexer is not None:
            self.indexer.poke()  # rows without a vector, whoever left them
        return wanted
