"""Open a session of 10 epochs x 10,000 records and replay its current epoch; append rate.

Prints one JSON line per figure. The baseline, measured in the same run on the same files,
is a naive reader: stdlib ``json.loads`` per line of every epoch, no typed records.
Goal (issue 2): open + replay under 150 ms.

    .venv/bin/python benchmarks/session_replay.py [--epochs 10] [--records 10000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tether.files import encode_records, write_atomic
from tether.records import Assistant, Baseline, LogRecord, ToolCall, ToolResult, Usage, User
from tether.sessions import Session

T0 = datetime(2026, 11, 1, tzinfo=UTC)
PROSE = "the owner asked about the garden plan and the watering schedule for next week " * 2


def epoch_records(n: int, epoch: int) -> list[LogRecord]:
    out: list[LogRecord] = []
    t = T0 + timedelta(days=epoch)
    i = 0
    while len(out) < n:
        t += timedelta(seconds=1)
        kind = i % 5
        if kind == 0:
            out.append(User(time=t, text=f"{i}: {PROSE}"))
        elif kind == 1:
            out.append(ToolCall(time=t, id=f"c{i}", name="recall", args={"query": "garden"}))
        elif kind == 2:
            out.append(
                ToolResult(
                    time=t,
                    tool_call_id=f"c{i - 1}",
                    content=PROSE,
                    class_="memory",
                    untrusted=False,
                )
            )
        elif kind == 3:
            out.append(Assistant(time=t, text=PROSE))
        else:
            out.append(Usage(time=t, cache_n=1000 + i, prompt_n=50, predicted_n=40))
        i += 1
    return out


def build(home: Path, epochs: int, per_epoch: int) -> int:
    base = Baseline(system="You are tether." * 20, memory="- fact\n" * 200)
    s = Session.create(home, "bench", baseline=base, slot=0, time=T0)
    total = 0
    for e in range(epochs):
        recs = epoch_records(per_epoch - 1, e)
        # Bulk write: the benchmark measures reading, not how the fixture was made.
        data = s.log_path.read_bytes() + encode_records(recs)
        write_atomic(s.log_path, data)
        total += len(data)
        s = Session.open(home, "bench")
        if e < epochs - 1:
            s.end_epoch(
                summary=f"summary of epoch {e}", baseline=base, time=T0 + timedelta(days=e + 1)
            )
    return total


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def naive_open(home: Path) -> int:
    turns = 0
    for path in sorted((home / "sessions" / "bench").glob("*.jsonl")):
        with path.open() as f:
            for line in f:
                if json.loads(line)["type"] == "User":
                    turns += 1
    return turns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--appends", type=int, default=300)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        size = build(home, args.epochs, args.records)

        def ours() -> None:
            s = Session.open(home, "bench")
            s.messages()

        ours()  # warm the page cache for both readers alike
        naive_open(home)
        ours_ms = timed(ours, args.repeat)
        naive_ms = timed(lambda: naive_open(home), args.repeat)
        med, base = statistics.median(ours_ms), statistics.median(naive_ms)
        common = {"epochs": args.epochs, "records_per_epoch": args.records, "bytes": size}
        print(
            json.dumps(
                {
                    "figure": "open_replay_ms_p50",
                    "value": round(med, 2),
                    **common,
                    "baseline": "stdlib json.loads per line, all epochs",
                    "baseline_value": round(base, 2),
                    "ratio": round(med / base, 3),
                    "goal": "< 150 ms",
                }
            )
        )
        print(json.dumps({"figure": "open_replay_ms_max", "value": round(max(ours_ms), 2)}))

        s = Session.open(home, "bench")
        start = time.perf_counter()
        for i in range(args.appends):
            s.append(User(time=T0 + timedelta(seconds=i), text=PROSE))
        elapsed = time.perf_counter() - start
        # Baseline: the same bytes appended with a plain write + fsync, no lock, no checks.
        import os

        raw = encode_records([User(time=T0, text=PROSE)])
        path = home / "raw.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        start = time.perf_counter()
        for _ in range(args.appends):
            os.write(fd, raw)
            os.fsync(fd)
        raw_elapsed = time.perf_counter() - start
        os.close(fd)
        rate, raw_rate = args.appends / elapsed, args.appends / raw_elapsed
        print(
            json.dumps(
                {
                    "figure": "append_records_per_s_fsync",
                    "value": round(rate),
                    "baseline": "os.write + fsync, same bytes",
                    "baseline_value": round(raw_rate),
                    "ratio": round(rate / raw_rate, 3),
                }
            )
        )


if __name__ == "__main__":
    main()
