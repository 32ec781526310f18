"""The application (``daemon/app.py``): each resource opened once, closed once; one clock.

Over a real home and its SQLite file; the clock a child command runs at is observed the
way a user sees it, in the journal the command wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon_helpers import child_env, tether
from tether.daemon.app import App, FixedClock
from tether.errors import StoreError

AT = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def test_each_resource_is_opened_once_and_closed_with_the_app(home: Path) -> None:
    with App(home, clock=FixedClock(AT)) as app:
        store = app.store()
        assert app.store() is store
        reader = app.sweep(migrate=False)
        assert app.sweep(migrate=False) is reader
        assert app.vectors() is None  # the test home pins lexical recall
        assert app.now() == AT
        store.add_note("kept", untrusted=False, session=None, time=app.now())
    with pytest.raises(StoreError):  # closed with the app: it answers no more
        store.notes()
    app.close()  # a second close does nothing
    with pytest.raises(RuntimeError, match="closed"):  # nothing would close it
        app.sweep(migrate=True)


def test_a_migrated_sweep_store_serves_readers_too(home: Path) -> None:
    with App(home) as app:
        writer = app.sweep()
        assert app.sweep(migrate=False) is writer


def test_a_failed_open_is_tried_again(home: Path) -> None:
    toml = home / "tether.toml"
    toml.write_text(toml.read_text().replace('url = ""', 'url = "sqlite:///later/memory.db"', 1))
    with App(home) as app:
        with pytest.raises(StoreError, match="cannot open the store"):
            app.store()  # its folder does not exist yet
        (home / "later").mkdir()
        assert app.store().notes() == []
        assert (home / "later" / "memory.db").is_file()


def _journal(home: Path) -> list[dict[str, str]]:
    out = tether(home, "memory", "journal", "--json")
    assert out.returncode == 0, out.stderr
    listed: list[dict[str, str]] = json.loads(out.stdout)
    return listed


@pytest.mark.slow
def test_a_tests_child_runs_at_its_time_and_tether_reads_no_test_clock(home: Path) -> None:
    at = {"TETHER_TEST_NOW": AT.isoformat()}
    added = tether(home, "memory", "add", "Prefers tea.", env=at)  # through tether.testing.cli
    assert added.returncode == 0, added.stderr
    assert [e["time"][:19] for e in _journal(home)] == ["2026-11-01T12:00:00"]

    # The installed entry point ignores the variable: the wall clock stamps the note.
    plain = subprocess.run(
        [sys.executable, "-m", "tether.cli.main", "--home", str(home), "memory", "note", "x"],
        env=child_env(at),
        capture_output=True,
        text=True,
        check=False,
    )
    assert plain.returncode == 0, plain.stderr
    times = [e["time"][:19] for e in _journal(home)]
    assert len(times) == 2
    assert times.count("2026-11-01T12:00:00") == 1  # the note's is the wall clock's


@pytest.mark.slow
def test_a_bad_test_time_is_one_line_and_exit_2(home: Path) -> None:
    out = tether(home, "memory", "show", env={"TETHER_TEST_NOW": "tomorrow"})
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "tether: error: TETHER_TEST_NOW='tomorrow' is not an RFC 3339 time with a zone"
    )


def test_store_info_is_of_the_stores_the_app_holds(home: Path) -> None:
    from tether.stores.sqlite.migrations import MIGRATIONS

    with App(home) as app:
        info = app.store_info()
        assert (info.backend, info.level, info.known) == ("sqlite", len(MIGRATIONS), info.level)
        assert info.sweep_level == info.sweep_known
        store = app.store()  # the one store_info opened, not a second
        assert app.store_info() == info
        assert app.store() is store
    with pytest.raises(StoreError):
        store.notes()


def test_the_full_disk_snapshot_is_opened_once_and_closed_with_the_app(home: Path) -> None:
    with App(home, clock=FixedClock(AT)) as app:
        app.store().add_note("kept", untrusted=False, session=None, time=AT)
    with App(home) as app:
        snapshot = app.snapshot()
        assert app.snapshot() is snapshot
        assert [n.text for n in snapshot.notes()] == ["kept"]
    with pytest.raises(StoreError):
        snapshot.notes()


def test_required_vectors_open_whatever_the_setting_says(home: Path) -> None:
    from tether.llm import embedder

    if not embedder.available():
        pytest.skip("the extra tether[vectors] is not installed")
    with App(home) as app:
        assert app.vectors() is None  # the test home pins lexical recall
        assert not app.vectors_on()
        vectors = app.vectors(required=True)
        assert vectors is not None
        assert app.vectors(required=True) is vectors
        assert app.vectors() is None  # the setting still rules recall
