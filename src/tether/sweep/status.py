"""``tether sweep status`` as a record: the switches, and per owner its zone, cursor,
receipts, facts and stuck days (``sweep.stuck``), read in one read transaction; and where
the model pass's marks are (``stage_sources``, which ``sweep reconcile`` reads too)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Literal

import msgspec

from tether.config import SweepConfig
from tether.core.sweep.state import Cursor, Owner
from tether.ports import ModelStages, SweepStore
from tether.sweep import stuck
from tether.sweep.stage import FileStages

State = Literal["open", "killed", "closed"]


class OwnerStatus(msgspec.Struct, frozen=True, kw_only=True):
    owner: Owner
    cursor: Cursor | None
    #: The owner's zone changed after a completed day: ``sweep reconcile`` must follow.
    needs_reconciliation: bool
    receipts_pending: int
    receipts_committed: int
    facts: int
    stuck: list[stuck.StuckDay]


class SweepStatus(msgspec.Struct, frozen=True, kw_only=True):
    enabled: bool
    kill_switch: bool
    owners: list[OwnerStatus]

    @property
    def open(self) -> bool:
        return self.enabled and not self.kill_switch

    @property
    def state(self) -> State:
        return sweep_state(self.enabled, self.kill_switch)


def sweep_state(enabled: bool, kill_switch: bool) -> State:
    """The switches in a word: the kill switch wins over ``enabled``."""
    if enabled and not kill_switch:
        return "open"
    return "killed" if kill_switch else "closed"


def stage_sources(home: Path, store: SweepStore) -> list[tuple[str, ModelStages]]:
    """Where the model pass's marks are: the home's files, and a sweep worker's table when
    the store is PostgreSQL."""
    sources: list[tuple[str, ModelStages]] = [("files", FileStages(home))]
    table = getattr(store, "model_stages", None)
    if table is not None:
        sources.append(("store", table()))
    return sources


def status(home: Path, config: SweepConfig, store: SweepStore) -> SweepStatus:
    """The sweep's switches and every owner's state (deleted owners too)."""
    rows: list[OwnerStatus] = []
    with store.transaction(write=False) as tx:
        sources = stage_sources(home, store)
        for o in tx.owners():
            cur = tx.cursor(o.id)
            states = Counter(r.state for r in tx.receipts(o.id))
            rows.append(
                OwnerStatus(
                    owner=o,
                    cursor=cur,
                    needs_reconciliation=cur is not None and cur.timezone_name != o.timezone_name,
                    receipts_pending=states["pending"],
                    receipts_committed=states["committed"],
                    facts=len(tx.facts(o.id)),
                    stuck=[
                        row
                        for where, stages in sources
                        for row, _ in stuck.days(stages, where, o.id, cur)
                    ],
                )
            )
    return SweepStatus(enabled=config.enabled, kill_switch=config.kill_switch, owners=rows)
