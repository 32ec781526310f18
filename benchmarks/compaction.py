"""Compaction benchmarks (issue 4). One JSON line per figure, each beside a baseline
measured in the same run.

1. ``compaction_no_model_ms``: everything compaction does except the model call (scan and
   bank the window, build the new baseline, append EpochEnd, write the next epoch, reopen)
   for a 2 MiB epoch. Baseline: writing and fsyncing the same 2 MiB once, the floor of any
   durable banking. Goal: under 100 ms.
2. ``main_slot_cache_share``: over a scripted day of live turns on the main slot with
   background work interleaved (compaction summaries of other sessions, scheduled turns on
   the background slot), the share of main-slot prompt tokens served from the slot's cache.
   Baselines: the same turns with no background work, and the same background work sent
   to the main slot (what a single-slot agent would do).

    .venv/bin/python benchmarks/compaction.py [--mib 2] [--turns 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tether.checkpoint.bank import bank_window
from tether.config import load_config
from tether.daemon.compose import build_runtime
from tether.files import encode_records, write_atomic
from tether.home import init_home
from tether.records import Assistant, LogRecord, ToolCall, ToolResult, Usage, User
from tether.sessions import Session
from tether.testing.clock import StepClock
from tether.testing.fake_llama import FakeLlama

T0 = datetime(2026, 11, 1, tzinfo=UTC)
PROSE = (
    "We went over the garden plan again: tomatoes along the south fence, beans on the "
    "trellis, and the watering timer set to seven in the morning. The owner wants a "
    "reminder on Fridays to check the soil and order compost before the end of the month. "
)


def window(target_bytes: int) -> list[LogRecord]:
    out: list[LogRecord] = []
    size = 0
    i = 0
    t = T0
    while size < target_bytes:
        t += timedelta(seconds=5)
        k = i % 5
        rec: LogRecord
        if k == 0:
            rec = User(time=t, text=f"{i}: {PROSE}")
        elif k == 1:
            rec = ToolCall(time=t, id=f"c{i}", name="recall", args={"query": "garden plan"})
        elif k == 2:
            rec = ToolResult(
                time=t,
                tool_call_id=f"c{i - 1}",
                content=PROSE * 2,
                class_="memory",
                untrusted=False,
            )
        elif k == 3:
            rec = Assistant(time=t, text=PROSE)
        else:
            rec = Usage(time=t, cache_n=1000, prompt_n=40, predicted_n=60)
        out.append(rec)
        size += len(encode_records([rec]))
        i += 1
    return out


def bench_no_model(mib: float, repeat: int) -> None:
    times: list[float] = []
    floor: list[float] = []
    records = window(int(mib * 1024 * 1024))
    raw = encode_records(records)
    for r in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            init_home(home)
            runtime = build_runtime(home, load_config(home), clock=StepClock())
            session = Session.create(
                home, "bench", baseline=runtime.agent.new_baseline(), slot=0, time=T0
            )
            write_atomic(session.log_path, session.log_path.read_bytes() + raw)
            session = Session.open(home, "bench")
            window_records = [x for x in session.records[1:]]
            start = time.perf_counter()
            report = bank_window(
                home, "bench", window_records, epoch=0, time=T0 + timedelta(days=1, seconds=r)
            )
            baseline = runtime.agent.new_baseline()
            session.end_epoch(
                summary=f"summary\n- {report.link}", baseline=baseline, time=T0 + timedelta(days=1)
            )
            times.append((time.perf_counter() - start) * 1000)
            asyncio.run(runtime.aclose())
            start = time.perf_counter()
            fd = os.open(home / "floor.bin", os.O_WRONLY | os.O_CREAT)
            os.write(fd, raw)
            os.fsync(fd)
            os.close(fd)
            floor.append((time.perf_counter() - start) * 1000)
    med, base = statistics.median(times), statistics.median(floor)
    print(
        json.dumps(
            {
                "figure": "compaction_no_model_ms_p50",
                "value": round(med, 1),
                "max": round(max(times), 1),
                "epoch_bytes": len(raw),
                "records": len(records),
                "baseline": "write+fsync of the same bytes",
                "baseline_value": round(base, 1),
                "ratio": round(med / base, 2),
                "goal": "< 100 ms",
            }
        )
    )


async def _day(fake: FakeLlama, turns: int, mode: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        init_home(home)
        (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 30\n')
        runtime = build_runtime(home, load_config(home), clock=StepClock())
        agent = runtime.agent
        background_slot = 0 if mode == "single_slot" else 1
        try:
            for i in range(turns):
                await agent.run_turn("live", f"turn {i}: {PROSE[: 60 + (i % 7) * 10]}")
                if mode != "no_background" and i % 3 == 2:
                    # Scheduled work of another session, then a compaction of a third.
                    await agent.run_turn(
                        f"job-{i}", f"scheduled check {i}: {PROSE}", slot=background_slot
                    )
                    other = f"other-{i}"
                    await agent.run_turn(
                        other, f"side conversation {i}: {PROSE}", slot=background_slot
                    )
                    await agent.compact_now(other)
            live = Session.open(home, "live")
            usage = [r for n in live.epochs for r in _epoch_usage(home, n)]
            cached = sum(u.cache_n for u in usage)
            total = sum(u.cache_n + u.prompt_n for u in usage)
            return cached / total
        finally:
            await runtime.aclose()


def _epoch_usage(home: Path, epoch: int) -> list[Usage]:
    from tether.files import read_log

    records, _ = read_log(home / "sessions" / "live" / f"{epoch}.jsonl")
    return [r for r in records if isinstance(r, Usage)]


def bench_cache_share(turns: int) -> None:
    shares = {}
    for mode in ("no_background", "with_background", "single_slot"):
        with FakeLlama(n_ctx=262144, parallel=2) as fake:
            shares[mode] = asyncio.run(_day(fake, turns, mode))
    ours = shares["with_background"]
    print(
        json.dumps(
            {
                "figure": "main_slot_cache_share",
                "value": round(ours, 4),
                "turns": turns,
                "baseline": "same turns, no background work",
                "baseline_value": round(shares["no_background"], 4),
                "ratio": round(ours / shares["no_background"], 4),
            }
        )
    )
    print(
        json.dumps(
            {
                "figure": "main_slot_cache_share_single_slot",
                "value": round(shares["single_slot"], 4),
                "note": "the same background work sent to the main slot",
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--turns", type=int, default=60)
    args = parser.parse_args()
    bench_no_model(args.mib, args.repeat)
    bench_cache_share(args.turns)


if __name__ == "__main__":
    main()
