"""``tether sweep worker`` against one PostgreSQL: real worker processes split the
owner-days, each swept exactly once, and a worker killed mid-day is taken over."""

from __future__ import annotations

import json
import time
from pathlib import Path

import psycopg
import pytest

import pg_helpers
from bench_helpers import load_benchmark
from daemon_helpers import spawn, tether
from tether.daemon.fleet import WORKER_POOL, application_name
from tether.stores.postgres.conn import PgPool
from tether.stores.postgres.sweep import PostgresSweepStore

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
BENCH = load_benchmark("postgres_store")
NOW = "2026-11-01T12:00:00+00:00"  # each owner's one due day: the benchmark's DAY
DAY = BENCH.DAY


def seed(url: str, tenant: str, owners: int) -> None:
    """``owners`` sweep owners, each with its due day's packet staged in the store (the
    benchmark's own seeding, so both sweep the same days)."""
    with PostgresSweepStore(url, tenant) as store:
        BENCH.seed(store, owners)


def check_exactly_once(url: str, tenant: str, owners: int) -> None:
    with PostgresSweepStore(url, tenant) as store:
        rows = store.pg.run(
            "checking",
            lambda c: (
                c.execute(
                    "SELECT state, count(*), max(attempts) FROM sweep_claim GROUP BY state"
                ).fetchall(),
                c.execute(
                    "SELECT count(*) FROM (SELECT owner, subject, entity FROM sweep_fact"
                    " WHERE active = 1 GROUP BY 1, 2, 3 HAVING count(*) > 1) AS d"
                ).fetchone(),
                c.execute(
                    "SELECT count(*), count(DISTINCT receipt_id) FROM sweep_journal"
                ).fetchone(),
                c.execute(
                    "SELECT count(*) FROM sweep_receipt WHERE state <> 'committed'"
                ).fetchone(),
                c.execute(
                    "SELECT count(*) FROM sweep_cursor WHERE local_date = %s", (str(DAY),)
                ).fetchone(),
                c.execute("SELECT count(*) FROM sweep_receipt").fetchone(),
            ),
            write=False,
        )
    claims, dup_facts, journal, pending, cursors, receipts = rows
    assert dup_facts is not None
    assert journal is not None
    assert receipts is not None
    assert [(r[0], r[1]) for r in claims] == [("done", owners)]
    assert dup_facts == (0,)
    assert journal[0] == journal[1]  # one journal entry per receipt, never two
    assert journal[0] > 0
    assert pending == (0,)
    assert cursors == (owners,)
    # Every owner-day's candidates and sources had exactly one receipt each.
    assert receipts[0] == owners * (4 + 2)


@pytest.mark.parametrize("workers", [2, 4])
def test_worker_processes_sweep_every_owner_day_exactly_once(pg_url: str, workers: int) -> None:
    # A database of its own: the run's shared database holds every other test's schema,
    # and each worker would offer and sweep those owners' days too.
    with pg_helpers.fresh_database() as url:
        _sweep_with_workers(url, workers)


def _sweep_with_workers(pg_url: str, workers: int) -> None:
    tenant = pg_helpers.new_owner("w")
    seed(pg_url, tenant, 500)
    env = {"TETHER_TEST_NOW": NOW}
    procs = [
        spawn(None, "sweep", "worker", "--once", "--url", pg_url, "--json", env=env)
        for _ in range(workers)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * workers, [o[1] for o in outs]
    reports = [json.loads(o[0]) for o in outs]
    assert sum(r["outcomes"].get("complete", 0) for r in reports) == 500, reports
    assert {o for r in reports for o in r["outcomes"]} == {"complete"}
    assert all(r["taken_over"] == 0 for r in reports)
    check_exactly_once(pg_url, tenant, 500)


def test_a_worker_killed_mid_day_is_taken_over_after_its_lease(pg_url: str) -> None:
    with pg_helpers.fresh_database() as url:
        _take_over(url)


def _take_over(pg_url: str) -> None:
    tenant = pg_helpers.new_owner("k")
    seed(pg_url, tenant, 20)
    env = {"TETHER_TEST_NOW": NOW}
    killed = tether(
        None,
        "sweep", "worker", "--once", "--url", pg_url, "--lease", "1",
        env={**env, "TETHER_CRASH_AT": "sweep-after-claim"},
    )  # fmt: skip
    assert killed.returncode == -9  # SIGKILL at the point: mid-day, its claim held
    # A minute on (the sweep's clock): the dead worker's claim and receipts have expired.
    later = {"TETHER_TEST_NOW": "2026-11-01T12:01:00+00:00"}
    out = tether(None, "sweep", "worker", "--once", "--url", pg_url, "--json", env=later)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["taken_over"] == 1
    assert report["outcomes"]["complete"] == 20
    assert set(report["outcomes"]) == {"complete"}
    check_exactly_once(pg_url, tenant, 20)


def test_a_worker_holds_one_pool_however_many_owner_schemas_it_sweeps(pg_url: str) -> None:
    with pg_helpers.fresh_database() as url:
        _many_schemas(url, schemas=40, owners=3)


def _many_schemas(url: str, *, schemas: int, owners: int) -> None:
    tenants = [pg_helpers.new_owner("m") for _ in range(schemas)]
    with PgPool(url, max_size=2) as pool:
        for tenant in tenants:
            with PostgresSweepStore(url, tenant, pool=pool) as store:
                BENCH.seed(store, owners)
    proc = spawn(None, "sweep", "worker", "--once", "--url", url, "--json",
                 env={"TETHER_TEST_NOW": NOW})  # fmt: skip
    name = application_name(proc.pid)
    seen: list[int] = []
    with psycopg.connect(url, autocommit=True) as watch:
        while proc.poll() is None:
            row = watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchone()
            assert row is not None
            seen.append(int(row[0]))
            time.sleep(0.02)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["outcomes"] == {"complete": schemas * owners}, report
    # Never more connections than the one pool's bound, with 40 schemas (a pool per
    # schema held 40 or more).
    assert max(seen) >= 1  # the watch saw the worker's connections
    assert max(seen) <= WORKER_POOL, max(seen)
    assert report["pool_max"] == WORKER_POOL
    assert 1 <= report["connections_opened"] <= WORKER_POOL
    for tenant in tenants:
        check_exactly_once(url, tenant, owners)


def test_a_worker_needs_a_postgresql_url() -> None:
    out = tether(None, "sweep", "worker", "--once", "--url", "sqlite:///x.db")
    assert out.returncode == 2
    assert "needs a PostgreSQL store" in out.stderr


def test_a_worker_config_that_cannot_be_read_exits_2_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "worker.toml"
    bad.write_text("[llm]\nurl = 3\n")
    for path in (bad, tmp_path / "missing.toml"):
        out = tether(
            None, "sweep", "worker", "--once", "--url", "postgresql://x@127.0.0.1:1/x",
            "--config", str(path),
        )  # fmt: skip
        assert out.returncode == 2, out.stderr
        assert str(path) in out.stderr
        assert "Traceback" not in out.stderr
