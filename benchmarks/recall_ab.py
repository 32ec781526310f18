"""Fused recall latency of two checkouts on one kept home, at the same moments.

Two worker processes, one importing tether from ``--base`` (a copy of main's ``src``) and
one from this checkout's ``src``, open the same home that ``recall_latency.py --vectors
synthetic --keep DIR`` built and ask the same questions (its generator, its seed), in
blocks that alternate between them (ABBA: who goes first swaps every round), so the
load of a shared machine falls on both alike. Each worker warms up on the first 20
questions, then forgets the question vectors it kept (a checkout that keeps them: the
timed questions are asked for the first time); then the same blocks are asked again,
timed apart ("asked again": what a kept question vector saves).

Prints one JSON line per side and figure: p50 / p99 wall ms of a fused ``recall`` (k 5,
query embedding included), the p50 CPU ms of the process (every thread), the median over
blocks of the branch's block median to the base's (the pairs ran back to back: less
swayed by the load's swings than the pooled percentiles), and the load average. With
``--dump-hits PREFIX`` each side also writes ``recall_latency.dump_hits`` to
``PREFIX.base`` / ``PREFIX.branch`` (untimed) for ``benchmarks/same_hits.py``.

    PYTHONPATH=src:. nice -n 10 .venv/bin/python benchmarks/recall_ab.py \\
        --keep DIR --turns 100000 --base /path/to/main/src [--queries 200] [--block 20] \\
        [--graph-from N] [--dump-hits PREFIX]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from benchmarks.recall_latency import T0, Corpus, K, emit, make_queries, percentile

ROOT = Path(__file__).resolve().parent.parent


def worker(keep: Path, turns: int, queries: int, seed: int, graph_from: int | None) -> None:
    """Answer the driver's lines on stdin (``{"from": i, "to": j}``: time those questions;
    ``{"dump": path}``: write their hits) with one JSON line each on stdout."""
    from benchmarks.recall_latency import dump_hits
    from tether.llm import embedder
    from tether.memory.recall import recall
    from tether.memory.vectors import Vectors
    from tether.stores.sqlite import SqliteStore
    from tether.stores.sqlite.vectors import SqliteVectors
    from tether.stores.vector_graph import GRAPH_FROM

    home = keep / f"home-{turns}"
    src = keep / f"import-{turns}.jsonl"
    users = [json.loads(line)["text"] for line in src.open() if '"role": "user"' in line]
    questions = list(make_queries(Corpus(seed), users, queries))
    store = SqliteStore(home / "tether.db")
    index = (
        SqliteVectors(home / "tether.db")
        if graph_from is None
        else SqliteVectors(home / "tether.db", graph_from=graph_from)
    )
    vectors = Vectors(embedder.load(), index)
    if not vectors.complete:
        raise SystemExit(f"{home}: not every row has a vector")
    for q, _, _ in questions[:20]:
        recall(store, q, K, time=T0, vectors=vectors)
    forget = getattr(vectors, "forget_asked", None)  # (a checkout that keeps them)
    if forget is not None:
        forget()
    out = sys.stdout
    threshold = GRAPH_FROM if graph_from is None else graph_from
    graph = index.graph_file(vectors.model).exists() and vectors.counts.done >= threshold
    _say(out, {"ready": True, "graph": graph, "vectors": vectors.counts.done})
    for line in sys.stdin:
        ask = json.loads(line)
        if "dump" in ask:
            dump_hits(Path(ask["dump"]), store, vectors, questions)
            _say(out, {"dumped": ask["dump"]})
            continue
        wall: list[float] = []
        cpu: list[float] = []
        for q, _, _ in questions[ask["from"] : ask["to"]]:
            c0, w0 = time.process_time(), time.perf_counter()
            recall(store, q, K, time=T0, vectors=vectors)
            wall.append((time.perf_counter() - w0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
        _say(out, {"wall": wall, "cpu": cpu})
    index.close()
    store.close()


def _say(out: IO[str], line: dict[str, Any]) -> None:
    out.write(json.dumps(line) + "\n")
    out.flush()


class Side:
    def __init__(self, name: str, src: Path, argv: list[str]) -> None:
        env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{ROOT}")
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.recall_ab", "--worker", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        self.ready = self.ask(None)
        self.wall: dict[str, list[float]] = {"first": [], "again": []}
        self.cpu: dict[str, list[float]] = {"first": [], "again": []}

    def ask(self, line: dict[str, Any] | None) -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        if line is not None:
            self.proc.stdin.write(json.dumps(line) + "\n")
            self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise SystemExit(f"the {self.name} worker stopped")
        got: dict[str, Any] = json.loads(answer)
        return got

    def run(self, start: int, stop: int, phase: str) -> float:
        """Time questions ``start:stop``; their median wall ms."""
        got = self.ask({"from": start, "to": stop})
        self.wall[phase] += got["wall"]
        self.cpu[phase] += got["cpu"]
        return percentile(got["wall"], 50)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", type=Path, required=True)
    parser.add_argument("--turns", type=int, required=True)
    parser.add_argument("--base", type=Path, help="the src folder of the checkout to compare")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--block", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--graph-from", type=int, default=None)
    parser.add_argument("--dump-hits", type=Path, default=None)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.keep, args.turns, args.queries, args.seed, args.graph_from)
        return
    if args.base is None:
        parser.error("--base is required")
    argv = [f"--keep={args.keep}", f"--turns={args.turns}", f"--queries={args.queries}"]
    argv += [f"--seed={args.seed}"]
    if args.graph_from is not None:
        argv.append(f"--graph-from={args.graph_from}")
    sides = [Side("base", args.base.resolve(), argv), Side("branch", ROOT / "src", argv)]
    try:
        blocks = [
            (s, min(s + args.block, args.queries)) for s in range(0, args.queries, args.block)
        ]
        loads = [os.getloadavg()[0]]
        ratios: dict[str, list[float]] = {"first": [], "again": []}
        for phase in ("first", "again"):
            for i, (start, stop) in enumerate(blocks):
                took = {
                    side.name: side.run(start, stop, phase)
                    for side in (sides if i % 2 == 0 else sides[::-1])
                }
                ratios[phase].append(took["branch"] / took["base"])
                loads.append(os.getloadavg()[0])
        if args.dump_hits is not None:
            for side in sides:
                side.ask({"dump": str(args.dump_hits.with_suffix(f".{side.name}"))})
        for side in sides:
            for phase in ("first", "again"):
                wall, cpu = side.wall[phase], side.cpu[phase]
                emit(
                    figure="recall_vectors_ab_ms",
                    side=side.name,
                    asked=phase,
                    turns=args.turns,
                    queries=len(wall),
                    p50=round(percentile(wall, 50), 2),
                    p99=round(percentile(wall, 99), 2),
                    cpu_p50=round(percentile(cpu, 50), 2),
                    graph=side.ready["graph"],
                    branch_to_base_block_p50=round(percentile(ratios[phase], 50), 3),
                    vectors=side.ready["vectors"],
                    load=round(sum(loads) / len(loads), 1),
                )
    finally:
        for side in sides:
            side.close()


if __name__ == "__main__":
    main()
