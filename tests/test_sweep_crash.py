"""Crash and race tests: real `tether` child processes, SIGKILLed at named crash points or
held at named pause points while another process (or the test) writes. Each ends with no
duplicate fact, journal entry or receipt, and nothing recreated after a wipe. Every test
runs on both backends: the home's SQLite file, and PostgreSQL (an owner schema of its own
in the run's database) where ``TETHER_TEST_POSTGRES`` is set."""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

import daemon_helpers as child
import pg_helpers
from sweep_helpers import day_packet, fact, snapshot, write_stage
from tether.config import load_config
from tether.home import init_home
from tether.ports import SweepStore
from tether.stores import open_sweep_store
from tether.sweep import owners
from tether.testing.pause import release, wait_reached

pytestmark = pytest.mark.slow

D0, D1 = date(2026, 10, 31), date(2026, 11, 1)
DAY1 = "2026-11-01T12:00:00+00:00"  # D0 is complete, D1 is today
DAY2 = "2026-11-02T12:00:00+00:00"  # the wall clock moved to the next day


def tether(
    home: Path, *args: str, now: str = DAY1, **extra: str
) -> subprocess.CompletedProcess[str]:
    return child.tether(home, *args, env={"TETHER_TEST_NOW": now, **extra})


def spawn(home: Path, *args: str, now: str = DAY1, **extra: str) -> subprocess.Popen[str]:
    return child.spawn(home, *args, env={"TETHER_TEST_NOW": now, **extra})


@pytest.fixture
def home(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> Path:
    h = tmp_path / "home"
    init_home(h)
    toml = h / "tether.toml"
    text = toml.read_text().replace("enabled = false", "enabled = true", 1)
    if backend == "postgres":
        url = request.getfixturevalue("pg_url")
        text = text.replace('url = ""', f'url = "{url}"\nowner = "{pg_helpers.new_owner("crash")}"')
    toml.write_text(text)
    if backend == "postgres":
        migrated = tether(h, "store", "migrate")
        assert migrated.returncode == 0, migrated.stderr
        assert "store: postgresql" in migrated.stdout
        assert load_config(h).store.postgres
    out = tether(
        h, "owner", "add", "alice", "--tz", "Europe/Paris", now="2026-11-01T08:00:00+00:00"
    )
    assert out.returncode == 0, out.stderr
    return h


@pytest.fixture
def pause_dir(tmp_path: Path) -> Path:
    d = tmp_path / "pause"
    d.mkdir()
    return d


def sweep_store(home: Path) -> SweepStore:
    """The home's sweep store, on whichever backend its tether.toml names."""
    return open_sweep_store(home, load_config(home))


def state(home: Path) -> dict[str, Any]:
    store = sweep_store(home)
    try:
        return snapshot(store, "alice")
    finally:
        store.close()


def stage(home: Path, day: date, *cands: Any) -> None:
    store = sweep_store(home)
    try:
        o = owners.get(store, "alice")
    finally:
        store.close()
    sources = tuple(sorted({c.source_key for c in cands})) or ("s1",)
    write_stage(home, day_packet(o, day, cands, sources))


def assert_no_duplicates(s: dict[str, Any]) -> None:
    slots = Counter((f.subject, f.entity) for f in s["facts"] if f.active)
    assert all(n == 1 for n in slots.values()), slots
    journal = Counter(j.receipt_id for j in s["journal"])
    assert all(n == 1 for n in journal.values()), journal
    assert len({r.id for r in s["receipts"]}) == len(s["receipts"])


def assert_wiped(s: dict[str, Any]) -> None:
    assert s["owner"].deleted_at is not None
    assert s["facts"] == s["journal"] == s["receipts"] == []
    assert s["cursor"] is None


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.communicate(timeout=10)


def test_crash_after_apply_then_next_day_takeover(home: Path) -> None:
    stage(home, D0, fact("home"), fact("job"), fact("pet"))
    out = tether(home, "sweep", "run", TETHER_CRASH_AT="sweep-after-apply")
    assert out.returncode == -9, out.stderr
    s = state(home)
    assert [f.entity for f in s["facts"]] == ["home"]
    assert len(s["journal"]) == 1
    assert [r.state for r in s["receipts"]] == ["pending"]
    assert s["cursor"] is None
    # Same day, the dead runner's lease is still live: nobody steals it.
    busy = tether(home, "sweep", "run", "--json", now="2026-11-01T12:00:30+00:00")
    assert busy.returncode == 0, busy.stderr
    assert '"status":"busy"' in busy.stdout
    # Next day: the expired claim is taken over; apply is idempotent.
    stage(home, D1, fact("home"), fact("car"))  # "home" again, the same words: skipped
    again = tether(home, "sweep", "run", "--json", now=DAY2)
    assert again.returncode == 0, again.stderr
    assert '"applied_earlier":1' in again.stdout
    s = state(home)
    assert_no_duplicates(s)
    assert sorted(f.entity for f in s["facts"]) == ["car", "home", "job", "pet"]
    assert len(s["journal"]) == 4
    assert all(r.state == "committed" for r in s["receipts"])
    assert len(s["receipts"]) == 3 + 1 + 2 + 1  # candidates + source receipts, each once
    first = s["receipts"][0]
    assert first.attempts == 2
    assert first.outcome == "applied_earlier"
    assert s["cursor"].local_date == D1
    assert "home by" not in again.stdout
    assert "home" not in again.stdout


def test_a_secret_in_a_fact_survives_a_crash_redacted_and_once(home: Path) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"
    stage(home, D0, fact("deploy", text=f"deploy token {token}"), fact("pet"))
    out = tether(home, "sweep", "run", TETHER_CRASH_AT="sweep-after-apply")
    assert out.returncode == -9, out.stderr
    stage(home, D1, fact("car"))
    again = tether(home, "sweep", "run", "--json", now=DAY2)
    assert again.returncode == 0, again.stderr
    assert '"applied_earlier":1' in again.stdout
    s = state(home)
    assert_no_duplicates(s)
    assert [f.text for f in s["facts"] if f.entity == "deploy"] == [
        "deploy token [REDACTED:github-token]"
    ]
    assert all(r.state == "committed" for r in s["receipts"])
    # Only the backend's own staging file holds the token: no byte of tether's files
    # (the database, its WAL, telemetry) does.
    staging = home / "sweep" / "staging"
    kept = [p for p in home.rglob("*") if p.is_file() and staging not in p.parents]
    if load_config(home).store.postgres:
        assert token not in repr(s)  # nor the facts, journal or receipts on the server
    else:
        assert any(p.name.startswith("tether.db") for p in kept)
    assert not [p for p in kept if token.encode() in p.read_bytes()]


def test_apply_racing_owner_deletion(
    home: Path, pause_dir: Path, procs: list[subprocess.Popen[str]]
) -> None:
    stage(home, D0, fact("home"), fact("job"))
    runner = spawn(
        home,
        "sweep",
        "run",
        "--json",
        TETHER_PAUSE_AT="sweep-after-claim",
        TETHER_PAUSE_DIR=str(pause_dir),
    )
    procs.append(runner)
    assert wait_reached(pause_dir, "sweep-after-claim")
    deleted = tether(home, "owner", "delete", "alice")
    assert deleted.returncode == 0, deleted.stderr
    release(pause_dir, "sweep-after-claim")
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 1, err
    assert '"reason":"owner_deleted"' in out
    assert_wiped(state(home))
    retry = tether(home, "sweep", "run", "--json", now=DAY2)
    assert retry.returncode == 0, retry.stderr
    assert_wiped(state(home))


def test_deletion_marker_during_receipt_completion_then_wipe_and_retry(
    home: Path, pause_dir: Path, procs: list[subprocess.Popen[str]]
) -> None:
    stage(home, D0, fact("home"))
    runner = spawn(
        home,
        "sweep",
        "run",
        "--json",
        TETHER_PAUSE_AT="sweep-before-complete",
        TETHER_PAUSE_DIR=str(pause_dir),
    )
    procs.append(runner)
    assert wait_reached(pause_dir, "sweep-before-complete")
    # The deletion sets its marker and dies before wiping.
    marker = tether(home, "owner", "delete", "alice", TETHER_CRASH_AT="owner-delete-after-marker")
    assert marker.returncode == -9
    release(pause_dir, "sweep-before-complete")
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 1, err
    assert '"reason":"owner_deleted"' in out
    s = state(home)
    assert [r.state for r in s["receipts"]] == ["pending"]  # completion failed closed
    assert s["cursor"] is None
    assert tether(home, "owner", "delete", "alice").returncode == 0  # finishes the wipe
    assert_wiped(state(home))
    for now in (DAY1, DAY2):
        retry = tether(home, "sweep", "run", "--owner", "alice", "--json", now=now)
        assert '"reason":"owner_deleted"' in retry.stdout
    assert_wiped(state(home))


def test_source_generation_rollover_under_contention(
    home: Path, pause_dir: Path, procs: list[subprocess.Popen[str]]
) -> None:
    stage(home, D0, fact("home"))
    assert tether(home, "sweep", "run").returncode == 0
    anchor = state(home)["cursor"]
    stage(home, D1, fact("job"))
    runner = spawn(
        home,
        "sweep",
        "run",
        "--json",
        now=DAY2,
        TETHER_PAUSE_AT="sweep-before-complete",
        TETHER_PAUSE_DIR=str(pause_dir),
    )
    procs.append(runner)
    assert wait_reached(pause_dir, "sweep-before-complete")
    store = sweep_store(home)
    try:
        assert owners.roll_source_generation(store, "alice", 1) == 2
    finally:
        store.close()
    release(pause_dir, "sweep-before-complete")
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 1, err
    assert '"reason":"source_generation_changed"' in out
    s = state(home)
    assert s["cursor"] == anchor  # the completed day's exact window identity is kept
    stale = tether(home, "sweep", "run", "--json", now=DAY2)
    assert '"reason":"stale_generation"' in stale.stdout
    stage(home, D1, fact("job"))  # re-produced under generation 2
    ok = tether(home, "sweep", "run", "--json", now=DAY2)
    assert ok.returncode == 0, ok.stderr
    assert '"equal_authority":1' in ok.stdout
    s = state(home)
    assert_no_duplicates(s)
    assert sorted(f.entity for f in s["facts"]) == ["home", "job"]
    assert len(s["journal"]) == 2
    assert s["cursor"].local_date == D1
    gen2 = [r for r in s["receipts"] if r.source_generation == 2]
    assert gen2
    assert all(r.state == "committed" for r in gen2)


def test_two_overlapping_runners(
    home: Path, pause_dir: Path, procs: list[subprocess.Popen[str]]
) -> None:
    stage(home, D0, fact("home"), fact("job"))
    stage(home, D1, fact("home", "direct_user_statement"), fact("pet"))
    a = spawn(
        home,
        "sweep",
        "run",
        "--json",
        now=DAY2,
        TETHER_PAUSE_AT="sweep-after-claim",
        TETHER_PAUSE_DIR=str(pause_dir),
    )
    procs.append(a)
    assert wait_reached(pause_dir, "sweep-after-claim")
    b = tether(home, "sweep", "run", "--json", now=DAY2)
    assert b.returncode == 0, b.stderr
    assert '"status":"busy"' in b.stdout  # A's live claim is not stolen
    release(pause_dir, "sweep-after-claim")
    _out, err = a.communicate(timeout=60)
    assert a.returncode == 0, err
    # And two runners started together on a fresh backlog.
    both = [
        spawn(home, "sweep", "run", "--json", now=f"2026-11-0{d}T12:00:00+00:00") for d in (2, 2)
    ]
    procs.extend(both)
    for p in both:
        p.communicate(timeout=60)
        assert p.returncode == 0
    s = state(home)
    assert_no_duplicates(s)
    assert sorted(f.entity for f in s["facts"]) == ["home", "job", "pet"]
    assert [f.authority for f in s["facts"] if f.entity == "home"] == ["direct_user_statement"]
    assert len(s["journal"]) == 4  # add home, add job, amend home, add pet
    assert all(r.state == "committed" for r in s["receipts"])
    assert s["cursor"].local_date == D1
