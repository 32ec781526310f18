"""`tether memory journal` lists the sweep's journal beside the memory journal, by time,
each entry saying which journal it is from; a real sweep run over a staged day."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from daemon_helpers import tether
from sweep_helpers import day_packet, fact, write_stage
from tether.core.sweep.state import JournalRow
from tether.memory.journals import merged
from tether.records import JournalEntry
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.sweep import owners


def run(home: Path, *args: str, now: datetime | None = None) -> subprocess.CompletedProcess[str]:
    # Only the sweep's commands read TETHER_TEST_NOW; memory writes are stamped by the clock.
    env = {"TETHER_TEST_NOW": now.isoformat()} if now is not None else None
    out = tether(home, *args, env=env)
    assert out.returncode == 0, out.stderr
    return out


def swept_day(home: Path, now: datetime) -> None:
    """Alice's day before, swept at ``now`` (the sweep journals at its run's time)."""
    toml = home / "tether.toml"
    toml.write_text(toml.read_text().replace("enabled = false", "enabled = true", 1))
    added = now - timedelta(hours=1)
    run(home, "owner", "add", "alice", "--tz", "Europe/Paris", now=added)
    store = SqliteSweepStore(home / "tether.db")
    try:
        o = owners.get(store, "alice")
    finally:
        store.close()
    day = added.astimezone(ZoneInfo("Europe/Paris")).date() - timedelta(days=1)
    write_stage(home, day_packet(o, day, (fact("home", text="lives in Lyon"),)))
    out = run(home, "sweep", "run", "--owner", "alice", now=now)
    assert "alice: ok" in out.stdout


def test_the_memory_journal_shows_the_sweeps_writes_in_time_order(home: Path) -> None:
    # Before the sweep has ever run, the memory journal alone (the sweep's tables absent).
    run(home, "memory", "add", "Prefers tea.")
    [only] = json.loads(run(home, "memory", "journal", "--json").stdout)
    assert (only["journal"], only["action"], only["after"]) == ("memory", "add", "Prefers tea.")

    swept_day(home, datetime.now(UTC))  # after the add, before the note
    run(home, "memory", "note", "Ask about the move.")
    listed = json.loads(run(home, "memory", "journal", "--json").stdout)
    assert [(e["journal"], e["who"], e["action"]) for e in listed] == [
        ("memory", "owner", "add"),
        ("sweep", "sweep", "fact_add"),
        ("memory", "owner", "note"),
    ]
    times = [e["time"] for e in listed]
    assert times == sorted(times)
    swept = listed[1]
    # The memory journal's fields are all there (session is null), and the sweep's own.
    assert set(only) - {"journal"} <= set(swept)
    assert swept["session"] is None
    assert (swept["owner"], swept["target"], swept["after"]) == (
        "alice",
        "fact:owner/home",
        "lives in Lyon",
    )
    assert swept["receipt_id"]
    assert swept["evidence"]["local_date"]
    # The memory journal's own entries are as they were, with the new field only.
    assert {k for k in listed[0] if k != "journal"} == {
        "id",
        "time",
        "who",
        "session",
        "action",
        "target",
        "before",
        "after",
    }

    # -n is the newest N of the whole listing.
    last_two = json.loads(run(home, "memory", "journal", "--json", "-n", "2").stdout)
    assert [e["journal"] for e in last_two] == ["sweep", "memory"]
    lines = run(home, "memory", "journal", "-n", "2").stdout.splitlines()
    assert " sweep " in lines[0]
    assert "owner=alice fact_add fact:owner/home" in lines[0]
    assert lines[1] == "    after:  lives in Lyon"
    assert " memory owner note " in lines[2]


stamps = st.lists(
    st.datetimes(
        min_value=datetime(2026, 1, 1), max_value=datetime(2026, 1, 2), timezones=st.just(UTC)
    ),
    max_size=8,
)


@given(stamps, stamps, st.none() | st.integers(min_value=1, max_value=20))
def test_merged_keeps_each_journals_order_and_takes_the_newest(
    mine: list[datetime], swept: list[datetime], limit: int | None
) -> None:
    memory = [
        JournalEntry(t, "owner", None, "add", "identity", None, "x", id=n)
        for n, t in enumerate(sorted(mine))
    ]
    sweep = [
        JournalRow(
            owner="o",
            receipt_id=None,
            time=t,
            who="sweep",
            action="fact_add",
            target="fact:a/b",
            before=None,
            after="y",
            evidence="{}",
            id=n,
        )
        for n, t in enumerate(sorted(swept))
    ]
    whole = merged(memory, sweep)
    assert [x.entry.time for x in whole] == sorted(mine + swept)
    assert [x.entry for x in whole if x.journal == "memory"] == memory
    assert [x.entry for x in whole if x.journal == "sweep"] == sweep
    assert merged(memory, sweep, limit) == (whole if limit is None else whole[-limit:])
