"""What tether keeps bounded as it runs for months: the run ledger (``[jobs] keep_runs``)
and the tiering listing (``[memory] tiers_notes``). Real files, real SQLite, the
scheduler as the daemon wires it on the fake llama server and a clock the test moves."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from daemon_helpers import ScheduledRuntime, tether
from tether.core.timing.scheduling import last_records, last_started, open_runs
from tether.memory.indexer import index_home
from tether.memory.recall import recall
from tether.scheduler.ledger import MIN_SLACK, RunLedger
from tether.testing.clock import StepClock
from tether.testing.fake_llama import FakeLlama

pytestmark = pytest.mark.anyio
KEEP = 4
TIERS = 3


@pytest.fixture
def clock() -> StepClock:
    return StepClock(step=timedelta(0))


@pytest.fixture
async def daemons(home: Path, fake: FakeLlama) -> AsyncIterator[list[ScheduledRuntime]]:
    (home / "tether.toml").write_text(
        f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n[jobs]\nkeep_runs = {KEEP}\n'
        f"[memory]\ntiers_notes = {TIERS}\n"
    )
    made: list[ScheduledRuntime] = []
    yield made
    for d in made:
        await d.close()


def write_job(home: Path, name: str, schedule: str) -> None:
    (home / "jobs" / f"{name}.toml").write_text(f'schedule = "{schedule}"\nprompt = "Go."\n')


def ledger_lines(home: Path) -> int:
    return (home / "jobs" / "runs.jsonl").read_bytes().count(b"\n")


async def test_the_run_ledger_stays_bounded_and_cron_still_runs_each_minute_once(
    home: Path, fake: FakeLlama, clock: StepClock, daemons: list[ScheduledRuntime]
) -> None:
    # Months of an every-minute job before this daemon, and one run a dead daemon left open.
    old = clock.now() - timedelta(days=30)
    writer = RunLedger(home, keep=KEEP)
    writer.append(old, "brief", "job-brief-t1", "started")  # never ended
    for i in range(2, 200):
        at = old + timedelta(minutes=i)
        writer.append(at, "brief", f"job-brief-t{i}", "started")
        writer.append(at, "brief", f"job-brief-t{i}", "finished")
    assert ledger_lines(home) <= 2 * KEEP + MIN_SLACK + 2
    assert [r.session for r in open_runs(writer.read())] == ["job-brief-t1"]

    write_job(home, "brief", "* * * * *")
    write_job(home, "weekly", "0 9 * * 0")  # due now, Sunday 09:00, then not for a week
    first = ScheduledRuntime(home, clock)
    daemons.append(first)
    # The dead daemon's run survived every pruning, so this start closed it.
    closed = [r for r in first.scheduler.ledger.read() if r.session == "job-brief-t1"]
    assert [r.status for r in closed] == ["started", "failed"]

    started = first.scheduler.tick().cron
    assert sorted(e.name for e in started) == ["brief", "weekly"]
    await first.scheduler.idle()
    weekly = next(e.session for e in started if e.name == "weekly")
    for _ in range(40):  # forty more minutes of brief
        clock.advance(timedelta(minutes=1))
        assert [e.name for e in first.scheduler.tick().cron] == ["brief"]
        await first.scheduler.idle()
        assert ledger_lines(home) <= 2 * KEEP + MIN_SLACK + 4

    records = RunLedger(home).read()
    # The weekly run is far older than the newest KEEP runs, and still its job's last run
    # (``jobs list``) and last start (what a restart compares with).
    last = last_records(records)
    assert (last["weekly"].session, last["weekly"].status) == (weekly, "finished")
    assert last_started(records)["weekly"] == clock.now() - timedelta(minutes=40)
    assert open_runs(records) == []
    requests = len(fake.requests)

    # A daemon restarted inside the minute that brief just ran does not run it again...
    await first.close()
    daemons.remove(first)
    clock.advance(timedelta(seconds=30))
    second = ScheduledRuntime(home, clock)
    daemons.append(second)
    assert second.scheduler.tick().cron == ()
    await second.scheduler.idle()
    assert len(fake.requests) == requests
    # ...and at the next minute it runs brief once, and weekly not at all.
    clock.advance(timedelta(seconds=30))
    assert [e.name for e in second.scheduler.tick().cron] == ["brief"]
    await second.scheduler.idle()
    assert len(fake.requests) == requests + 1
    assert ledger_lines(home) <= 2 * KEEP + MIN_SLACK + 4


def test_a_pruning_that_replaced_the_file_does_not_lose_an_append(home: Path) -> None:
    """Two ledgers on one file (the daemon's and one a test or a tool opened): each
    append lands in the file the path names, however often the other rewrote it."""
    a = RunLedger(home, keep=2)
    b = RunLedger(home, keep=2)
    clock = StepClock(step=timedelta(0))
    for i in range(100):
        at = clock.now() + timedelta(minutes=i)
        (a if i % 2 else b).append(at, "brief", f"job-brief-t{i}", "started")
        (b if i % 3 else a).append(at, "brief", f"job-brief-t{i}", "finished")
    records = a.read()
    assert open_runs(records) == []
    assert records[-1].session == "job-brief-t99"
    assert len(records) <= 2 * 2 + MIN_SLACK + 2


async def test_the_tier_listing_is_capped_for_the_job_and_the_command(
    home: Path, fake: FakeLlama, clock: StepClock, daemons: list[ScheduledRuntime]
) -> None:
    write_job(home, "tier", "* * * * *")
    d = ScheduledRuntime(home, clock)
    daemons.append(d)
    store = d.runtime.store
    for i in range(10):
        text = "The owner waters the ferns on Sundays" if i == 3 else f"Plain note {i}"
        store.add_note(text, untrusted=False, session=None, time=clock.now())
    index_home(home, store)
    recall(store, "ferns sundays", 5, time=clock.now())
    d.scheduler.tick()
    await d.scheduler.idle()

    listing = fake.requests[0].messages[-1]["content"]
    noted = [x for x in listing.splitlines() if x.startswith("- note ")]
    assert len(noted) == TIERS
    assert any("ferns" in x for x in noted)  # the recalled one is among them
    assert f"Notes ({TIERS} of 10, the most recalled):" in listing
    assert "(7 more notes not listed" in listing

    # The owner's command caps the same way, says so, and lists all on request.
    shown = tether(home, "memory", "tiers")
    assert shown.returncode == 0, shown.stderr
    assert "(7 more notes not listed" in shown.stdout
    assert "`tether memory tiers --all` lists every note" in shown.stdout
    every = tether(home, "memory", "tiers", "--all", "--json")
    doc = json.loads(every.stdout)
    assert (len(doc["notes"]), doc["more_notes"]) == (10, 0)
    five = json.loads(tether(home, "memory", "tiers", "-n", "5", "--json").stdout)
    assert (len(five["notes"]), five["more_notes"]) == (5, 5)
    assert [n["id"] for n in five["notes"]] == sorted(n["id"] for n in five["notes"])
