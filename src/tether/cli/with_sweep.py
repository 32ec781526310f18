"""``recall`` and the memory scan with the home's sweep store passed beside the main one.

``memory recall`` and ``memory scan`` open the main store only and call these with it;
here the sweep's store of the same home is opened as a reader (a home the sweep never ran
in stays without its tables) and both ports are handed to ``tether.memory``, which
imports neither adapter.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tether.config import load_config
from tether.core.query import DEFAULT_BUDGET
from tether.memory import recall as _recall
from tether.memory.identity import Identity
from tether.ports import Store, SweepStore
from tether.records import Hit

if TYPE_CHECKING:
    from tether.memory.secret_scan import ScanReport


@contextmanager
def _sweep(home: Path | None) -> Iterator[SweepStore | None]:
    if home is None:
        yield None
        return
    from tether.stores import open_sweep_store

    sweep = open_sweep_store(home, load_config(home), migrate=False)
    try:
        yield sweep
    finally:
        sweep.close()


def recall(
    store: Store,
    text: str,
    k: int,
    *,
    time: datetime,
    budget: int = DEFAULT_BUDGET,
    home: Path | None = None,
) -> list[Hit]:
    """``memory.recall.recall`` over the store and, with ``home``, that home's sweep."""
    with _sweep(home) as sweep:
        return _recall.recall(store, text, k, time=time, budget=budget, home=home, sweep=sweep)


def scan_memory(
    identity: Identity, store: Store, *, allow: frozenset[str], fix: bool, time: datetime
) -> ScanReport:
    """``memory.secret_scan.scan_memory`` over the store and the identity's home's sweep."""
    from tether.memory.secret_scan import scan_memory as scan

    with _sweep(identity.home) as sweep:
        return scan(identity, store, allow=allow, fix=fix, time=time, sweep=sweep)
