"""One ``tether sweep worker --once`` process over many owner schemas beside the same
owner-days in one schema (the baseline, same run): owner-days/s and the most connections
the worker held at once (``pg_stat_activity`` by its ``application_name``, sampled every
20 ms). Prints one JSON line per case.

    TETHER_TEST_POSTGRES=postgresql://postgres@127.0.0.1:5432/test \\
      .venv/bin/python -m benchmarks.worker_pool [--schemas 40] [--owners 5]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
from urllib.parse import urlsplit, urlunsplit

import psycopg

from benchmarks.postgres_store import NOW, seed
from tether.daemon.fleet import application_name
from tether.stores.postgres.conn import PgPool
from tether.stores.postgres.sweep import PostgresSweepStore


def case(base: str, schemas: int, owners: int) -> dict[str, object]:
    name = f"tether_bench_pool_{secrets.token_hex(4)}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(base)
    url = urlunsplit((parts.scheme, parts.netloc, "/" + name, "", ""))
    try:
        with PgPool(url, max_size=2) as pool:
            for i in range(schemas):
                with PostgresSweepStore(url, f"bench{i}", pool=pool) as store:
                    seed(store, owners)
        env = {**os.environ, "TETHER_TEST_NOW": NOW.isoformat()}
        argv = [sys.executable, "-m", "tether.testing.cli", "sweep", "worker", "--once"]
        start = time.perf_counter()
        proc = subprocess.Popen([*argv, "--url", url], env=env, stdout=subprocess.DEVNULL)
        peak = 0
        with psycopg.connect(url, autocommit=True) as watch:
            while proc.poll() is None:
                row = watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                    (application_name(proc.pid),),
                ).fetchone()
                peak = max(peak, int(row[0]) if row else 0)
                time.sleep(0.02)
        assert proc.wait() == 0
        elapsed = time.perf_counter() - start
        return {
            "schemas": schemas,
            "owner_days": schemas * owners,
            "owner_days_per_s": round(schemas * owners / elapsed, 1),
            "peak_connections": peak,
        }
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schemas", type=int, default=40)
    parser.add_argument("--owners", type=int, default=5)
    args = parser.parse_args()
    base = os.environ["TETHER_TEST_POSTGRES"]
    total = args.schemas * args.owners
    print(json.dumps({"figure": "worker_pool", "baseline": True, **case(base, 1, total)}))
    print(json.dumps({"figure": "worker_pool", **case(base, args.schemas, args.owners)}))


if __name__ == "__main__":
    main()
