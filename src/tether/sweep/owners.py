"""Owners: who the memory belongs to, their zone, generations and deletion marker.

``delete`` is two transactions: the durable deletion marker (with a new account
generation) first, then the wipe of the owner's memory, journal, receipts, cursor and
stages. Every sweep transaction re-reads the marker, so once it is set nothing of the
owner is written again; a crash between the two is finished by deleting again.
"""

from __future__ import annotations

import contextlib
import os
import re
from datetime import datetime, timedelta
from pathlib import Path

import msgspec

from tether.core.sweep.errors import OwnerExistsError, SweepFencedError, UnknownOwnerError
from tether.core.sweep.state import Owner, StandingTrigger
from tether.core.sweep.triggers import compile_text
from tether.core.sweep.windows import local_today, zone
from tether.errors import InvalidIdError, TetherError
from tether.faults import crash_point
from tether.ports import SweepStore, SweepTx
from tether.sweep.fence import live_owner

DEFAULT_OWNER = "owner"
DEFAULT_ZONE = "UTC"
OWNER_GRAMMAR = "1 to 64 characters of a-z, 0-9, '-' and '_', starting with a letter or digit"
_OWNER_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def owner_id(value: str) -> str:
    if not _OWNER_ID.fullmatch(value):
        raise InvalidIdError("owner id", value, OWNER_GRAMMAR)
    return value


def new_owner(owner: str, timezone_name: str, now: datetime) -> Owner:
    """A fresh owner whose first swept day is the local day before ``now``."""
    zone(timezone_name)
    return Owner(
        id=owner_id(owner),
        timezone_name=timezone_name,
        first_date=local_today(timezone_name, now) - timedelta(days=1),
        created_at=now,
    )


def add(store: SweepStore, owner: str, timezone_name: str, now: datetime) -> Owner:
    row = new_owner(owner, timezone_name, now)
    with store.transaction() as tx:
        old = tx.owner(owner)
        if old is not None:
            raise OwnerExistsError(owner, deleted=old.deleted_at is not None)
        tx.put_owner(row)
    return row


def ensure_default(store: SweepStore, now: datetime, *, zone: str = DEFAULT_ZONE) -> None:
    """The home's owner ``owner`` exists (made in ``zone``: ``tether init`` passes the
    machine's), unless it was deleted. Every session belongs to it unless it says not."""
    with store.transaction(write=False) as tx:
        if tx.owner(DEFAULT_OWNER) is not None:
            return
    row = new_owner(DEFAULT_OWNER, zone, now)
    with store.transaction() as tx:
        if tx.owner(DEFAULT_OWNER) is None:
            tx.put_owner(row)


def listing(store: SweepStore) -> list[Owner]:
    with store.transaction(write=False) as tx:
        return tx.owners()


def get(store: SweepStore, owner: str) -> Owner:
    with store.transaction(write=False) as tx:
        return held(tx, owner)


def held(tx: SweepTx, owner: str) -> Owner:
    """``owner`` as ``tx`` sees it, else UnknownOwnerError (for reads that need the owner
    and its memory in one transaction)."""
    row = tx.owner(owner)
    if row is None:
        raise UnknownOwnerError(owner)
    return row


def set_timezone(store: SweepStore, owner: str, timezone_name: str) -> Owner:
    """Change the zone. With a completed cursor in another zone, the sweep then stops for
    this owner until ``tether sweep reconcile`` (nothing replayed, nothing skipped)."""
    zone(timezone_name)
    with store.transaction() as tx:
        if tx.owner(owner) is None:
            raise UnknownOwnerError(owner)
        row = msgspec.structs.replace(live_owner(tx, owner), timezone_name=timezone_name)
        tx.put_owner(row)
    return row


class Deleted(msgspec.Struct, frozen=True):
    owner: str
    rows_wiped: int
    already_marked: bool


def delete(store: SweepStore, owner: str, now: datetime) -> Deleted:
    with store.transaction() as tx:
        row = tx.owner(owner)
        if row is None:
            raise UnknownOwnerError(owner)
        already = row.deleted_at is not None
        if not already:
            tx.put_owner(
                msgspec.structs.replace(
                    row, deleted_at=now, account_generation=row.account_generation + 1
                )
            )
    crash_point("owner-delete-after-marker")
    with store.transaction() as tx:
        wiped = tx.wipe_owner(owner)
    return Deleted(owner, wiped, already)


def roll_source_generation(store: SweepStore, owner: str, expected: int) -> int:
    """Start a new source generation (the owner's sources were rebuilt): compare-and-set
    on ``expected``. The cursor's completed-day window identity is kept; packets and
    receipts of the old generation are refused from now on."""
    with store.transaction() as tx:
        row = live_owner(tx, owner)
        if row.source_generation != expected:
            raise SweepFencedError(owner, "source_generation_changed")
        tx.put_owner(msgspec.structs.replace(row, source_generation=expected + 1))
    return expected + 1


def add_standing_trigger(
    store: SweepStore,
    owner: str,
    trigger_id: str,
    condition: object,
    *,
    now: datetime,
    authority: str = "direct_user_statement",
) -> StandingTrigger:
    """An owner-set trigger (the only way one is created; the sweep can only repair)."""
    trigger = StandingTrigger(
        owner=owner,
        id=trigger_id,
        condition=compile_text(condition),
        authority=authority,
        provenance="standing_trigger",
        active=True,
        updated_at=now,
    )
    with store.transaction() as tx:
        live_owner(tx, owner)
        tx.put_trigger(trigger)
    return trigger


def machine_zone() -> str:
    """This machine's IANA zone: ``$TZ`` when it names one, else what ``/etc/localtime``
    links to, else ``/etc/timezone``, else UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    with contextlib.suppress(OSError):
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    with contextlib.suppress(OSError, UnicodeDecodeError):
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    for name in candidates:
        if name:
            with contextlib.suppress(TetherError):
                zone(name)
                return name
    return "UTC"


def home_zone(sweep: SweepStore | None) -> str:
    """The zone whose local day the budgets count in: the home owner's (the sweep's owner
    ``owner``, set with ``tether owner set-tz``), else the machine's."""
    if sweep is not None:
        try:
            owner = get(sweep, DEFAULT_OWNER)
        except TetherError:  # no owner yet, or a store the sweep never ran in
            return machine_zone()
        return owner.timezone_name
    return machine_zone()


def home_owner(store: SweepStore, now: datetime) -> Owner:
    """The home's owner (``tether init``), made with this machine's zone when there is
    none yet."""
    ensure_default(store, now, zone=machine_zone())
    return get(store, DEFAULT_OWNER)
