"""How far the approximate graph (``stores/vector_graph.py``) agrees with the exact search,
on real sentence vectors.

The vectors are the model's own for every distinct part of every LongMemEval haystack
(``embed_cache``: 47k parts, all questions' haystacks pooled into one matrix, so each
question searches every haystack at once); the queries are the LongMemEval questions,
embedded by the same model, split into the benchmark's tuning and reporting halves. For
each question and k (10, 50, and 200: the pool recall asks for) the exact search's doc
set is the truth, and the figure is the share of it the graph search returns (recall@k
against exact), mean and worst, per half; latency of both searches beside it. The graph
is built with the product's settings; ``--oversample`` / ``--min-candidates`` try others
(choose on the tuning half).

A synthetic-vector run at 2M vectors (``recall_latency.py --vectors synthetic``) gives
latency at scale but no quality: random vectors have no neighbourhoods for a graph.

    .venv/bin/python -m benchmarks.vector_graph_quality [--oversample 2] [--min-candidates 256]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks.embed_cache import CACHE
from benchmarks.longmemeval_retrieval import DATA, load, split
from tether.llm import embedder
from tether.stores import vector_graph
from tether.stores.vector_graph import VectorGraph
from tether.stores.vector_matrix import VectorMatrix, encode

KS = (10, 50, 200)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--oversample", type=int, default=vector_graph.OVERSAMPLE)
    parser.add_argument("--min-candidates", type=int, default=vector_graph.MIN_CANDIDATES)
    args = parser.parse_args()
    vector_graph.OVERSAMPLE = args.oversample
    vector_graph.MIN_CANDIDATES = args.min_candidates

    data = np.load(args.cache)
    vectors = np.asarray(data["vectors"], dtype=np.float32)
    n = len(vectors)
    codes, scales = [], []
    for v in vectors:
        scale, blob = encode(v)
        codes.append(np.frombuffer(blob, dtype=np.int8))
        scales.append(scale)
    ids = np.arange(1, n + 1, dtype=np.int64)
    exact = VectorMatrix()
    exact.append(ids, ids, np.stack(codes), scales)
    approx = VectorMatrix()
    approx.append(ids, ids, np.stack(codes), scales)
    graph = VectorGraph(exact.dim)
    start = time.perf_counter()
    graph.add(*exact.live_after(0, n))
    build_s = time.perf_counter() - start
    approx.attach_graph(graph)

    questions = load(args.data)
    half_of = split(questions)
    model = embedder.load()
    asked = model.embed([q.question for q in questions])

    got: dict[tuple[str, int], list[float]] = {}
    ms: dict[str, list[float]] = {"exact": [], "graph": []}
    for q, vec in zip(questions, asked, strict=True):
        for k in KS:
            t = time.perf_counter()
            truth = {d for d, _ in exact.nearest(vec, k)}
            ms["exact"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            found = {d for d, _ in approx.nearest(vec, k)}
            ms["graph"].append((time.perf_counter() - t) * 1000)
            got.setdefault((half_of[q.question_id], k), []).append(len(truth & found) / len(truth))
    print(
        json.dumps(
            {
                "figure": "vector_graph_build",
                "vectors": n,
                "s": round(build_s, 1),
                "per_s": round(n / build_s),
                "oversample": args.oversample,
                "min_candidates": args.min_candidates,
            }
        )
    )
    for (half, k), shares in sorted(got.items()):
        print(
            json.dumps(
                {
                    "figure": "graph_recall_vs_exact",
                    "half": half,
                    "k": k,
                    "mean": round(float(np.mean(shares)), 4),
                    "worst": round(float(np.min(shares)), 3),
                    "questions": len(shares),
                }
            )
        )
    for name, values in ms.items():
        print(
            json.dumps(
                {
                    "figure": f"nearest_ms_{name}",
                    "p50": round(float(np.percentile(values, 50)), 2),
                    "p99": round(float(np.percentile(values, 99)), 2),
                    "vectors": n,
                }
            )
        )


if __name__ == "__main__":
    main()
