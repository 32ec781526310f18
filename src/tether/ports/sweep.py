"""The daily memory sweep's ports: its store and transactions, the owner-days sweep workers
share out, what gives it a day's packet, and where its model pass keeps each day's
invocation record."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import date, datetime, timedelta
from typing import Protocol

from tether.core.sweep import state as _sweep
from tether.core.sweep.packet import DailySweepInput, Incomplete
from tether.core.sweep.windows import Window
from tether.records import ClaimedDay, TextCell

# Rows are the Structs of ``tether.core.sweep.state``. The port is deliberately dumb: row
# reads and writes inside one transaction; the rules (fencing, claims, authority) live in
# ``tether.sweep`` once, so SQLite and PostgreSQL pass the same contract tests.


class SweepTx(Protocol):
    """One serialisable transaction (SQLite ``BEGIN IMMEDIATE``; PostgreSQL rows ``FOR
    UPDATE``). Everything read inside it stays true until it commits."""

    def owner(self, owner_id: str) -> _sweep.Owner | None: ...

    def owners(self) -> list[_sweep.Owner]: ...

    def put_owner(self, owner: _sweep.Owner) -> None:
        """Insert or replace the owner row."""

    def wipe_owner(self, owner_id: str) -> int:
        """Delete the owner's facts, triggers, journal, receipts, cursor and stages (the
        owner row and its deletion marker stay). Returns the rows deleted."""

    def fact_in_slot(self, owner_id: str, subject: str, entity: str) -> _sweep.Fact | None:
        """The active fact of a slot, if any."""

    def put_fact(self, fact: _sweep.Fact) -> _sweep.Fact:
        """Insert (``id == 0``) or update a fact; returns it with its id."""

    def facts(self, owner_id: str) -> list[_sweep.Fact]: ...

    def trigger(self, owner_id: str, trigger_id: str) -> _sweep.StandingTrigger | None: ...

    def put_trigger(self, trigger: _sweep.StandingTrigger) -> None: ...

    def triggers(self, owner_id: str) -> list[_sweep.StandingTrigger]: ...

    def journal_for(self, receipt_id: str) -> _sweep.JournalRow | None: ...

    def append_journal(self, row: _sweep.JournalRow) -> _sweep.JournalRow: ...

    def journal(self, owner_id: str) -> list[_sweep.JournalRow]: ...

    def receipt(self, receipt_id: str) -> _sweep.Receipt | None: ...

    def put_receipt(self, receipt: _sweep.Receipt) -> None:
        """Insert or replace a receipt by id."""

    def receipts(self, owner_id: str) -> list[_sweep.Receipt]: ...

    def pending_receipts(
        self, owner_id: str, namespace: int, local_date: date, account_gen: int, source_gen: int
    ) -> int:
        """Receipts of one day (namespace, generations) not yet committed."""

    def cursor(self, owner_id: str) -> _sweep.Cursor | None: ...

    def put_cursor(self, cursor: _sweep.Cursor) -> None: ...

    def stage(
        self, owner_id: str, local_date: date, source_gen: int, window_id: str
    ) -> _sweep.StagedPacket | None: ...

    def put_stage(self, staged: _sweep.StagedPacket) -> None:
        """Insert a stage; an existing one for the same key is never replaced."""

    # -- what the main store's fact mirror reads ----------------------------------------
    def facts_stamp(self) -> str:
        """A stamp that changes with every write to facts or owners (``NO_SWEEP`` while
        the sweep has no tables here): the mirror re-reads the facts only when it moves."""

    def active_facts(self) -> list[_sweep.Fact]:
        """Every active fact of every owner not deleted, by id."""


class SweepStore(Protocol):
    """The sweep's durable state: owners, facts, standing triggers, journal, receipts,
    cursors, staged packets."""

    def close(self) -> None: ...

    def transaction(self, *, write: bool = True) -> AbstractContextManager[SweepTx]:
        """A transaction: committed when the block ends, rolled back if it raises."""

    def journal_rows(self, limit: int | None = None) -> list[_sweep.JournalRow]:
        """Every owner's canonical writes, oldest first; with ``limit``, only the newest
        ``limit``; none in a store the sweep never ran in (``tether memory journal``)."""

    # -- the stored text of the sweep, for the secret scan ------------------------------
    def read_cells(self, visit: Callable[[TextCell], None]) -> None:
        """Call ``visit`` with every non-empty sweep text (facts, the sweep journal,
        trigger conditions, staged packets), in batches; a stage whose day the sweep is
        in the middle of comes ``busy``."""

    def rewrite_cells(self, edits: Sequence[tuple[TextCell, str]]) -> tuple[list[bool], bool]:
        """Replace the cells that still hold the text they were read with (a stage only
        while its day is still not in progress; its digest follows), in one sweep write
        transaction, zeroing what is freed; then truncate the write-ahead log. Per edit,
        whether it was made; and whether the log was truncated."""


class OwnerClaims(Protocol):
    """Owner-days that sweep workers share out (PostgreSQL: ``FOR UPDATE SKIP LOCKED``
    and a lease on the server's clock)."""

    def offer(self, days: Sequence[tuple[str, date]]) -> int:
        """Make these (owner, local date) pairs claimable, each once however often it is
        offered; how many were new."""

    def claim(self, claimant: str, lease: timedelta) -> ClaimedDay | None:
        """The oldest open owner-day (or one whose lease ran out), held by ``claimant``
        for ``lease``; None when there is none. Never waits on another worker's claim."""

    def finish(self, day: ClaimedDay, outcome: str) -> bool:
        """Mark the day done (``outcome`` ``complete``) or hand it back to be offered
        again (any other), if ``day.claimant`` still holds it (False: its lease ran out
        and another worker took it over)."""

    def release(self, claimant: str) -> int:
        """Hand back every owner-day ``claimant`` holds (claimable by any worker at once)
        and expire its pending receipts' leases; how many days (a stopping worker)."""

    def counts(self) -> dict[str, int]:
        """Owner-days by state: ``open``, ``claimed``, ``done``."""


class ClaimingStore(SweepStore, Protocol):
    """A sweep store that several worker processes share (PostgreSQL)."""

    def claims(self) -> OwnerClaims: ...


class Producer(Protocol):
    """Gives the sweep a day's packet, or says why the day is not ready."""

    def produce(self, owner: _sweep.Owner, window: Window) -> DailySweepInput | Incomplete: ...


class ModelStages(Protocol):
    """Where the sweep's model pass keeps each owner-day's invocation record, so that no
    day's model is called while another call for it may still run (``sweep.stage``
    encodes, reads and fences the records): the home's stage files
    (``sweep.stage.FileStages``), or the store's ``sweep_model_stage``
    (``stores.postgres.sweep_stage``), where a sweep worker with no home keeps them."""

    def now(self) -> datetime:
        """The clock the marks' leases are on (the wall clock, or the database server's)."""
        ...

    def load(self, owner: str, local_date: date) -> bytes | None:
        """The day's record as written (a file's lines, the last complete one saying where
        the invocation is; a table's one record); None: no invocation yet. Raises
        OSError when a file cannot be read."""
        ...

    def days(self, owner: str) -> list[date]:
        """The local dates the owner has a record for, oldest first."""
        ...

    def mark(self, owner: str, local_date: date, record: bytes) -> bool:
        """The ``invoked`` record, durably (fsynced, or committed) before the invocation's
        first model request; False, with nothing written, when the day has a record
        already (another runner owns its invocation)."""
        ...

    def replace(
        self, owner: str, local_date: date, expected: bytes, record: bytes, state: str
    ) -> bool:
        """Make ``record`` (whose state is ``state``) the day's record only while the
        current one is exactly ``expected``; False, with nothing written, otherwise."""
        ...

    def remove(self, owner: str, local_date: date, expected: bytes) -> bool:
        """Forget the day's record only while it is exactly ``expected``."""
        ...
