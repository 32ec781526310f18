"""SweepStore contract tests, written against the port: every test taking ``store`` runs
on SQLite and on PostgreSQL (when ``TETHER_TEST_POSTGRES`` names a server)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

import pg_helpers
from tether.core.sweep.state import Cursor, Fact, JournalRow, Owner, Receipt, StagedPacket
from tether.errors import StoreError, StoreVersionError
from tether.ports import SweepStore
from tether.stores.sqlite import SqliteStore
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.stores.sqlite.sweep_schema import SWEEP_MIGRATIONS

T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)


@pytest.fixture
def store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SweepStore]:
    if backend == "sqlite":
        s: SweepStore = SqliteSweepStore(tmp_path / "tether.db")
    else:
        from tether.stores.postgres.sweep import PostgresSweepStore

        s = PostgresSweepStore(request.getfixturevalue("pg_url"), pg_helpers.new_owner())
    yield s
    s.close()


def owner(oid: str = "alice") -> Owner:
    return Owner(id=oid, timezone_name="Europe/Paris", first_date=date(2026, 10, 31), created_at=T0)


def receipt(rid: str, state: str = "pending") -> Receipt:
    return Receipt(
        id=rid,
        owner="alice",
        namespace=1,
        local_date=date(2026, 10, 31),
        kind="candidate",
        source_key="s1",
        ordinal=0,
        account_generation=1,
        source_generation=1,
        digest="d",
        state=state,  # type: ignore[arg-type]
        claimant="c",
        lease_until=T0,
        attempts=1,
        outcome=None,
        updated_at=T0,
    )


def fact_row(entity: str = "e") -> Fact:
    return Fact(
        owner="alice",
        subject="owner",
        entity=entity,
        text="t",
        authority="sweep_inference",
        refs="[]",
        origin_receipt="r1",
        created_at=T0,
        updated_at=T0,
    )


def test_rows_round_trip(store: SweepStore) -> None:
    with store.transaction() as tx:
        tx.put_owner(owner())
        f = tx.put_fact(fact_row())
        tx.put_receipt(receipt("r1"))
        tx.put_receipt(receipt("r2", "committed"))
        tx.append_journal(
            JournalRow(
                owner="alice",
                receipt_id="r1",
                time=T0,
                who="sweep",
                action="a",
                target="fact:owner/e",
                before=None,
                after="t",
                evidence="{}",
            )
        )
        cur = Cursor(
            owner="alice",
            timezone_name="Europe/Paris",
            local_date=date(2026, 10, 31),
            window_id="w",
            window_start_utc=T0,
            window_end_utc=T0 + timedelta(hours=25),
            updated_at=T0,
        )
        tx.put_cursor(cur)
    with store.transaction(write=False) as tx:
        assert tx.owner("alice") == owner()
        assert tx.fact_in_slot("alice", "owner", "e") == f
        assert f.id > 0
        assert [r.id for r in tx.receipts("alice")] == ["r1", "r2"]
        assert tx.pending_receipts("alice", 1, date(2026, 10, 31), 1, 1) == 1
        assert tx.journal_for("r1") is not None
        assert tx.cursor("alice") == cur
        assert tx.owner("bob") is None


def test_one_active_fact_per_slot_and_one_journal_entry_per_receipt(store: SweepStore) -> None:
    with store.transaction() as tx:
        tx.put_fact(fact_row())
    with pytest.raises(StoreError, match=r"(?i)unique"), store.transaction() as tx:
        tx.put_fact(fact_row())
    row = JournalRow(
        owner="alice",
        receipt_id="r1",
        time=T0,
        who="sweep",
        action="a",
        target="x",
        before=None,
        after=None,
        evidence="{}",
    )
    with store.transaction() as tx:
        tx.append_journal(row)
    with pytest.raises(StoreError, match=r"(?i)unique"), store.transaction() as tx:
        tx.append_journal(row)
    with store.transaction(write=False) as tx:
        assert len(tx.facts("alice")) == 1
        assert len(tx.journal("alice")) == 1


def _half_written(store: SweepStore) -> None:
    with store.transaction() as tx:
        tx.put_owner(owner())
        raise RuntimeError("boom")


def test_a_failed_transaction_writes_nothing(store: SweepStore) -> None:
    with pytest.raises(RuntimeError):
        _half_written(store)
    with store.transaction(write=False) as tx:
        assert tx.owners() == []


def test_stages_are_immutable(store: SweepStore) -> None:
    first = StagedPacket(
        owner="alice",
        local_date=date(2026, 10, 31),
        source_generation=1,
        window_id="w",
        digest="a",
        packet=b"{}",
        created_at=T0,
    )
    with store.transaction() as tx:
        tx.put_stage(first)
        tx.put_stage(msgspec.structs.replace(first, digest="b", packet=b"[]"))
    with store.transaction(write=False) as tx:
        assert tx.stage("alice", date(2026, 10, 31), 1, "w") == first
        assert tx.stage("alice", date(2026, 10, 31), 2, "w") is None


def test_wipe_keeps_the_owner_row_and_marker(store: SweepStore) -> None:
    with store.transaction() as tx:
        tx.put_owner(msgspec.structs.replace(owner(), deleted_at=T0))
        tx.put_owner(owner("bob"))
        tx.put_fact(fact_row())
        tx.put_receipt(receipt("r1"))
        tx.put_fact(msgspec.structs.replace(fact_row(), owner="bob"))
    with store.transaction() as tx:
        assert tx.wipe_owner("alice") == 2
    with store.transaction(write=False) as tx:
        kept = tx.owner("alice")
        assert kept is not None
        assert kept.deleted_at == T0
        assert tx.facts("alice") == []
        assert tx.receipts("alice") == []
        assert len(tx.facts("bob")) == 1


def test_own_migration_track_beside_the_main_store(tmp_path: Path) -> None:
    path = tmp_path / "tether.db"
    main = SqliteStore(path)
    sweep = SqliteSweepStore(path)
    try:
        assert sweep.schema_version() == len(SWEEP_MIGRATIONS)
        main_version = main.schema_version()
    finally:
        sweep.close()
        main.close()
    again = SqliteSweepStore(path)  # reopening migrates nothing
    again.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == main_version
        conn.execute("UPDATE sweep_schema_version SET version = 99")
        conn.commit()
    finally:
        conn.close()
    with pytest.raises(StoreVersionError):
        SqliteSweepStore(path)
