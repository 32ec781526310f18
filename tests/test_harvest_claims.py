"""Harvest claims judged by their holder, not their age: a harvest killed with SIGKILL
holding its claim is taken over at once by the next one (here a restarted daemon's
maintenance pass), which resumes after the chunks done, so each fact lands once; a pid
the kernel gave to another process is not the holder; a claim from another machine is
still judged by age."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from checkpoint_helpers import TETHER_SESSION, Transcript, segments
from daemon_helpers import Daemon, daemon_home, tether
from test_harvest import facts, memory, page, wait_for
from tether.checkpoint.claims import CLAIM_STALE_S, claim, me
from tether.checkpoint.manifest import read_receipt
from tether.testing.fake_llama import FakeLlama, Reply


def test_a_harvest_killed_holding_its_claim_is_taken_over_at_once(
    fake: FakeLlama, tmp_path: Path
) -> None:
    with daemon_home(fake.url) as home:
        t = Transcript(tmp_path / "t.jsonl")
        t.user("We deploy to Frankfurt. " + "context words " * 1500)  # chunk one
        t.user("The ledger runs on PostgreSQL 16. " + "more words " * 1500)  # chunk two
        fake.script(page(memory("Deploys go to Frankfurt", "deploy-region")))
        run = tether(
            home,
            "transcripts",
            "ingest",
            str(t.path),
            "--facts",
            env={"TETHER_CRASH_AT": "harvest-after-chunk"},
        )
        assert run.returncode == -9  # killed after its first chunk, holding the claim
        [seg] = segments(home)
        claim_file = home / "corpus" / "receipts" / seg.name.replace(".txt", ".claim")
        assert claim_file.exists()
        assert [f.entity for f in facts(home)] == ["deploy-region"]
        fake.script(page(memory("The ledger runs on PostgreSQL 16", "ledger-db")))
        started = time.monotonic()
        daemon = Daemon(home)
        try:
            wait_for(lambda: read_receipt(home, seg.name) is not None, timeout=60)
        finally:
            daemon.stop()
        assert time.monotonic() - started < CLAIM_STALE_S / 5  # not the 5-minute stall
        receipt = read_receipt(home, seg.name)
        assert receipt is not None
        assert receipt.lane == "maintenance"
        assert (receipt.inserted, receipt.duplicate) == (2, 0)  # chunk one not asked again
        assert sorted(f.entity for f in facts(home)) == ["deploy-region", "ledger-db"]
        assert len(fake.requests) == 2
        assert not claim_file.exists()
        assert TETHER_SESSION in seg.name


def test_a_harvest_killed_mid_request_is_taken_over_at_once(
    fake: FakeLlama, tmp_path: Path
) -> None:
    with daemon_home(fake.url) as home:
        t = Transcript(tmp_path / "t.jsonl")
        t.user("We deploy to Frankfurt, eu-central-1.")
        fake.script(Reply(content=json.dumps({"memories": []}), delay_s=4))
        argv = [sys.executable, "-m", "tether.cli.main", "--home", str(home)]
        child = subprocess.Popen(
            [*argv, "transcripts", "ingest", str(t.path), "--facts"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        receipts = home / "corpus" / "receipts"
        wait_for(lambda: list(receipts.glob("*.claim")))
        time.sleep(0.5)  # into the model call (held 4 s by the fake)
        child.send_signal(signal.SIGKILL)  # in the model call, holding the claim
        assert child.wait(timeout=30) == -9
        [seg] = segments(home)
        fake.reset()
        fake.script(page(memory("Deploys go to Frankfurt", "deploy-region")))
        started = time.monotonic()
        daemon = Daemon(home)
        try:
            wait_for(lambda: read_receipt(home, seg.name) is not None, timeout=60)
        finally:
            daemon.stop()
        assert time.monotonic() - started < CLAIM_STALE_S / 5
        assert [f.entity for f in facts(home)] == ["deploy-region"]
        assert list(receipts.glob("*.claim")) == []


def plant(path: Path, **holder: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(holder))


def test_a_live_holder_keeps_its_claim_and_a_reused_pid_does_not(tmp_path: Path) -> None:
    path = tmp_path / "receipts" / "s.seg-x.claim"
    mine = me()
    assert mine.start is not None
    plant(path, pid=mine.pid, start=mine.start, boot=mine.boot, host=mine.host)
    with claim(path) as held:
        assert held is None  # alive: this very process holds it
    assert json.loads(path.read_text())["start"] == mine.start
    # the same pid, started at another time: another process got the pid; take over
    plant(path, pid=mine.pid, start=mine.start - 1, boot=mine.boot, host=mine.host)
    with claim(path) as held:
        assert held == path
        assert json.loads(path.read_text())["start"] == mine.start
    assert not path.exists()  # released by its holder


def test_a_claim_from_another_machine_is_judged_by_its_age(tmp_path: Path) -> None:
    path = tmp_path / "receipts" / "s.seg-x.claim"
    plant(path, pid=1, start=1, boot="other", host=socket.gethostname() + "-elsewhere")
    with claim(path) as held:
        assert held is None
    old = time.time() - CLAIM_STALE_S - 1
    os.utime(path, (old, old))
    with claim(path) as held:
        assert held == path
