"""A sweep worker with only the store's URL and a model endpoint: days whose turns a home
indexed into PostgreSQL, with no packet staged, are swept by the model pass in a worker
process (the fake llama-server over HTTP), its stage in the store; a worker killed after
marking the day ``invoked`` leaves it busy until the mark's lease runs out, then taken
over with one model call; one killed after staging the page is taken over without a
second model call."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import pg_helpers
from daemon_helpers import spawn, tether
from test_sweep_model import CLUB, NOW, chat, excerpts, page
from tether.home import init_home
from tether.memory.indexer import index_home
from tether.stores.postgres import PostgresStore
from tether.stores.postgres.sweep import PostgresSweepStore
from tether.sweep import owners
from tether.testing.fake_llama import FakeLlama
from tether.testing.pause import release, wait_reached

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
LATER = "2026-11-02T12:01:00+00:00"  # the receipts of a killed worker have expired


@pytest.fixture
def db(pg_url: str) -> Iterator[str]:
    """A database of this test's own: a worker sweeps every owner schema it finds."""
    del pg_url  # the server is there (skipped otherwise)
    with pg_helpers.fresh_database() as url:
        yield url


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=65536, parallel=2) as f:
        yield f


def home_day(tmp_path: Path, url: str, tenant: str) -> None:
    """A home on the shared store: one session on DAY indexed into the owner's schema,
    the sweep's owner made; the session files stay in the home (the worker has none)."""
    home = tmp_path / tenant
    init_home(home)
    chat(home, "club", "We moved the book club to Tuesdays.")
    with PostgresStore(url, tenant) as store:
        index_home(home, store)
        for meta in store.sessions_meta().values():
            store.put_session_meta(msgspec.structs.replace(meta, onboarding=False))
    with PostgresSweepStore(url, tenant) as sweep:
        owners.ensure_default(sweep, NOW)


def worker_config(tmp_path: Path, fake: FakeLlama, timeout_s: float = 5) -> Path:
    path = tmp_path / "worker.toml"
    path.write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = {timeout_s}\n')
    return path


def worker(url: str, config: Path, now: str, *extra: str, crash: str | None = None) -> Any:
    env = {"TETHER_TEST_NOW": now, **({"TETHER_CRASH_AT": crash} if crash else {})}
    return tether(
        None, "sweep", "worker", "--once", "--url", url, "--config", str(config), "--json",
        *extra, env=env, timeout=120,
    )  # fmt: skip


def facts(url: str, tenant: str) -> list[tuple[str, str]]:
    with PostgresSweepStore(url, tenant) as sweep, sweep.transaction(write=False) as tx:
        return [(f.entity, f.text) for f in tx.facts("owner")]


def stage_state(url: str, tenant: str) -> list[str]:
    with PostgresSweepStore(url, tenant) as sweep:
        rows = sweep.pg.run(
            "reading",
            lambda c: c.execute("SELECT state FROM sweep_model_stage").fetchall(),
            write=False,
        )
    return [r[0] for r in rows]


def test_a_worker_sweeps_unstaged_days_from_the_store_with_the_model(
    tmp_path: Path, db: str, fake: FakeLlama
) -> None:
    pg_url = db
    tenants = sorted(pg_helpers.new_owner("u") for _ in range(2))
    for tenant in tenants:
        home_day(tmp_path, pg_url, tenant)
        fake.script(excerpts())
        fake.script(page(CLUB))
    config = worker_config(tmp_path, fake)
    out = worker(pg_url, config, NOW.isoformat())
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["outcomes"] == {"complete": 2}, report
    assert len(fake.requests) == 4  # phase A and phase B, once per owner-day
    for tenant in tenants:
        assert facts(pg_url, tenant) == [("book-club", CLUB["text"])]
        assert stage_state(pg_url, tenant) == ["staged"]
    again = worker(pg_url, config, LATER)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["claimed"] == 0
    assert len(fake.requests) == 4
    for tenant in tenants:
        assert facts(pg_url, tenant) == [("book-club", CLUB["text"])]


def killed_at(
    tmp_path: Path, pg_url: str, fake: FakeLlama, point: str, timeout_s: float = 5
) -> tuple[str, Path]:
    """A new owner with a day of turns in the store, the model's answers scripted, and a
    worker SIGKILLed at ``point`` sweeping it (its lease 1 s); the owner and the config."""
    tenant = pg_helpers.new_owner("k")
    home_day(tmp_path, pg_url, tenant)
    fake.script(excerpts())
    fake.script(page(CLUB))
    config = worker_config(tmp_path, fake, timeout_s)
    killed = worker(pg_url, config, NOW.isoformat(), "--lease", "1", crash=point)
    assert killed.returncode == -9, killed.stderr
    return tenant, config


def test_a_worker_killed_after_invoked_is_busy_then_taken_over_after_the_lease(
    tmp_path: Path, db: str, fake: FakeLlama
) -> None:
    pg_url = db
    tenant, config = killed_at(tmp_path, pg_url, fake, "sweep-after-invoked", timeout_s=1)
    assert stage_state(pg_url, tenant) == ["invoked"]
    assert fake.requests == []
    (row,) = stuck(status_home(tmp_path, pg_url, tenant))
    assert (row["why"], row["where"], row["holder_process"]) == ("busy", "store", "gone")
    # Within the mark's lease (twice timeout_s + 2 s, on the server's clock) the day is
    # held: busy, and the model is not asked.
    out = worker(pg_url, config, LATER)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["outcomes"] == {"busy": 1}, report
    assert report["reasons"] == {"invocation_busy": 1}
    assert fake.requests == []
    assert facts(pg_url, tenant) == []
    time.sleep(6.5)
    (row,) = stuck(status_home(tmp_path, pg_url, tenant))
    assert row["why"] == "abandoned"
    # The lease has run out and its holder is dead: the day is taken over, the model
    # called once (the killed worker never sent its request), the page applied once.
    out = worker(pg_url, config, LATER)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["outcomes"] == {"complete": 1}, report
    assert len(fake.requests) == 2
    assert facts(pg_url, tenant) == [("book-club", CLUB["text"])]
    assert stage_state(pg_url, tenant) == ["staged"]


def test_a_worker_killed_after_the_stage_applies_the_page_once(
    tmp_path: Path, db: str, fake: FakeLlama
) -> None:
    pg_url = db
    tenant, config = killed_at(tmp_path, pg_url, fake, "sweep-after-stage")
    assert stage_state(pg_url, tenant) == ["staged"]
    assert facts(pg_url, tenant) == []
    assert len(fake.requests) == 2
    out = worker(pg_url, config, LATER)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["taken_over"] == 1
    assert report["outcomes"] == {"complete": 1}, report
    assert len(fake.requests) == 2
    assert facts(pg_url, tenant) == [("book-club", CLUB["text"])]


def status_home(tmp_path: Path, url: str, tenant: str) -> Path:
    """A home whose store is the tenant's schema: its ``sweep status`` sees the workers'
    marks in ``sweep_model_stage``."""
    home = tmp_path / f"{tenant}-status"
    init_home(home)
    (home / "tether.toml").write_text(f'[store]\nurl = "{url}"\nowner = "{tenant}"\n')
    return home


def stuck(home: Path) -> list[dict[str, Any]]:
    out = tether(home, "sweep", "status", "--json")
    assert out.returncode == 0, out.stderr
    (owner,) = json.loads(out.stdout)["owners"]
    return list(owner["stuck"])


def test_a_live_worker_is_reported_busy_and_status_names_the_day(
    tmp_path: Path, db: str, fake: FakeLlama
) -> None:
    pg_url = db
    tenant = pg_helpers.new_owner("b")
    home_day(tmp_path, pg_url, tenant)
    fake.script(excerpts())
    fake.script(page(CLUB))
    config = worker_config(tmp_path, fake)
    pause = tmp_path / "pause"
    pause.mkdir()
    env = {
        "TETHER_TEST_NOW": NOW.isoformat(),
        "TETHER_PAUSE_AT": "sweep-after-invoked",
        "TETHER_PAUSE_DIR": str(pause),
    }
    first = spawn(
        None, "sweep", "worker", "--once", "--url", pg_url, "--config", str(config), "--json",
        "--lease", "1", env=env,
    )  # fmt: skip
    try:
        assert wait_reached(pause, "sweep-after-invoked")
        (row,) = stuck(status_home(tmp_path, pg_url, tenant))
        assert (row["why"], row["where"], row["holder_process"]) == ("busy", "store", "alive")
        assert row["holder"].endswith(f":{first.pid}")
        assert row["lease_left_s"] > 0
        time.sleep(1.5)  # the first worker's claim on the day has run out, not its mark
        out = worker(pg_url, config, NOW.isoformat())
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        assert report["outcomes"] == {"busy": 1}, report
        assert report["reasons"] == {"invocation_busy": 1}
        assert fake.requests == []
    finally:
        release(pause, "sweep-after-invoked")
        got, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert json.loads(got)["outcomes"] == {"complete": 1}
    assert len(fake.requests) == 2
    assert facts(pg_url, tenant) == [("book-club", CLUB["text"])]
    assert stuck(status_home(tmp_path, pg_url, tenant)) == []


def sweep_usage(home: Path) -> dict[str, Any]:
    out = tether(home, "usage", "--json")
    assert out.returncode == 0, out.stderr
    rows: dict[str, dict[str, Any]] = {r["key"]: r for r in json.loads(out.stdout)["rows"]}
    return rows.get("sweep", {"calls": 0})


def test_a_workers_model_calls_are_counted_in_the_owners_usage(
    tmp_path: Path, db: str, fake: FakeLlama
) -> None:
    """What a worker spends on an owner's day is in that owner's spend ledger: ``tether
    usage`` of a home on the owner's schema counts it, and no other owner's does."""
    pg_url = db
    tenant, other = pg_helpers.new_owner("m"), pg_helpers.new_owner("n")
    home_day(tmp_path, pg_url, tenant)
    fake.script(excerpts())
    fake.script(page(CLUB))
    out = worker(pg_url, worker_config(tmp_path, fake), NOW.isoformat())
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["outcomes"] == {"complete": 1}
    assert len(fake.requests) == 2
    sweep = sweep_usage(status_home(tmp_path, pg_url, tenant))
    assert sweep["calls"] == 2  # phase A and phase B, settled when the worker stopped
    assert sweep["prompt_n"] + sweep["cache_n"] > 0
    assert sweep["predicted_n"] > 0
    assert sweep_usage(status_home(tmp_path, pg_url, other))["calls"] == 0
