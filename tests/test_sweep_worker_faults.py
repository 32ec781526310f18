"""A sweep worker under faults, real processes against real PostgreSQL: its connections
terminated mid-run by the server (``pg_terminate_backend``), it goes on and every
owner-day is swept exactly once; SIGTERM mid-run hands its claims (and a model call's
mark) back, so another worker takes them at once rather than after the lease, and it
exits 0."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

import pg_helpers
from daemon_helpers import spawn
from test_sweep_model import CLUB, excerpts, page
from test_sweep_model import NOW as DAY_DONE
from test_sweep_worker import NOW, check_exactly_once, seed
from test_sweep_worker_model import facts, home_day, stage_state, worker
from test_sweep_worker_model import worker_config as model_config
from tether.daemon.fleet import application_name
from tether.testing.fake_llama import FakeLlama, Reply

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
ENV = {"TETHER_TEST_NOW": NOW}


@pytest.fixture
def db(pg_url: str) -> Iterator[str]:
    del pg_url  # the server is there (skipped otherwise)
    with pg_helpers.fresh_database() as url:
        yield url


def test_terminated_connections_never_stop_a_worker_nor_sweep_a_day_twice(db: str) -> None:
    tenant = pg_helpers.new_owner("t")
    seed(db, tenant, 100)
    proc = spawn(None, "sweep", "worker", "--once", "--url", db, "--json", env=ENV)
    name = application_name(proc.pid)
    terminated = 0
    deadline = time.monotonic() + 60
    with psycopg.connect(db, autocommit=True) as watch:
        # Cut the worker's connections in the middle of its transactions (an idle one the
        # pool would just replace unseen), again and again, until it has lost six.
        while terminated < 6 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            row = watch.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = %s AND state IN ('active', 'idle in transaction')",
                (name,),
            ).fetchone()
            assert row is not None
            terminated += int(row[0])
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert terminated >= 3  # the server cut the worker's connections, again and again
    report = json.loads(out)
    assert report["outcomes"] == {"complete": 100}, report
    assert report["errors"] == {}
    # a transaction, a day or a pass that lost its connection ran again
    assert report["retried"] >= 1
    check_exactly_once(db, tenant, 100)


def test_sigterm_mid_run_hands_the_claims_back_at_once(db: str) -> None:
    tenant = pg_helpers.new_owner("s")
    seed(db, tenant, 100)
    first = spawn(None, "sweep", "worker", "--once", "--url", db, "--json", env=ENV)
    with psycopg.connect(db, autocommit=True) as watch:
        done = 0
        while done < 5 and first.poll() is None:  # mid-run: some days swept, most not
            row = watch.execute(
                f'SELECT count(*) FROM "tether_{tenant}".sweep_claim WHERE state = %s',
                ("done",),
            ).fetchone()
            done = int(row[0]) if row else 0
            time.sleep(0.01)
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=30)
    assert first.returncode == 0, err
    assert "Traceback" not in err
    a = json.loads(out)
    assert a["stopped"] is True
    assert 0 < a["outcomes"]["complete"] < 100
    # The default lease is 120 s: a second worker finishes at once only because nothing
    # is still held (a handed-back day is open again, not taken over).
    started = time.monotonic()
    second = worker_once(db)
    assert time.monotonic() - started < 60
    assert second["taken_over"] == 0
    assert second["outcomes"] == {"complete": 100 - a["outcomes"]["complete"]}, (a, second)
    check_exactly_once(db, tenant, 100)


def worker_once(url: str) -> dict[str, object]:
    proc = spawn(None, "sweep", "worker", "--once", "--url", url, "--json", env=ENV)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    report: dict[str, object] = json.loads(out)
    return report


def test_sigterm_during_the_model_call_hands_the_day_and_its_mark_back(
    tmp_path: Path, db: str
) -> None:
    tenant = pg_helpers.new_owner("m")
    with FakeLlama(n_ctx=65536, parallel=2) as fake:
        home_day(tmp_path, db, tenant)
        fake.script(Reply(content=excerpts().content, delay_s=20), slot=1)  # the first's
        fake.script(excerpts(), slot=0)
        fake.script(page(CLUB), slot=0)
        config = model_config(tmp_path, fake, timeout_s=60)
        first = spawn(
            None, "sweep", "worker", "--once", "--url", db, "--config", str(config), "--json",
            env={"TETHER_TEST_NOW": DAY_DONE.isoformat()},
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not any(s["is_processing"] for s in httpx.get(f"{fake.url}/slots").json()):
            assert time.monotonic() < deadline
            assert first.poll() is None
            time.sleep(0.02)
        assert stage_state(db, tenant) == ["invoked"]
        first.send_signal(signal.SIGTERM)  # in the middle of phase A
        out, err = first.communicate(timeout=12)  # not after the call's 20 s, nor its 60
        assert first.returncode == 0, err
        a = json.loads(out)
        assert (a["stopped"], a["handed_back"], a["outcomes"]) == (True, 1, {}), a
        assert stage_state(db, tenant) == []  # the mark went with the cancelled call
        # The second worker on the other slot: the fake still serves the cancelled call.
        second = config.with_name("second.toml")
        second.write_text(config.read_text() + "\n[slots]\nmain = 1\nbackground = 0\n")
        got = worker(db, second, DAY_DONE.isoformat())
        assert got.returncode == 0, got.stderr
        b = json.loads(got.stdout)
        assert (b["outcomes"], b["taken_over"]) == ({"complete": 1}, 0), b
        assert facts(db, tenant) == [("book-club", CLUB["text"])]
        assert stage_state(db, tenant) == ["staged"]
