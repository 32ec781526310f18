"""`tether mcp`: recall round trips over stdio and streamable HTTP beside the same recall
in process, and the start-up time of the server to its first answered `initialize`.

The home is built as ``recall_latency.py`` builds its own (pseudo-English sessions,
seeded) with ``--turns`` turns, plus ``--pages`` world pages made of the same words, so a
remote client (world pages and facts only) has something to find. Both servers run as
real child processes (`python -m tether.cli.main --home H mcp [--http --port 0]`),
driven by the SDK's own client. Baselines, measured in the same run on the same store and
queries: ``Memory.recall`` in process, for the local caller (what stdio runs) and for a
remote caller (what HTTP runs). Each figure prints p50, p99 and the ratio over its
baseline; the goal is a p50 within 5 ms of in process.

    .venv/bin/python -m benchmarks.mcp_roundtrip [--turns 100000] [--queries 200] [--pages 200]
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
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path

import httpx2
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from benchmarks.recall_latency import T0, Corpus, make_queries, percentile, write_import
from tether.config import Config
from tether.home import init_home
from tether.imports.jsonl import import_jsonl
from tether.mcp.service import Caller, Memory
from tether.mcp.tokens import create_token
from tether.memory.pages import write_page
from tether.scan.screen import screen
from tether.stores.sqlite import SqliteStore

TETHER = [sys.executable, "-m", "tether.cli.main"]
K = 5
STARTS = 5


def emit(**figure: object) -> None:
    print(json.dumps(figure), flush=True)


def build(home: Path, turns: int, pages: int, seed: int) -> list[str]:
    corpus = Corpus(seed)
    init_home(home)
    src = home.parent / "import.jsonl"
    users = write_import(src, corpus, turns, 50)
    store = SqliteStore(home / "tether.db")
    import_jsonl(home, src, now=T0, config=Config(), store=lambda: nullcontext(store))
    for i in range(pages):
        body = " ".join(corpus.sentence(20, 60) for _ in range(3))
        write_page(
            store,
            f"topics/p{i}",
            screen(body, what="page", allow=frozenset(), on_secret="redact"),
            title=None,
            tags=(),
            visibility="world",
            untrusted=False,
            who="owner",
            session=None,
            time=T0,
        )
    store.close()
    return [q for q, _, _ in make_queries(corpus, users, 10_000)]


def summary(name: str, values: list[float], base: list[float], **more: object) -> None:
    p50, b50 = percentile(values, 50), percentile(base, 50)
    emit(
        figure=name,
        p50_ms=round(p50, 2),
        p99_ms=round(percentile(values, 99), 2),
        baseline_p50_ms=round(b50, 2),
        baseline_p99_ms=round(percentile(base, 99), 2),
        overhead_p50_ms=round(p50 - b50, 2),
        ratio_p50=round(p50 / b50, 2) if b50 else None,
        goal="p50 within 5 ms of in process",
        met=p50 - b50 <= 5.0,
        **more,
    )


def in_process(home: Path, caller: Caller, queries: list[str]) -> list[float]:
    store = SqliteStore(home / "tether.db")
    memory = Memory(home, store, None, result_tokens=1200, now=lambda: datetime.now(UTC))
    out = []
    for q in queries:
        start = time.perf_counter()
        memory.recall(caller, q, K, "turns")
        out.append((time.perf_counter() - start) * 1000)
    store.close()
    return out


async def over(session: ClientSession, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        start = time.perf_counter()
        result = await session.call_tool("recall", {"query": q, "k": K})
        out.append((time.perf_counter() - start) * 1000)
        assert not result.is_error, result
    return out


async def stdio_run(home: Path, job: Callable[[ClientSession], Awaitable[object]]) -> float:
    """Start `tether mcp`, time it to the first answered initialize, then run ``job``."""
    params = StdioServerParameters(
        command=TETHER[0], args=[*TETHER[1:], "--home", str(home), "mcp"]
    )
    start = time.perf_counter()
    with open("/dev/null", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            ready = (time.perf_counter() - start) * 1000
            await job(s)
    return ready


@contextlib.contextmanager
def http_server(home: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [*TETHER, "--home", str(home), "mcp", "--http", "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def url_of(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    while True:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError("tether mcp --http exited before it listened")
        if "serving " in line:
            return line.split("serving ", 1)[1].strip()


async def http_run(
    url: str, token: str, job: Callable[[ClientSession], Awaitable[object]]
) -> float:
    headers = {"Authorization": f"Bearer {token}"}
    start = time.perf_counter()
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as client,
        streamable_http_client(url, http_client=client) as (r, w),
        ClientSession(r, w) as s,
    ):
        await s.initialize()
        ready = (time.perf_counter() - start) * 1000
        await job(s)
    return ready


async def bench(home: Path, queries: list[str], turns: int) -> None:
    local = in_process(home, Caller("local", trusted=True), queries)
    remote = in_process(home, Caller("remote", token="t-bench"), queries)
    stdio_ms: list[float] = []

    async def run_stdio(s: ClientSession) -> None:
        await over(s, queries[:10])  # warm the child's caches as in process was warmed
        stdio_ms.extend(await over(s, queries))

    await stdio_run(home, run_stdio)
    summary("recall_stdio_roundtrip_ms", stdio_ms, local, turns=turns, queries=len(queries))

    async def nothing(_: ClientSession) -> None:
        return None

    starts = [await stdio_run(home, nothing) for _ in range(STARTS)]
    emit(
        figure="stdio_start_to_initialize_ms",
        p50_ms=round(statistics.median(starts), 1),
        max_ms=round(max(starts), 1),
        runs=STARTS,
        includes="python start, imports (the SDK, pydantic), opening the store",
    )

    token, _ = create_token(home, "bench", time=datetime.now(UTC))
    http_ms: list[float] = []

    async def run_http(s: ClientSession) -> None:
        await over(s, queries[:10])
        http_ms.extend(await over(s, queries))

    with http_server(home) as proc:
        url = url_of(proc)
        await http_run(url, token, run_http)
    summary("recall_http_roundtrip_ms", http_ms, remote, turns=turns, queries=len(queries))

    http_starts = []
    for _ in range(STARTS):
        start = time.perf_counter()
        with http_server(home) as proc:
            url = url_of(proc)
            await http_run(url, token, nothing)
            http_starts.append((time.perf_counter() - start) * 1000)
    emit(
        figure="http_start_to_initialize_ms",
        p50_ms=round(statistics.median(http_starts), 1),
        max_ms=round(max(http_starts), 1),
        runs=STARTS,
        includes="python start, imports, store, bind, then a client's initialize",
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tether-bench-mcp-") as tmp:
        home = Path(tmp) / "home"
        start = time.perf_counter()
        queries = build(home, args.turns, args.pages, args.seed)[: args.queries]
        emit(
            figure="build_s",
            turns=args.turns,
            pages=args.pages,
            value=round(time.perf_counter() - start, 1),
        )
        asyncio.run(bench(home, queries, args.turns))


if __name__ == "__main__":
    main()
