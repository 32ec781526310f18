"""The budget gate's cost per background call, beside the same call without it, same run.

A background call is a completion on the background slot of the fake llama server (a
real HTTP server in a child process, as llama-server would be) whose prompt is a standing
session that grows by one exchange a call, like the heartbeat's, and starts again from
its system prompt when it reaches the compaction threshold (0.85 of 32768 tokens), as
compaction would make it. Calls with and without
the gate alternate, so drift on a noisy machine hits both alike. The gate's own cost
(``BudgetGate.bound`` + ``reserve`` before the call, ``settle`` after: the prompt count
and two SQLite transactions on the home's ``tether.db``) is timed by itself too, and its
check alone (count + reserve: what delays the call; the settle runs once the answer is in), with a
ledger that already holds ``--prefill`` calls of the day (86 400 is a heartbeat a second
for a whole day), so the figure is the one a long day ends with.

Goal (issue 23): the gate under 1 ms p99 per call. Issue 17 made it one write per call (a
settle rides in the next reservation's transaction); a third arm, alternating with the
other two, runs the same gate with each settle written at once (``flush`` right after
``settle``: two writes a call, as before), so both are measured in the same run.

    .venv/bin/python benchmarks/budget_gate.py [--calls 400] [--prefill 86400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tether.agent.budget import BudgetGate
from tether.config import BudgetConfig, KindBudget, load_config
from tether.home import init_home
from tether.llm.llama_server import LlamaServerClient
from tether.ports import Store
from tether.records import ChatMessage, Completion, CompletionRequest, SpendRow
from tether.stores import open_store

FAKE = """
import sys
from tether.testing.fake_llama import FakeLlama
with FakeLlama(n_ctx=65536, parallel=2) as f:
    print(f.url, flush=True)
    sys.stdin.read()
"""
SYSTEM = "You are the owner's agent. Keep notes short and useful. " * 60
THRESHOLD = int(0.85 * 32768)
EXCHANGE = "It is Monday 2026-11-02 03:00 UTC. Anything that needs me? Nothing new since then. "


class Clock:
    def __init__(self) -> None:
        self.current = datetime(2026, 11, 2, 3, 0, tzinfo=UTC)

    def now(self) -> datetime:
        self.current += timedelta(milliseconds=10)
        return self.current


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def figures(name: str, ms: list[float], **extra: object) -> None:
    print(
        json.dumps(
            {
                "figure": name,
                "n": len(ms),
                "p50_ms": round(statistics.median(ms), 4),
                "p99_ms": round(pct(ms, 0.99), 4),
                **extra,
            }
        )
    )


def prefill(store: Store, day: str, n: int) -> None:
    """``n`` settled calls already in the day's ledger, written as the gate writes them."""
    started = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
    for i in range(n):
        row = SpendRow(
            time=started + timedelta(seconds=i % 86_400),
            day=day,
            kind="heartbeat",
            session="heartbeat",
            state="reserved",
            bound_tokens=1500,
            bound_usd=0.0,
        )
        stored = store.budget_reserve(row, lambda _spent: None)
        store.budget_settle(stored.id, tokens=1400, usd=0.0, prompt_n=1390, predicted_n=10)


async def run(calls: int, prefilled: int) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", FAKE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    url = child.stdout.readline().strip()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        init_home(home)
        store = open_store(home, load_config(home))
        clock = Clock()
        t0 = time.perf_counter()
        prefill(store, "2026-11-02", prefilled)
        print(
            json.dumps(
                {
                    "figure": "prefill",
                    "rows": prefilled,
                    "s": round(time.perf_counter() - t0, 2),
                }
            )
        )
        # Caps that every call passes: the full check runs, nothing is refused.
        config = BudgetConfig(
            day_usd=1000.0,
            usd_per_mtok_in=3.0,
            usd_per_mtok_out=15.0,
            usd_per_mtok_cached=0.3,
            heartbeat=KindBudget(call_tokens=60_000, day_tokens=10**12),
        )
        gate = BudgetGate(config=config, store=store, clock=clock, zone=UTC, telemetry=None)
        twice = BudgetGate(config=config, store=store, clock=clock, zone=UTC, telemetry=None)
        llm = LlamaServerClient(url, timeout_s=30)
        messages = [ChatMessage(role="system", content=SYSTEM)]
        plain: list[float] = []
        gated: list[float] = []
        gate_only: list[float] = []
        two_writes: list[float] = []
        counting: list[float] = []
        checks: list[float] = []
        longest = 0
        try:
            for i in range(calls * 3):
                messages.append(ChatMessage(role="user", content=f"{EXCHANGE}#{i}"))
                request = CompletionRequest(messages=tuple(messages), slot=1, max_tokens=16)
                arm = i % 3  # 0: no gate, 1: the gate, 2: the gate writing each settle at once
                with_gate = arm != 0
                using = gate if arm == 1 else twice
                start = time.perf_counter()
                spent = 0.0
                if with_gate:
                    g = time.perf_counter()
                    bound = using.bound(request, 16)
                    counted = time.perf_counter()
                    reservation = using.reserve("heartbeat", "heartbeat", bound)
                    spent += time.perf_counter() - g
                    if arm == 1:
                        checks.append(spent * 1000)
                        counting.append((counted - g) * 1000)
                done: Completion = await llm.complete(request)
                if with_gate:
                    g = time.perf_counter()
                    using.settle(reservation, done)
                    if arm == 2:
                        using.flush()
                    spent += time.perf_counter() - g
                elapsed = (time.perf_counter() - start) * 1000
                if arm == 0:
                    plain.append(elapsed)
                elif arm == 1:
                    gated.append(elapsed)
                    gate_only.append(spent * 1000)
                else:
                    two_writes.append(spent * 1000)
                messages.append(ChatMessage(role="assistant", content=done.content))
                longest = max(longest, len(messages))
                if done.cache_n + done.prompt_n >= THRESHOLD:
                    messages = messages[:1]  # compacted: the next epoch starts again
        finally:
            await llm.aclose()
            gate.flush()
            store.close()
            assert child.stdin is not None
            child.stdin.close()
            child.wait(timeout=10)
    figures("call_without_gate", plain)
    figures("call_with_gate", gated)
    figures(
        "gate_per_call",
        gate_only,
        goal_p99_ms=1.0,
        ledger_rows=prefilled + 2 * calls,
        longest_prompt_messages=longest,
    )
    figures("gate_per_call_two_writes", two_writes)
    figures("gate_check_before_call", checks)
    figures("gate_prompt_count", counting)
    print(
        json.dumps(
            {
                "figure": "ratio_with_to_without",
                "p50": round(statistics.median(gated) / statistics.median(plain), 3),
                "p99": round(pct(gated, 0.99) / pct(plain, 0.99), 3),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400, help="calls with the gate (and without)")
    parser.add_argument("--prefill", type=int, default=86_400, help="ledger rows of the day")
    args = parser.parse_args()
    asyncio.run(run(args.calls, args.prefill))


if __name__ == "__main__":
    main()
