"""A day's model invocation held, stranded and taken over, with real ``tether sweep run``
children against the fake llama-server over HTTP: a run killed between the ``invoked``
mark and the stage leaves the day busy until the mark's lease runs out, then the next run
takes it over and completes it exactly once; a live run is reported ``busy``; ``sweep
status`` names the stuck day and why; ``sweep reconcile`` re-opens only what is safe.
(A sweep worker's marks in PostgreSQL: ``tests/test_sweep_worker_model.py``.)"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from daemon_helpers import spawn, tether
from test_sweep_model import CLUB, DAY, NOW, chat, excerpts, facts, index, page, stage_lines
from tether.core.sweep.windows import window_for
from tether.sweep import stage
from tether.sweep.holder import Holder
from tether.testing.fake_llama import FakeLlama, Reply
from tether.testing.pause import release, wait_reached

pytestmark = pytest.mark.slow
ENV = {"TETHER_TEST_NOW": NOW.isoformat()}
#: ``[llm] timeout_s`` of these homes: a mark is held for 2 x (1 + 2) s.
LEASE_S = 6.0


@pytest.fixture
def day_home(home: Path, fake: FakeLlama) -> Path:
    (home / "tether.toml").write_text(
        f'[llm]\nurl = "{fake.url}"\ntimeout_s = 1\n\n[sweep]\nenabled = true\n'
    )
    chat(home, "club", "We moved the book club to Tuesdays.")
    index(home)
    return home


@pytest.fixture
def procs() -> Iterator[list[Any]]:
    started: list[Any] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.communicate(timeout=10)


def run(home: Path, *extra: str) -> dict[str, Any]:
    out = tether(home, "sweep", "run", "--json", *extra, env=ENV)
    assert out.returncode == 0, out.stderr
    (owner,) = json.loads(out.stdout)["owners"]
    day: dict[str, Any] = next(d for d in owner["days"] if d["local_date"] == DAY.isoformat())
    return day


def stuck(home: Path) -> list[dict[str, Any]]:
    out = tether(home, "sweep", "status", "--json", env=ENV)
    assert out.returncode == 0, out.stderr
    (owner,) = json.loads(out.stdout)["owners"]
    return list(owner["stuck"])


def test_a_run_killed_after_invoked_is_taken_over_once_after_the_lease(
    day_home: Path, fake: FakeLlama
) -> None:
    home = day_home
    fake.script(excerpts(("club", 1, 1)))
    fake.script(page(CLUB))
    killed = tether(home, "sweep", "run", env={**ENV, "TETHER_CRASH_AT": "sweep-after-invoked"})
    assert killed.returncode == -9, killed.stderr
    assert fake.requests == []
    # Status names the day, its holder (dead) and the lease still running.
    (row,) = stuck(home)
    assert row["local_date"] == DAY.isoformat()
    assert (row["why"], row["where"], row["holder_process"]) == ("busy", "files", "gone")
    assert row["holder"].endswith(f":{stage_lines(home)[0]['holder']['pid']}")
    assert 0 < row["lease_left_s"] <= LEASE_S
    text = tether(home, "sweep", "status", env=ENV).stdout
    assert f"stuck {DAY.isoformat()}: busy, held by" in text
    assert "(gone)" in text
    # Within the lease: busy, the model not asked.
    held = run(home)
    assert (held["status"], held["reason"]) == ("busy", "invocation_busy")
    assert fake.requests == []
    time.sleep(row["lease_left_s"] + 0.5)
    (row,) = stuck(home)
    assert row["why"] == "abandoned"
    assert row["lease_left_s"] < 0
    # After it: taken over by one new invocation, applied once.
    day = run(home)
    assert (day["status"], day["reasons"]) == ("complete", {"added": 1})
    assert len(fake.requests) == 2  # phase A and B, once: the killed run sent nothing
    assert [f[0] for f in facts(home)] == ["book-club"]
    lines = stage_lines(home)
    assert [line["state"] for line in lines] == ["invoked", "invoked", "staged"]
    assert lines[0]["invocation"] != lines[1]["invocation"] == lines[2]["invocation"]
    assert stuck(home) == []
    again = tether(home, "sweep", "run", env=ENV)
    assert again.returncode == 0, again.stderr
    assert len(fake.requests) == 2
    assert [f[0] for f in facts(home)] == ["book-club"]


def test_a_live_run_is_reported_busy_and_reconcile_leaves_it(
    day_home: Path, fake: FakeLlama, tmp_path: Path, procs: list[Any]
) -> None:
    home = day_home
    fake.script(excerpts(("club", 1, 1)))
    fake.script(page(CLUB))
    pause = tmp_path / "pause"
    pause.mkdir()
    first = spawn(
        home,
        "sweep",
        "run",
        "--json",
        env={**ENV, "TETHER_PAUSE_AT": "sweep-after-invoked", "TETHER_PAUSE_DIR": str(pause)},
    )
    procs.append(first)
    assert wait_reached(pause, "sweep-after-invoked")
    out = tether(home, "sweep", "run", "--json", env=ENV)
    assert out.returncode == 0, out.stderr
    (owner,) = json.loads(out.stdout)["owners"]
    assert (owner["status"], owner["reason"]) == ("busy", "invocation_busy")
    (row,) = stuck(home)
    assert (row["why"], row["holder_process"]) == ("busy", "alive")
    assert row["holder"].endswith(f":{first.pid}")
    # Reconcile never touches a day a live run holds: left, exit 1.
    rec = tether(home, "sweep", "reconcile", "owner", "--json", env=ENV)
    assert rec.returncode == 1, rec.stderr
    assert json.loads(rec.stdout)["days"] == [
        {"local_date": DAY.isoformat(), "why": "busy", "action": "left"}
    ]
    # Even after its lease ran out, a holder still running here is never taken over.
    time.sleep(LEASE_S + 0.5)
    (row,) = stuck(home)
    assert row["why"] == "stalled"
    stalled = run(home)
    assert (stalled["status"], stalled["reason"]) == ("busy", "invocation_stalled")
    assert fake.requests == []
    release(pause, "sweep-after-invoked")
    got, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    (owner,) = json.loads(got)["owners"]
    assert owner["status"] == "ok"
    assert len(fake.requests) == 2
    assert [f[0] for f in facts(home)] == ["book-club"]
    assert stuck(home) == []


def test_reconcile_reopens_a_failed_day_for_one_new_invocation(
    day_home: Path, fake: FakeLlama
) -> None:
    home = day_home
    fake.script(excerpts())
    fake.script(Reply(content="not a page at all"))
    day = run(home)
    assert (day["status"], day["reason"]) == ("incomplete", "model_output_malformed")
    (row,) = stuck(home)
    assert (row["why"], row["reason"]) == ("failed", "model_output_malformed")
    assert run(home)["reason"] == "model_output_malformed"  # never retried by itself
    assert len(fake.requests) == 2
    rec = tether(home, "sweep", "reconcile", "owner", "--date", DAY.isoformat(), env=ENV)
    assert rec.returncode == 0, rec.stderr
    assert f"{DAY.isoformat()} re-opened (failed)" in rec.stdout
    fake.script(excerpts())
    fake.script(page(CLUB))
    assert run(home)["status"] == "complete"
    assert len(fake.requests) == 4
    assert [f[0] for f in facts(home)] == ["book-club"]
    rec = tether(home, "sweep", "reconcile", "owner", env=ENV)
    assert rec.returncode == 0, rec.stderr
    assert "nothing to reconcile" in rec.stdout


def _mark(home: Path, holder: Holder, lease_until: datetime) -> stage.StageFile:
    """The day marked ``invoked`` by ``holder`` (not this process), as its run left it."""
    w = window_for("UTC", DAY)
    record = stage.StageFile(
        schema=stage.STAGE_SCHEMA,
        state="invoked",
        invocation="first",
        owner="owner",
        local_date=DAY,
        window_id=w.window_id,
        source_generation=1,
        holder=holder,
        since=lease_until - timedelta(seconds=10),
        lease_until=lease_until,
    )
    assert stage.FileStages(home).mark("owner", DAY, stage.encode(record))
    return record


def test_an_abandoned_mark_is_reopened_and_the_late_outcome_refused(
    day_home: Path, fake: FakeLlama
) -> None:
    home = day_home
    dead = Holder(host=socket.gethostname(), pid=2**22 + 7)  # above pid_max: never running
    first = _mark(home, dead, datetime.now(UTC) - timedelta(seconds=1))
    assert tether(home, "owner", "list", env=ENV).returncode == 0  # the default owner made
    (row,) = stuck(home)
    assert (row["why"], row["holder_process"]) == ("abandoned", "gone")
    rec = tether(home, "sweep", "reconcile", "owner", env=ENV)
    assert rec.returncode == 0, rec.stderr
    assert "re-opened (abandoned)" in rec.stdout
    fake.script(excerpts())
    fake.script(page(CLUB))
    assert run(home)["status"] == "complete"
    # The first holder comes back with a page: refused, the day's record is the new one.
    late = msgspec.structs.replace(first, state="failed", reason="model_failed")
    assert not stage.outcome(stage.FileStages(home), late)
    assert [line["state"] for line in stage_lines(home)] == ["invoked", "staged"]
    assert [f[0] for f in facts(home)] == ["book-club"]
    assert len(fake.requests) == 2
