"""`tether owner ...` and `tether sweep ...` as a user runs them: child processes, exit codes."""

from __future__ import annotations

import json
import subprocess
from datetime import date
from pathlib import Path

import pytest

from daemon_helpers import tether
from sweep_helpers import day_packet, fact, write_stage
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.sweep import owners


def run(
    home: Path, *args: str, now: str = "2026-11-01T12:00:00+00:00"
) -> subprocess.CompletedProcess[str]:
    return tether(home, *args, env={"TETHER_TEST_NOW": now})


def test_window_json_shape(home: Path) -> None:
    out = run(home, "sweep", "window", "--tz", "America/New_York", "--date", "2026-03-08", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc) == {"window_id", "start_utc", "end_utc", "hours"}
    assert (doc["start_utc"], doc["end_utc"], doc["hours"]) == (
        "2026-03-08T05:00:00Z",
        "2026-03-09T04:00:00Z",
        23.0,
    )
    fall = run(
        home, "sweep", "window", "--tz", "America/New_York", "--date", "2026-11-01", "--json"
    )
    assert json.loads(fall.stdout)["hours"] == 25.0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("sweep", "window", "--tz", "Mars/Base", "--date", "2026-01-01"), "unknown time zone"),
        (("sweep", "window", "--tz", "UTC", "--date", "2026-02-30"), "invalid date"),
        (("owner", "add", "Bad Id", "--tz", "UTC"), "invalid owner id"),
        (("owner", "add", "bob", "--tz", "Nowhere/City"), "unknown time zone"),
        (("owner", "set-tz", "ghost", "UTC"), "no owner 'ghost'"),
        (("owner", "delete", "ghost"), "no owner 'ghost'"),
        (("sweep", "run", "--date", "yesterday"), "invalid date"),
        (("sweep", "reconcile", "ghost"), "no owner 'ghost'"),
        (("sweep", "facts", "ghost"), "no owner 'ghost'"),
        (("sweep", "journal", "Bad Id"), "invalid owner id"),
        # A command line click cannot parse is one line too, saying where the help is.
        (("sweep", "journal", "owner", "-n", "0"), "see 'tether sweep journal --help'"),
        (("sweep", "bogus"), "No such command 'bogus'"),
        (("memory", "recall"), "Missing argument 'QUERY'"),
        (("--hmoe", "x"), "No such option '--hmoe'"),
    ],
)
def test_bad_input_exits_2_with_one_line(home: Path, args: tuple[str, ...], needle: str) -> None:
    out = run(home, *args)
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


def test_owner_commands(home: Path) -> None:
    listed = json.loads(run(home, "owner", "list", "--json").stdout)
    assert [o["id"] for o in listed] == ["owner"]  # the home's default owner
    assert run(home, "owner", "add", "alice", "--tz", "Europe/Paris").returncode == 0
    again = run(home, "owner", "add", "alice", "--tz", "UTC")
    assert again.returncode == 2
    assert "already exists" in again.stderr
    assert run(home, "owner", "set-tz", "alice", "Asia/Tokyo").returncode == 0
    assert run(home, "owner", "delete", "alice").returncode == 0
    rows = {o["id"]: o for o in json.loads(run(home, "owner", "list", "--json").stdout)}
    assert rows["alice"]["deleted"]
    assert rows["alice"]["timezone"] == "Asia/Tokyo"
    assert rows["alice"]["account_generation"] == 2
    reuse = run(home, "owner", "add", "alice", "--tz", "UTC")
    assert reuse.returncode == 2
    assert "never reused" in reuse.stderr


def test_sweep_closed_by_default_writes_nothing(home: Path) -> None:
    out = run(home, "sweep", "run", "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout)["status"] == "closed"
    status = json.loads(run(home, "sweep", "status", "--json").stdout)
    assert status["open"] is False
    assert status["owners"] == []


def _enable(home: Path, extra: str = "") -> None:
    toml = home / "tether.toml"
    toml.write_text(toml.read_text().replace("enabled = false", "enabled = true", 1) + extra)


def test_run_status_zone_change_and_reconcile(home: Path) -> None:
    _enable(home)
    assert (
        run(
            home, "owner", "add", "alice", "--tz", "Europe/Paris", now="2026-11-01T08:00:00+00:00"
        ).returncode
        == 0
    )
    store = SqliteSweepStore(home / "tether.db")
    try:
        o = owners.get(store, "alice")
    finally:
        store.close()
    write_stage(home, day_packet(o, date(2026, 10, 31), (fact("home", text="secret words"),)))
    out = run(home, "sweep", "run", "--owner", "alice")
    assert out.returncode == 0, out.stderr
    assert "alice: ok" in out.stdout
    assert "secret" not in out.stdout
    status = json.loads(run(home, "sweep", "status", "--json").stdout)
    alice = next(o for o in status["owners"] if o["id"] == "alice")
    assert alice["cursor"]["local_date"] == "2026-10-31"
    assert alice["facts"] == 1

    # What the sweep wrote, and why: the fact, and its journal row with the provenance.
    [held] = json.loads(run(home, "sweep", "facts", "alice", "--json").stdout)
    assert (held["subject"], held["entity"], held["text"]) == ("owner", "home", "secret words")
    assert held["active"] is True
    assert held["origin_receipt"]
    assert held["refs"] == []
    [write] = json.loads(run(home, "sweep", "journal", "alice", "--json").stdout)
    assert (write["who"], write["action"], write["target"]) == (
        "sweep",
        "fact_add",
        "fact:owner/home",
    )
    assert (write["before"], write["after"]) == (None, "secret words")
    assert write["receipt_id"] == held["origin_receipt"]
    assert write["evidence"]["local_date"] == "2026-10-31"
    assert write["evidence"]["source_key"] == "s1"
    shown = run(home, "sweep", "facts", "alice")
    assert "owner/home" in shown.stdout
    assert "secret words" in shown.stdout
    journal = run(home, "sweep", "journal", "alice", "-n", "1")
    assert journal.returncode == 0
    assert "fact_add fact:owner/home" in journal.stdout
    assert '"local_date":"2026-10-31"' in journal.stdout
    empty = run(home, "sweep", "facts", "owner")
    assert (empty.returncode, empty.stdout) == (0, "owner owner: no facts\n")
    assert run(home, "sweep", "journal", "owner").stdout == "owner owner: no sweep writes\n"
    assert run(home, "owner", "set-tz", "alice", "America/New_York").returncode == 0
    blocked = run(home, "sweep", "run", "--owner", "alice", now="2026-11-03T12:00:00+00:00")
    assert blocked.returncode == 1
    assert "timezone_changed_requires_reconciliation" in blocked.stdout
    assert "runbook: timezone-changed-requires-reconciliation" in blocked.stdout
    fixed = run(home, "sweep", "reconcile", "alice")
    assert fixed.returncode == 0
    assert "receipt namespace 2" in fixed.stdout
    telemetry = (home / "telemetry" / "sweep.jsonl").read_text()
    assert "secret" not in telemetry
    assert telemetry.count("\n") == 2


def test_kill_switch_overrides_enabled(home: Path) -> None:
    toml = home / "tether.toml"
    text = toml.read_text().replace("enabled = false", "enabled = true", 1)
    toml.write_text(text.replace("kill_switch = false", "kill_switch = true", 1))
    out = run(home, "sweep", "run", "--json")
    assert json.loads(out.stdout)["status"] == "killed"
    assert (
        not (home / "tether.db").exists()
        or json.loads(run(home, "sweep", "status", "--json").stdout)["owners"] == []
    )


def test_run_reports_redactions_and_a_broken_allow_file_stops_it(home: Path) -> None:
    _enable(home)
    added = run(home, "owner", "add", "alice", "--tz", "UTC", now="2026-11-01T08:00:00+00:00")
    assert added.returncode == 0, added.stderr
    store = SqliteSweepStore(home / "tether.db")
    try:
        o = owners.get(store, "alice")
    finally:
        store.close()
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"
    write_stage(home, day_packet(o, date(2026, 10, 31), (fact("ci", text=f"ci uses {token}"),)))
    (home / ".tether-scan-allow").write_text("not-a-fingerprint\n")
    broken = run(home, "sweep", "run", "--owner", "alice")
    assert broken.returncode == 2
    assert ".tether-scan-allow:1: expected a 64-hex-digit" in broken.stderr
    assert "Traceback" not in broken.stderr
    assert json.loads(run(home, "sweep", "status", "--json").stdout)["owners"][0]["cursor"] is None
    (home / ".tether-scan-allow").write_text("# reviewed\n")
    out = run(home, "sweep", "run", "--owner", "alice")
    assert out.returncode == 0, out.stderr
    assert "1 days complete, 1 candidates, 1 writes, 1 secrets redacted" in out.stdout
    [held] = json.loads(run(home, "sweep", "facts", "alice", "--json").stdout)
    assert held["text"] == "ci uses [REDACTED:github-token]"
