"""The scheduler inside `tether serve` and the jobs / tiers commands, as a user runs them:
real child processes, the fake llama server over HTTP, a crash point that SIGKILLs the
daemon right after a run is recorded as started."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon_helpers import Daemon, tether
from tether.records import Assistant
from tether.scheduler.ledger import RunLedger
from tether.sessions import Session
from tether.testing.fake_llama import FakeLlama

pytestmark = pytest.mark.slow


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=8192) as f:
        yield f


def _wait_for(check: object, timeout: float = 20) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_heartbeat_every_second_fires_in_the_daemon(short_home: Path, fake: FakeLlama) -> None:
    with (short_home / "tether.toml").open("a") as f:
        f.write("[heartbeat]\nevery_s = 1\n")
    daemon = Daemon(short_home)
    try:

        def beaten() -> bool:
            try:
                records = Session.open(short_home, "heartbeat").records
            except Exception:
                return False
            return any(isinstance(r, Assistant) for r in records)

        _wait_for(beaten)
        out = tether(short_home, "chat", "--session", "mm-owner", "hello")
        assert out.returncode == 0, out.stderr
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert "heartbeat session=heartbeat turn=1 epoch=0 slot=1" in err
    slots = {(r.slot, r.messages[-1]["content"].startswith("It is ")) for r in fake.requests}
    assert (1, True) in slots
    assert (0, False) in slots  # the owner's turn stayed on main
    assert Session.open(short_home, "heartbeat").slot == 1


def test_invalid_job_file_refuses_start_with_one_line(short_home: Path) -> None:
    bad = short_home / "jobs" / "brief.toml"
    bad.write_text('schedule = "0 7 * * *"\nprompt = "Brief."\nchannel = "mm"\n')
    out = tether(short_home, "serve", timeout=30)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert str(bad) in lines[0]
    assert "channel: unknown key" in lines[0]
    assert "(runbook: jobs-invalid)" in lines[0]
    assert not (short_home / "run" / "tether.sock").exists()
    check = tether(short_home, "jobs", "check")
    assert check.returncode == 2
    assert check.stderr.strip() == lines[0]

    bad.write_text('schedule = "0 7 * *"\nprompt = "Brief."\n')
    check = tether(short_home, "jobs", "check")
    assert check.returncode == 2
    assert "schedule: bad schedule '0 7 * *': expected 5 fields" in check.stderr
    bad.unlink()
    (short_home / "jobs" / "Brief_Job.toml").write_text('schedule = "* * * * *"\nprompt = "x"\n')
    check = tether(short_home, "jobs", "check")
    assert check.returncode == 2
    assert "invalid job name 'Brief_Job'" in check.stderr
    assert "Traceback" not in check.stderr


def test_leftover_started_after_a_crash_becomes_failed(short_home: Path) -> None:
    (short_home / "jobs" / "brief.toml").write_text('schedule = "* * * * *"\nprompt = "Brief."\n')
    crashed = tether(short_home, "serve", env={"TETHER_CRASH_AT": "cron-after-started"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    (left,) = RunLedger(short_home).read()
    assert left.status == "started"

    # The killed daemon left its socket; the next start clears it (tested elsewhere), and
    # removing it here lets the helper wait for the new daemon's own socket.
    (short_home / "run" / "tether.sock").unlink()
    daemon = Daemon(short_home)
    code, err = daemon.stop()
    assert code == 0, err
    records = RunLedger(short_home).read()
    assert [(r.session, r.status) for r in records[:2]] == [
        (left.session, "started"),
        (left.session, "failed"),
    ]
    assert f"session={left.session} was left running" in err


def test_jobs_list_and_memory_tiers(short_home: Path) -> None:
    (short_home / "jobs" / "brief.toml").write_text('schedule = "0 7 * * 1-5"\nprompt = "B."\n')
    listed = tether(short_home, "jobs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["name"] == "brief"
    assert row["schedule"] == "0 7 * * 1-5"
    assert row["next_run"].endswith("T07:00:00Z")
    assert row["last_run"] is None
    assert "brief" in tether(short_home, "jobs", "list").stdout
    assert tether(short_home, "jobs", "check").stdout.startswith("ok: 1 job(s)")

    assert tether(short_home, "memory", "note", "ferns on Sundays").returncode == 0
    assert tether(short_home, "memory", "add", "The owner is Sam").returncode == 0
    assert tether(short_home, "memory", "recall", "ferns").returncode == 0
    tiers = tether(short_home, "memory", "tiers", "--json")
    assert tiers.returncode == 0, tiers.stderr
    doc = json.loads(tiers.stdout)
    assert [(n["text"], n["recalls"], n["untrusted"]) for n in doc["notes"]] == [
        ("ferns on Sundays", 1, False)
    ]
    assert doc["notes"][0]["last_found"] is not None
    assert [e["text"] for e in doc["identity"]] == ["The owner is Sam"]
    text = tether(short_home, "memory", "tiers").stdout
    assert "(trusted, written " in text
    assert "recalled 1 time, last " in text
