"""Sweep 1,000 owners x 1 day with the deterministic producer on SQLite: owners/s.

Prints one JSON line per figure. The baseline, measured in the same run on a fresh
database, makes the same canonical writes (facts, journal entries, cursor) for the same
owners in one transaction per owner, with no stage, receipts, claims, fencing re-reads or
per-step commits: the floor the sweep's crash safety is paid on top of.

    .venv/bin/python benchmarks/sweep_owners.py [--owners 1000] [--per-day 4]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tether.config import SweepConfig
from tether.core.sweep.authority import Occupant, decide_fact
from tether.core.sweep.packet import FactCandidate
from tether.core.sweep.state import Cursor, Fact, JournalRow
from tether.core.sweep.windows import window_for
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.sweep import owners
from tether.sweep.producer import DeterministicProducer
from tether.sweep.runner import Runner, members

CREATED = datetime(2026, 11, 1, 8, tzinfo=UTC)
NOW = CREATED + timedelta(hours=4)


def _setup(path: Path, n: int) -> SqliteSweepStore:
    store = SqliteSweepStore(path)
    with store.transaction() as tx:
        for i in range(n):
            tx.put_owner(owners.new_owner(f"o{i:05d}", "Europe/Paris", CREATED))
    return store


def sweep(path: Path, n: int, per_day: int) -> tuple[float, int]:
    store = _setup(path, n)
    try:
        runner = Runner(
            store,
            DeterministicProducer(per_day=per_day),
            config=SweepConfig(enabled=True),
            cohort=members(["*"]),
            claimant="bench",
        )
        start = time.perf_counter()
        report = runner.run(NOW)
        elapsed = time.perf_counter() - start
    finally:
        store.close()
    assert report.totals()["days_complete"] == n, report.totals()
    return elapsed, report.totals()["writes"]


def baseline(path: Path, n: int, per_day: int) -> tuple[float, int]:
    store = _setup(path, n)
    producer = DeterministicProducer(per_day=per_day)
    writes = 0
    try:
        start = time.perf_counter()
        for i in range(n):
            oid = f"o{i:05d}"
            with store.transaction() as tx:
                owner = tx.owner(oid)
                assert owner is not None
                window = window_for(owner.timezone_name, owner.first_date)
                packet = producer.produce(owner, window)
                for c in packet.candidates:
                    assert isinstance(c, FactCandidate)
                    old = tx.fact_in_slot(oid, c.subject, c.entity)
                    occ = None if old is None else Occupant(old.authority, old.text)
                    if not decide_fact(c.authority, occ).writes:
                        continue
                    row = Fact(
                        owner=oid, subject=c.subject, entity=c.entity, text=c.text,
                        authority=c.authority, refs="[]", origin_receipt=None,
                        created_at=NOW, updated_at=NOW,
                    )  # fmt: skip
                    if old is not None:
                        row = Fact(
                            **{**{f: getattr(row, f) for f in row.__struct_fields__}, "id": old.id}
                        )
                    tx.put_fact(row)
                    tx.append_journal(
                        JournalRow(
                            owner=oid,
                            receipt_id=None,
                            time=NOW,
                            who="sweep",
                            action="fact",
                            target=c.entity,
                            before=None,
                            after=c.text,
                            evidence="{}",
                        )
                    )
                    writes += 1
                tx.put_cursor(
                    Cursor(
                        owner=oid,
                        timezone_name=window.timezone_name,
                        local_date=window.local_date,
                        window_id=window.window_id,
                        window_start_utc=window.start_utc,
                        window_end_utc=window.end_utc,
                        updated_at=NOW,
                    )
                )
        elapsed = time.perf_counter() - start
    finally:
        store.close()
    return elapsed, writes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--owners", type=int, default=1000)
    parser.add_argument("--per-day", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tether-sweep-bench-") as tmp:
        base_s, base_writes = baseline(Path(tmp) / "base.db", args.owners, args.per_day)
        sweep_s, sweep_writes = sweep(Path(tmp) / "sweep.db", args.owners, args.per_day)
    assert base_writes == sweep_writes, (base_writes, sweep_writes)
    common = {"owners": args.owners, "days": 1, "candidates_per_day": args.per_day}
    sweep_rate = args.owners / sweep_s
    base_rate = args.owners / base_s
    for line in (
        {"figure": "sweep_owners_per_s", "value": round(sweep_rate, 1), **common},
        {"figure": "baseline_plain_writes_owners_per_s", "value": round(base_rate, 1), **common},
        {"figure": "sweep_over_baseline_time", "value": round(sweep_s / base_s, 2), **common},
        {"figure": "canonical_writes", "value": sweep_writes, **common},
    ):
        print(json.dumps(line))


if __name__ == "__main__":
    main()
