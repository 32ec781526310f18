"""What the checksum sidecar (``<n>.sums``, issue 33) costs a session log append,
beside the same append without it, in the same run.

Two sessions in one home on the same disk; each call appends one turn (a ``User`` and an
``Assistant`` record, as a turn does) through ``Session.append`` (lock, torn-tail check,
write, fsync), to one session with its checksums written and to the other with the
sidecar write left out (``record_sum`` swapped for a no-op for that arm only). The arms
alternate, so drift on a noisy machine hits both alike. Prints one JSON line per figure.

    .venv/bin/python benchmarks/log_append.py [--calls 2000] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tether.records import Assistant, Baseline, User
from tether.sessions import Session
from tether.sessions import session as session_module
from tether.sessions.integrity import record_sum, sum_path

BASE = Baseline(system="You are tether.", memory="")


def _no_sum(_log: Path, _start: int, _data: bytes) -> None:
    return None


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(calls: int, where: Path) -> list[dict[str, object]]:
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        home = Path(tmp)
        with_sum = Session.create(home, "with-sum", baseline=BASE, slot=0, time=t0)
        without = Session.create(home, "without", baseline=BASE, slot=0, time=t0)
        times: dict[str, list[float]] = {"with_sum": [], "without_sum": []}
        text = "what did we decide about the garden shed last spring? " * 3
        for n in range(calls):
            at = t0 + timedelta(seconds=n + 1)
            turn = (User(time=at, text=text), Assistant(time=at, text=text))
            for arm, session in (("with_sum", with_sum), ("without_sum", without)):
                vars(session_module)["record_sum"] = record_sum if arm == "with_sum" else _no_sum
                started = time.perf_counter()
                session.append(*turn)
                times[arm].append((time.perf_counter() - started) * 1e6)
        vars(session_module)["record_sum"] = record_sum
        log_bytes = with_sum.log_path.stat().st_size
        sum_bytes = sum_path(with_sum.log_path).stat().st_size
    out: list[dict[str, object]] = []
    for arm, values in times.items():
        out.append(
            {
                "figure": f"append_us_{arm}",
                "p50": round(statistics.median(values), 1),
                "p99": round(_p(values, 0.99), 1),
                "calls": calls,
            }
        )
    with_p50 = statistics.median(times["with_sum"])
    without_p50 = statistics.median(times["without_sum"])
    out.append({"figure": "sidecar_overhead_p50", "ratio": round(with_p50 / without_p50, 3)})
    out.append(
        {
            "figure": "sidecar_bytes_per_record",
            "value": round(sum_bytes / (2 * calls), 1),
            "log_bytes_per_record": round(log_bytes / (2 * calls), 1),
        }
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    for line in run(args.calls, args.dir):
        print(json.dumps(line))


if __name__ == "__main__":
    main()
