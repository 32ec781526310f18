"""What the sweep's commands read, and ``sweep reconcile``, as records: ``status`` (the
switches, and per owner its zone, cursor, receipts, facts and stuck days, read in one read
transaction), an owner's facts and journal, whether an owner's cursor waits for a
reconcile, and ``reconcile_owner`` (a new zone accepted, stuck days re-opened); where the
model pass's marks are (``stage_sources``)."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime
from pathlib import Path
from typing import Literal

import msgspec

from tether.config import SweepConfig
from tether.core.sweep.state import Cursor, Fact, JournalRow, Owner
from tether.ports import ModelStages, SweepStore
from tether.sweep import cursor, owners, stuck
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


def owner_facts(store: SweepStore, owner: str) -> tuple[Owner, list[Fact]]:
    """The owner (UnknownOwnerError if none) and every fact the sweep holds for it, read
    in one transaction."""
    with store.transaction(write=False) as tx:
        row = owners.held(tx, owner)
        return row, tx.facts(row.id)


def owner_journal(store: SweepStore, owner: str) -> tuple[Owner, list[JournalRow]]:
    """The owner (UnknownOwnerError if none) and every canonical write the sweep made for
    it, oldest first, read in one transaction."""
    with store.transaction(write=False) as tx:
        row = owners.held(tx, owner)
        return row, tx.journal(row.id)


def waits_for_reconcile(store: SweepStore, owner: Owner) -> bool:
    """Whether the owner's cursor was completed in another zone than the owner's (after
    ``owner set-tz``): the sweep waits for ``sweep reconcile``."""
    with store.transaction(write=False) as tx:
        cur = tx.cursor(owner.id)
    return cur is not None and cur.timezone_name != owner.timezone_name


class Reconciliation(msgspec.Struct, frozen=True, kw_only=True):
    """What ``sweep reconcile`` did: the zone (None: only a date's stuck day was asked
    for, the zone left alone) and each stuck day re-opened or left."""

    owner: str
    zone: cursor.Reconciled | None
    days: list[stuck.Reopened]

    @property
    def left(self) -> list[stuck.Reopened]:
        """The stuck days a live run holds (or that are unreadable): left as they are."""
        return [d for d in self.days if d.action == "left"]


def reconcile_owner(
    home: Path, store: SweepStore, owner: str, now: datetime, only: date | None = None
) -> Reconciliation:
    """Accept the owner's new zone (unless ``only`` names one date), then re-open the
    owner's abandoned and failed days (``only``: that one)."""
    zone = None if only is not None else cursor.reconcile(store, owner, now)
    with store.transaction(write=False) as tx:
        owners.held(tx, owner)
        cur = tx.cursor(owner)
    days = stuck.reopen(stage_sources(home, store), owner, cur, only)
    return Reconciliation(owner=owner, zone=zone, days=days)
