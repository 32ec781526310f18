"""The seam between the main store and the sweep's: what the fact mirror and the memory
scan read and write of the sweep goes through the SweepStore port; the runner comes from
the composition root. Real SQLite, real files."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from search_helpers import words
from sweep_helpers import day_packet, fact, pending_receipt
from tether.config import load_config
from tether.core.sweep.packet import digest, encode_packet
from tether.core.sweep.state import Fact, StagedPacket
from tether.core.sweep.windows import window_for
from tether.daemon.compose import sweep_runner
from tether.errors import StoreVersionError
from tether.memory.facts import sync_facts
from tether.records import TextCell
from tether.stores.sqlite import SqliteStore
from tether.stores.sqlite.file import begun
from tether.stores.sqlite.migrations import migrate
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.sweep import owners

T = datetime(2026, 11, 1, 9, tzinfo=UTC)
D0 = date(2026, 10, 31)
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as c:
        return {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _add_fact(sweep: SqliteSweepStore, text: str) -> None:
    with sweep.transaction() as tx:
        tx.put_fact(
            Fact(
                owner="alice",
                subject="owner",
                entity="home",
                text=text,
                authority="sweep_inference",
                refs="[]",
                origin_receipt=None,
                created_at=T,
                updated_at=T,
            )
        )


def test_a_reader_leaves_a_file_without_sweep_tables_and_sees_them_once_made(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tether.db"
    with SqliteStore(path) as store, SqliteSweepStore(path, migrate=False) as reader:
        assert sync_facts(store, reader) is True  # no sweep tables: nothing, stamped once
        assert sync_facts(store, reader) is False
        assert not any(t.startswith("sweep_") for t in _tables(path))
        with SqliteSweepStore(path) as sweep:  # the sweep runs: its tables are made
            owners.add(sweep, "alice", "UTC", T)
            _add_fact(sweep, f"the owner's token is {GITHUB}")
        assert sync_facts(store, reader) is True
        assert [h.text for h in store.search(words("token"), 5)] == [
            "the owner's token is [REDACTED:github-token]"
        ]
        assert sync_facts(store, reader) is False


def test_fact_rows_are_replaced_only_over_the_stamp_compared(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "tether.db") as store:
        assert store.replace_facts([], stamp="3", expect=None) is True
        # A sync that compared against "2" lost to one that already wrote "3": no write.
        assert store.replace_facts([], stamp="2", expect="2") is False
        assert store.facts_stamp() == "3"


def _stage_cell(sweep: SqliteSweepStore) -> TextCell:
    cells: list[TextCell] = []
    sweep.read_cells(cells.append)
    (cell,) = [c for c in cells if c.kind == "stage"]
    return cell


def test_a_stage_whose_day_starts_after_it_was_read_is_not_rewritten(tmp_path: Path) -> None:
    with SqliteSweepStore(tmp_path / "tether.db") as sweep:
        owners.add(sweep, "alice", "UTC", T)
        o = owners.get(sweep, "alice")
        p = day_packet(o, D0, (fact("ci", text=f"ci uses {GITHUB}"),))
        w = window_for("UTC", D0)
        data = encode_packet(p)
        staged = StagedPacket(
            owner="alice",
            local_date=D0,
            source_generation=1,
            window_id=w.window_id,
            digest=digest(p),
            packet=data,
            created_at=T,
        )
        with sweep.transaction() as tx:
            tx.put_stage(staged)
        cell = _stage_cell(sweep)
        assert not cell.busy
        with sweep.transaction() as tx:  # the sweep claims a candidate of that day
            tx.put_receipt(pending_receipt(D0, digest(p.candidates[0]), claimant="runner", at=T))
        made, _ = sweep.rewrite_cells([(cell, cell.text.replace(GITHUB, "[REDACTED]"))])
        assert made == [False]
        with sweep.transaction(write=False) as tx:
            kept = tx.stage("alice", D0, 1, w.window_id)
        assert kept is not None
        assert kept.packet == data
        assert _stage_cell(sweep).busy


def test_the_runner_from_compose_writes_one_telemetry_line_a_run(home: Path) -> None:
    config = load_config(home)
    with sweep_runner(home, config) as runner:
        assert not runner.open  # the sweep is closed by default
        report = runner.run(T)
    assert report.status == "closed"
    [line] = (home / "telemetry" / "sweep.jsonl").read_text().splitlines()
    assert json.loads(line) == {
        "time": T.isoformat(),
        "status": "closed",
        "reason": "sweep_disabled",
        "totals": {
            "owners": 0,
            "days_complete": 0,
            "candidates": 0,
            "writes": 0,
            "redacted": 0,
        },
        "owners": {},
        "reasons": {},
    }


def test_one_migration_runner_refuses_a_newer_schema_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    conn = sqlite3.connect(path, isolation_level=None)

    @contextlib.contextmanager
    def tx() -> Iterator[sqlite3.Connection]:
        with begun(conn):
            yield conn

    def version(c: sqlite3.Connection) -> int:
        return int(c.execute("PRAGMA user_version").fetchone()[0])

    def set_version(c: sqlite3.Connection, n: int) -> None:
        c.execute(f"PRAGMA user_version = {n}")

    scripts = ("CREATE TABLE a (x);", "CREATE TABLE b (y);")
    set_version(conn, 3)
    with pytest.raises(StoreVersionError):
        migrate(path, tx, scripts, version=version, set_version=set_version)
    assert version(conn) == 3
    set_version(conn, 0)
    migrate(path, tx, scripts, version=version, set_version=set_version)
    migrate(path, tx, scripts, version=version, set_version=set_version)  # nothing twice
    assert version(conn) == 2
    conn.close()
