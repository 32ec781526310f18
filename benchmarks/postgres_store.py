"""PostgreSQL beside SQLite, in one run: sweep owner-days/s, recall latency, import rate.

Prints one JSON line per figure.

- ``sweep_owner_days_per_s``: ``--owners`` owners, each with one due day staged in the
  store (``DeterministicProducer``'s packet: 4 candidates, 2 sources), swept by the same
  ``Runner`` the worker uses: on SQLite by one process (in this one, the baseline), on
  PostgreSQL by 1, 2 and 4 ``tether sweep worker --once`` processes (wall time from spawn
  to the last exit, so process start-up is counted against PostgreSQL).
- ``import_turns_per_s`` and ``recall_ms_p50``/``p99``: ``--turns`` turns of the
  pseudo-English corpus of ``recall_latency.py``, imported with ``import_jsonl`` into each
  backend, then the same questions asked through ``recall`` on both; and how often both
  backends return the same top-k refs (``recall_same_top_k``: the ranking is meant to be
  identical).

    TETHER_TEST_POSTGRES=postgresql://postgres@127.0.0.1:5432/test \\
      .venv/bin/python benchmarks/postgres_store.py [--owners 500] [--turns 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg

from benchmarks.recall_latency import Corpus, make_queries, percentile, write_import
from tether.config import Config, SweepConfig
from tether.core.sweep.packet import digest, encode_packet
from tether.core.sweep.state import Owner, StagedPacket
from tether.core.sweep.windows import window_for
from tether.daemon.compose import worker_runner
from tether.home import init_home
from tether.imports.jsonl import import_jsonl
from tether.memory.recall import recall
from tether.ports import Store, StoreOpener, SweepStore
from tether.stores.postgres import PostgresStore
from tether.stores.postgres.sweep import PostgresSweepStore
from tether.stores.sqlite import SqliteStore
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.sweep.producer import DeterministicProducer

T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)
DAY = date(2026, 10, 31)
NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
K = 5


def emit(**figure: object) -> None:
    print(json.dumps(figure), flush=True)


def seed(store: SweepStore, owners: int) -> None:
    producer = DeterministicProducer()
    with store.transaction() as tx:
        for i in range(owners):
            owner = Owner(id=f"o{i:05d}", timezone_name="UTC", first_date=DAY, created_at=T0)
            tx.put_owner(owner)
            window = window_for("UTC", DAY)
            packet = producer.produce(owner, window)
            tx.put_stage(
                StagedPacket(
                    owner=owner.id,
                    local_date=DAY,
                    source_generation=owner.source_generation,
                    window_id=window.window_id,
                    digest=digest(packet),
                    packet=encode_packet(packet),
                    created_at=T0,
                )
            )


def sweep_sqlite(tmp: Path, owners: int) -> float:
    """Owner-days/s of one process sweeping SQLite."""
    with SqliteSweepStore(tmp / "sweep.db") as store:
        seed(store, owners)
        runner = worker_runner(store, SweepConfig(enabled=True), timedelta(minutes=2), "bench")
        start = time.perf_counter()
        for i in range(owners):
            result = runner.run_owner(f"o{i:05d}", NOW, (DAY,))
            assert result.days, result
            assert result.days[0].status == "complete", result
        return owners / (time.perf_counter() - start)


def sweep_postgres(url: str, owners: int, workers: int) -> float:
    """Owner-days/s of ``workers`` worker processes sweeping one PostgreSQL database."""
    with psycopg.connect(url, autocommit=True) as conn:
        for (name,) in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, 'tether_')"
        ).fetchall():
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')
    with PostgresSweepStore(url, "bench") as store:
        seed(store, owners)
    env = {**os.environ, "TETHER_TEST_NOW": NOW.isoformat()}
    argv = [sys.executable, "-m", "tether.testing.cli", "sweep", "worker", "--once", "--url", url]
    start = time.perf_counter()
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL) for _ in range(workers)]
    for p in procs:
        assert p.wait() == 0
    rate = owners / (time.perf_counter() - start)
    with PostgresSweepStore(url, "bench") as store:
        assert store.claims().counts() == {"done": owners}
    return rate


def opener(store: Store) -> StoreOpener:
    return lambda: nullcontext(store)


def recall_both(tmp: Path, url: str, turns: int, n_queries: int) -> None:
    """Import ``turns`` into both backends (unless ``tmp`` holds them from an earlier run
    with the same ``turns``: ``--data``), then time the same questions on both."""
    corpus = Corpus(7)
    src = tmp / f"import-{turns}.jsonl"
    users = write_import(src, corpus, turns, 50)
    questions = list(make_queries(corpus, users, n_queries))
    stores: dict[str, Store] = {}
    for backend in ("sqlite", "postgres"):
        home = tmp / f"home-{backend}-{turns}"
        done = home / "imported"
        if not home.exists():
            init_home(home)
        store: Store = (
            SqliteStore(home / "tether.db")
            if backend == "sqlite"
            else PostgresStore(url, f"bench{turns}")
        )
        if done.exists():
            emit(figure="import_turns_per_s", backend=backend, turns=turns, value=None, kept=True)
            stores[backend] = store
            continue
        start = time.perf_counter()
        import_jsonl(home, src, now=T0, config=Config(), store=opener(store))
        store.optimize_index()
        emit(
            figure="import_turns_per_s",
            backend=backend,
            turns=turns,
            value=round(turns / (time.perf_counter() - start)),
        )
        done.write_text("")
        stores[backend] = store
    tops: dict[str, list[list[str]]] = {"sqlite": [], "postgres": []}
    for backend, store in stores.items():
        for q, _, _ in questions[:20]:
            recall(store, q, K, time=T0)  # warm caches alike
        times: list[float] = []
        for q, _, _ in questions:
            start = time.perf_counter()
            hits = recall(store, q, K, time=T0)
            times.append((time.perf_counter() - start) * 1000)
            tops[backend].append([h.ref for h in hits])
        for p in (50, 99):
            emit(
                figure=f"recall_ms_p{p}",
                backend=backend,
                turns=turns,
                value=round(percentile(times, p), 2),
                queries=len(times),
            )
    same = sum(a == b for a, b in zip(tops["sqlite"], tops["postgres"], strict=True))
    emit(figure="recall_same_top_k", turns=turns, value=round(same / len(questions), 3), k=K)
    for store in stores.values():
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--owners", type=int, default=500)
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--pg", default=os.environ.get("TETHER_TEST_POSTGRES"))
    parser.add_argument("--skip-recall", action="store_true")
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument(
        "--turns-list", type=int, nargs="+", help="recall at each of these sizes (over --turns)"
    )
    parser.add_argument(
        "--data",
        type=Path,
        help="keep the imported corpora here and in database --db, and reuse them next run",
    )
    parser.add_argument("--db", help="with --data: the database to keep (created if missing)")
    args = parser.parse_args()
    if not args.pg:
        sys.exit("needs a server: --pg URL or TETHER_TEST_POSTGRES")
    if (args.data is None) != (args.db is None):
        sys.exit("--data and --db go together")
    keep = args.data is not None
    name = f"tether_bench_{os.getpid()}"  # the sweep's, always fresh and dropped after
    kept = args.db if keep else name  # the recall corpora's
    with psycopg.connect(args.pg, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
        there = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (kept,)).fetchone()
        if there is None:
            conn.execute(f'CREATE DATABASE "{kept}"')
    base = args.pg.rsplit("/", 1)[0]
    if keep:
        args.data.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix="tether-pg-bench-") as tmp:
            if not args.skip_sweep:
                sweep_all(Path(tmp), f"{base}/{name}", args.owners, args.workers)
            if not args.skip_recall:
                for turns in args.turns_list or [args.turns]:
                    place = args.data if keep else Path(tmp)
                    recall_both(place, f"{base}/{kept}", turns, args.queries)
    finally:
        with psycopg.connect(args.pg, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def sweep_all(tmp: Path, url: str, owners: int, workers: list[int]) -> None:
    base = sweep_sqlite(tmp, owners)
    emit(figure="sweep_owner_days_per_s", backend="sqlite", processes=1, value=round(base, 1))
    for n in workers:
        rate = sweep_postgres(url, owners, n)
        emit(
            figure="sweep_owner_days_per_s",
            backend="postgres",
            processes=n,
            value=round(rate, 1),
            baseline="one SQLite process, same packets and Runner",
            baseline_value=round(base, 1),
            ratio=round(rate / base, 2),
        )


if __name__ == "__main__":
    main()
