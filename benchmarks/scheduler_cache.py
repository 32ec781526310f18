"""Live turns on the main slot with the scheduler running against the same turns with it
off, in the same run: main-slot cache share and added latency.

The scheduler runs a heartbeat every second, a cron job and tool-output summaries (every
third live turn fetches a page over HTTP). The fake llama server answers every request
after ``--latency`` seconds plus ``--per-token`` seconds per prompt token not served
from the slot's cache, so background requests really occupy the background slot and a
cold prefix really costs time. Slots run concurrently, as on llama-server with ``-np 2``,
and the fake runs in a child process, as a real server would.

The scheduler's clock runs ``--speed`` times faster than the wall so that the cron job
("* * * * *") fires every few seconds rather than once a minute; the heartbeat's
``every_s`` is scaled to match one beat per wall second. The benchmark drives
``Scheduler.tick()`` every 50 ms itself (the daemon's loop sleeps on wall time).
Blocks with the scheduler off and on alternate, each on a fresh home and session, so
drift on a noisy machine hits both alike.

Goal (issue 5): no loss of main-slot cache share, under 5% added median latency.

    .venv/bin/python benchmarks/scheduler_cache.py [--rounds 5] [--turns 60]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from tether.config import load_config
from tether.daemon.compose import build_runtime, build_scheduler
from tether.home import init_home
from tether.records import ToolSummary
from tether.scheduler import load_jobs
from tether.scheduler.ledger import RunLedger
from tether.sessions import Session

#: The fake runs in a child process: in this one its prompt rendering would compete with
#: the daemon's event loop for the GIL, which a real llama-server never does.
FAKE = """
import sys
from tether.testing.fake_llama import FakeLlama
latency, per_token = float(sys.argv[1]), float(sys.argv[2])
with FakeLlama(n_ctx=32768, parallel=2, latency_s=latency, prefill_s_per_token=per_token) as f:
    print(f.url, flush=True)
    sys.stdin.read()
"""
PAGE = ("<p>The harbour ferry timetable changes on the first of the month. " * 30).encode()
TICK_S = 0.05


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def web() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/timetable"
    finally:
        server.shutdown()
        server.server_close()


class Fake:
    """The fake llama server in a child process, scripted and read over HTTP."""

    def __init__(self, latency: float, per_token: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FAKE, str(latency), str(per_token)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        self.http = httpx.AsyncClient(base_url=self.url, timeout=30)

    async def script(self, slot: int, **reply: Any) -> None:
        resp = await self.http.post("/fake/script", json={**reply, "slot": slot})
        resp.raise_for_status()

    async def requests(self) -> list[dict[str, Any]]:
        resp = await self.http.get("/fake/requests")
        resp.raise_for_status()
        body: list[dict[str, Any]] = resp.json()
        return body

    async def close(self) -> None:
        await self.http.aclose()
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


class ScaledClock:
    """UTC time running ``speed`` times faster than the wall from the moment it is made."""

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self.start = datetime.now(UTC)
        self.t0 = time.monotonic()

    def now(self) -> datetime:
        return self.start + timedelta(seconds=(time.monotonic() - self.t0) * self.speed)


@dataclass
class Block:
    latencies_ms: list[float] = field(default_factory=list)
    cache_n: int = 0
    prompt_n: int = 0
    heartbeats: int = 0
    cron_runs: int = 0
    summaries: int = 0


async def run_block(fake: Fake, url: str, *, turns: int, scheduler_on: bool, speed: float) -> Block:
    with tempfile.TemporaryDirectory(prefix="thb", dir="/tmp") as tmp:
        home = Path(tmp)
        init_home(home)
        every = max(1, round(speed))  # one beat per wall second
        (home / "tether.toml").write_text(
            f'[llm]\nurl = "{fake.url}"\ntimeout_s = 30\n[expect]\nn_ctx = 32768\n'
            f"[heartbeat]\nevery_s = {every if scheduler_on else 0}\n"
            # The page is on loopback, which http_fetch refuses unless the owner allows it.
            f'[tools]\nfetch_allow = ["{url.split("/")[2]}"]\n'
        )
        if scheduler_on:
            (home / "jobs" / "brief.toml").write_text(
                'schedule = "* * * * *"\nprompt = "Write a one-line brief of open notes."\n'
            )
        runtime = build_runtime(home, load_config(home), clock=ScaledClock(speed))
        block = Block()
        stop = asyncio.Event()
        driver: asyncio.Task[None] | None = None
        scheduler = None
        if scheduler_on:
            scheduler = build_scheduler(runtime, load_jobs(home))
            scheduler.recover()

            async def drive() -> None:
                assert scheduler is not None
                while not stop.is_set():
                    scheduler.tick()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), TICK_S)

            driver = asyncio.create_task(drive())
            await asyncio.sleep(1.0)  # let background work get going before measuring
        try:
            for i in range(turns):
                if i % 3 == 2:
                    await fake.script(0, tool_calls=[["http_fetch", {"url": url}]])
                    await fake.script(0, content=f"Read the timetable ({i}).")
                started = time.perf_counter()
                done = await runtime.agent.run_turn("mm-live", f"live message number {i}")
                block.latencies_ms.append((time.perf_counter() - started) * 1000)
                assert done.usage is not None
                assert done.slot == 0
                block.cache_n += done.usage.cache_n
                block.prompt_n += done.usage.prompt_n
        finally:
            stop.set()
            if driver is not None:
                await driver
            if scheduler is not None:
                await scheduler.stop(grace_s=30)
            await runtime.aclose()
        if scheduler_on:
            with contextlib.suppress(Exception):
                block.heartbeats = Session.open(home, "heartbeat").turns()
            block.cron_runs = sum(r.status == "finished" for r in RunLedger(home).read())
            block.summaries = sum(
                isinstance(r, ToolSummary) for r in Session.open(home, "mm-live").records
            )
        return block


def share(blocks: list[Block]) -> float:
    cache = sum(b.cache_n for b in blocks)
    total = cache + sum(b.prompt_n for b in blocks)
    return cache / total if total else 0.0


async def main_async(args: argparse.Namespace) -> None:
    fake = Fake(args.latency, args.per_token)
    try:
        with web() as url:
            off: list[Block] = []
            on: list[Block] = []
            # Warm-up, not counted: afterwards every block starts with the main slot holding
            # the previous block's prefix (same system prompt and tools), on and off alike.
            await run_block(fake, url, turns=3, scheduler_on=False, speed=1)
            for _ in range(args.rounds):
                off.append(
                    await run_block(fake, url, turns=args.turns, scheduler_on=False, speed=1)
                )
                on.append(
                    await run_block(
                        fake, url, turns=args.turns, scheduler_on=True, speed=args.speed
                    )
                )
        requests = await fake.requests()
    finally:
        await fake.close()
    background = [r for r in requests if r["slot"] == 1]
    live = [r for r in requests if str(r["messages"][-1].get("content", "")).startswith("live")]
    assert {r["slot"] for r in live} == {0}, "a live turn left the main slot"
    lat_off = [x for b in off for x in b.latencies_ms]
    lat_on = [x for b in on for x in b.latencies_ms]
    med_off, med_on = statistics.median(lat_off), statistics.median(lat_on)
    p90_off = statistics.quantiles(lat_off, n=10)[-1]
    p90_on = statistics.quantiles(lat_on, n=10)[-1]
    common = {
        "rounds": args.rounds,
        "turns_per_block": args.turns,
        "fake_latency_s": args.latency,
        "fake_prefill_s_per_token": args.per_token,
    }
    share_off, share_on = share(off), share(on)
    print(
        json.dumps(
            {
                "figure": "main_cache_share",
                "value": round(share_on, 4),
                "baseline": "same turns, scheduler off",
                "baseline_value": round(share_off, 4),
                "loss": round(share_off - share_on, 4),
                "goal": "no loss",
                **common,
            }
        )
    )
    added = (med_on - med_off) / med_off * 100
    print(
        json.dumps(
            {
                "figure": "main_turn_latency_ms_p50",
                "value": round(med_on, 2),
                "baseline": "same turns, scheduler off",
                "baseline_value": round(med_off, 2),
                "added_pct": round(added, 2),
                "added_ms": round(med_on - med_off, 2),
                "goal": "< 5% added",
                **common,
            }
        )
    )
    print(
        json.dumps(
            {
                "figure": "main_turn_latency_ms_p90",
                "value": round(p90_on, 2),
                "baseline_value": round(p90_off, 2),
                "added_pct": round((p90_on - p90_off) / p90_off * 100, 2),
            }
        )
    )
    print(
        json.dumps(
            {
                "figure": "background_work_during_on_blocks",
                "heartbeats": sum(b.heartbeats for b in on),
                "cron_runs": sum(b.cron_runs for b in on),
                "tool_summaries": sum(b.summaries for b in on),
                "background_requests": len(background),
                "live_turns": len(lat_on),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--latency", type=float, default=0.03)
    parser.add_argument("--per-token", type=float, default=0.00002)
    parser.add_argument("--speed", type=float, default=30.0)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
