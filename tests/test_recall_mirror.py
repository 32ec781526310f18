"""Identity entries and sweep facts found by recall, on real SQLite and real files."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import msgspec
import pytest

from conftest import clean
from search_helpers import words
from sweep_helpers import DictProducer, day_packet, fact, utc
from tether.config import SweepConfig
from tether.core.context.memory_block import entry_id
from tether.memory.facts import sync_facts
from tether.memory.identity import MEMORY_FILE, Identity
from tether.memory.indexer import reindex
from tether.memory.recall import recall
from tether.memory.tiers import tiers
from tether.stores.sqlite import SqliteStore
from tether.stores.sqlite.migrations import MIGRATIONS, statements
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.sweep import owners
from tether.sweep.runner import Runner, members

NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
ADDED = utc("2026-11-01T08:00:00+00:00")
D0 = date(2026, 10, 31)


@pytest.fixture
def store(home: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(home / "tether.db")
    yield s
    s.close()


@pytest.fixture
def sweep(home: Path) -> Iterator[SqliteSweepStore]:
    s = SqliteSweepStore(home / "tether.db")
    owners.add(s, "alice", "Europe/Paris", ADDED)
    yield s
    s.close()


def write_memory(home: Path, *entries: str) -> None:
    body = "".join(f"- {e}\n" for e in entries)
    (home / MEMORY_FILE).write_text(f"# Identity\n\nHand written.\n\n{body}", encoding="utf-8")


def test_identity_entry_is_recalled_and_counted_in_tiers(home: Path, store: SqliteStore) -> None:
    write_memory(home, "The owner keeps a saxophone in the attic", "Owner is vegetarian")
    hits = recall(store, "saxophone", 5, time=NOW, home=home)
    eid = entry_id("The owner keeps a saxophone in the attic")
    assert [(h.kind, h.ref, h.tag, h.session, h.turn) for h in hits] == [
        ("identity", f"identity:{eid}", "memory", None, None)
    ]
    assert hits[0].text == "The owner keeps a saxophone in the attic"
    items = {i.id: i for i in tiers(home, store)}
    assert (items[eid].recalls, items[eid].last_found) == (1, NOW)
    assert items[entry_id("Owner is vegetarian")].recalls == 0


def test_a_hand_edit_is_picked_up_by_the_next_recall(home: Path, store: SqliteStore) -> None:
    write_memory(home, "The owner keeps a saxophone in the attic")
    assert [h.kind for h in recall(store, "saxophone", 5, time=NOW, home=home)] == ["identity"]
    write_memory(home, "The owner sold the saxophone and bought a cello")
    hits = recall(store, "attic", 5, time=NOW, home=home)
    assert hits == []
    hits = recall(store, "cello", 5, time=NOW, home=home)
    assert [h.text for h in hits] == ["The owner sold the saxophone and bought a cello"]
    # The old row is gone from the index, not only outranked; the row count is right.
    assert [h.text for h in recall(store, "saxophone", 5, time=NOW, home=home)] == [
        "The owner sold the saxophone and bought a cello"
    ]
    assert store.row_count() == 1


def test_tool_edits_sync_the_index(home: Path, store: SqliteStore) -> None:
    identity = Identity(home, store)
    e = identity.add(clean("Owner rides a recumbent bicycle"), who="owner", session=None, time=NOW)
    assert [h.ref for h in store.search(words("recumbent"), 5)] == [f"identity:{e.id}"]
    identity.remove([e.id], who="owner", session=None, time=NOW)
    assert store.search(words("recumbent"), 5) == []


def test_reindex_keeps_identity_recall_counts(home: Path, store: SqliteStore) -> None:
    write_memory(home, "The owner keeps a saxophone in the attic")
    recall(store, "saxophone", 5, time=NOW, home=home)
    reindex(home, store)
    hits = recall(store, "saxophone", 5, time=NOW, home=home)
    assert [h.kind for h in hits] == ["identity"]
    (item,) = tiers(home, store)
    assert item.recalls == 2


def _run_day(sweep: SqliteSweepStore, *candidates: object) -> None:
    o = owners.get(sweep, "alice")
    producer = DictProducer({D0: day_packet(o, D0, candidates)})
    runner = Runner(
        sweep,
        producer,
        config=SweepConfig(enabled=True),
        cohort=members(["*"]),
        claimant="test-1",
    )
    report = runner.run(utc("2026-11-01T12:00:00+00:00"))
    assert report.owners[0].status == "ok"


def test_sweep_facts_are_recalled_until_deactivated(
    store: SqliteStore, sweep: SqliteSweepStore
) -> None:
    _run_day(sweep, fact("home", "direct_user_statement", "The owner lives in Grenoble"))
    hits = recall(store, "grenoble", 5, time=NOW, sweep=sweep)
    with sweep.transaction(write=False) as tx:
        (f,) = tx.facts("alice")
    assert [(h.kind, h.ref, h.tag, h.session) for h in hits] == [
        ("fact", f"fact:{f.id}", "memory", None)
    ]
    with sweep.transaction() as tx:
        tx.put_fact(msgspec.structs.replace(tx.facts("alice")[0], active=False))
    assert recall(store, "grenoble", 5, time=NOW, sweep=sweep) == []
    assert store.row_count() == 0


GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"


def test_recall_shows_a_hand_written_entry_and_a_fact_redacted(
    home: Path, store: SqliteStore, sweep: SqliteSweepStore
) -> None:
    write_memory(home, f"The build bot token is {GITHUB}")
    _run_day(sweep, fact("ci", "direct_user_statement", f"The owner's CI token is {GITHUB}"))
    hits = recall(store, "token", 5, time=NOW, home=home, sweep=sweep)
    assert sorted(h.text for h in hits) == [
        "The build bot token is [REDACTED:github-token]",
        "The owner's CI token is [REDACTED:github-token]",
    ]
    # memory.md is the owner's file and stays as written; only what recall returns changes.
    assert GITHUB in (home / "memory" / "memory.md").read_text()


def test_sweep_facts_are_gone_after_the_owner_is_wiped(
    store: SqliteStore, sweep: SqliteSweepStore
) -> None:
    _run_day(sweep, fact("home", "direct_user_statement", "The owner lives in Grenoble"))
    assert [h.kind for h in recall(store, "grenoble", 5, time=NOW, sweep=sweep)] == ["fact"]
    owners.delete(sweep, "alice", NOW)
    assert recall(store, "grenoble", 5, time=NOW, sweep=sweep) == []


def old_store(path: Path, version: int, rows: list[tuple[int, int, str, str]]) -> None:
    """A store as tether left it at schema ``version``, holding log ``rows`` (id, turn,
    field, text) of session s1, indexed."""
    conn = sqlite3.connect(path, isolation_level=None)
    for script in MIGRATIONS[:version]:
        for statement in statements(script):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.executemany(
        "INSERT INTO doc (id, kind, session, epoch, turn, field, tainted, time, text)"
        " VALUES (?, 'turn', 's1', 0, ?, ?, 0, 0, ?)",
        rows,
    )
    conn.execute("INSERT INTO doc_fts (rowid, body, aside) SELECT id, body, aside FROM doc")
    conn.execute("UPDATE stat SET value = ? WHERE name = 'doc_rows'", (len(rows),))
    conn.close()


def test_a_version_2_store_upgrades_and_keeps_its_index(tmp_path: Path) -> None:
    path = tmp_path / "tether.db"
    old_store(path, 2, [(7, 1, "user", "the kayak is red")])
    with SqliteStore(path) as store:
        assert store.schema_version() == len(MIGRATIONS) == 9
        assert [(h.session, h.turn) for h in store.search(words("kayak"), 5)] == [("s1", 1)]
        assert store.identity_stamp() is None
        assert sync_facts(store, None) is True  # no sweep tables: nothing, stamped once
        assert sync_facts(store, None) is False


def test_a_version_3_store_segments_its_cjk_rows_on_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "tether.db"
    rows = [
        (1, 1, "user", "我喜欢乌龙茶，每天早上喝一杯。"),
        (2, 1, "assistant", "the kayak is red"),
        (3, 2, "assistant", "東京で友達に会いました"),
    ]
    old_store(path, 3, rows)
    before = sqlite3.connect(path)
    assert before.execute("SELECT rowid FROM doc_fts WHERE doc_fts MATCH '乌龙'").fetchall() == []
    before.close()
    with SqliteStore(path) as store:
        assert store.schema_version() == len(MIGRATIONS) == 9
        assert [h.turn for h in store.search(words("乌龙"), 5)] == [1]
        assert [h.turn for h in store.search(words("東京"), 5)] == [2]  # a reply, re-indexed too
        assert [h.turn for h in store.search(words("kayak"), 5)] == [1]
    check = sqlite3.connect(path)
    check.execute("INSERT INTO doc_fts (doc_fts) VALUES ('integrity-check')")
    check.close()
