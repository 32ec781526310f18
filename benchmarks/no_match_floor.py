"""What a question related to nothing finds by vector: the nearest cosine of off-topic
questions in real haystacks, beside the cosine of real questions' evidence.

``core.recall.ranking.NO_MATCH_COSINE`` is the cosine a turn needs to be recalled when the
question's words found nothing. This measures both sides of that floor with the
LongMemEval_S haystacks of the tuning half (``longmemeval_retrieval.split``):

- ``off_topic``: for each of a fixed list of questions about things no haystack talks
  about (and strings of nonsense), its nearest cosine over every part of the owner's
  and the assistant's messages of each haystack (``vectors.parts``, as recall embeds
  them): the floor must be above these;
- ``evidence``: for each tuning question, the best cosine of its evidence turns (the
  owner's messages holding the answer): what the floor would cost a question whose
  words all missed.

Vectors through ``embed_cache`` (not saved: a run beside the LongMemEval one must not
race its cache file).

    PYTHONPATH=src:. nice -n 10 .venv/bin/python benchmarks/no_match_floor.py [--haystacks 6]
"""

from __future__ import annotations

import argparse
import json
import statistics

import numpy as np

from benchmarks.embed_cache import CachedEmbedder
from benchmarks.longmemeval_retrieval import DATA, asks_time, load, split
from tether.memory.vectors import parts

OFF_TOPIC = (
    "zebrafish migration",
    "quantum chromodynamics lattice gauge",
    "the tax policy of the Byzantine empire",
    "xyzzy plugh",
    "asdf qwer zxcv",
    "what is the airspeed velocity of an unladen swallow",
    "mitochondrial DNA of tardigrades",
    "who won the 1954 curling championship in Reykjavik",
    "kernel panic in the frobnicator driver",
    "lorem ipsum dolor sit amet",
)
FLOORS = (0.2, 0.25, 0.3, 0.35, 0.4)


def unit(m: np.ndarray) -> np.ndarray:
    out: np.ndarray = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--haystacks", type=int, default=6)
    args = parser.parse_args()
    questions = load(DATA)
    half = split(questions)
    tune = [
        q for q in questions if half[q.question_id] == "tune" and not q.question_id.endswith("_abs")
    ]
    embedder = CachedEmbedder(threads=1)
    off = unit(embedder.embed(list(OFF_TOPIC)))
    nearest: list[float] = []
    # The haystacks of questions about time first: ``longmemeval_retrieval --timed`` has
    # them in the cache.
    for q in sorted(tune, key=lambda q: not asks_time(q))[: args.haystacks]:
        texts = [
            p
            for session in q.haystack_sessions
            for m in session
            for p in parts(m.content, "user" if m.role == "user" else "assistant")
        ]
        matrix = unit(embedder.embed(texts))
        nearest.extend(float(x) for x in (off @ matrix.T).max(axis=1))
    evidence: list[float] = []
    for q in tune:
        gold = [
            p
            for session in q.haystack_sessions
            for m in session
            if m.role == "user" and m.has_answer
            for p in parts(m.content, "user")
        ]
        if not gold:
            continue
        ask = unit(embedder.embed([q.question]))
        evidence.append(float((ask @ unit(embedder.embed(gold)).T).max()))
    for name, values in (("off_topic", nearest), ("evidence", evidence)):
        print(
            json.dumps(
                {
                    "figure": name,
                    "n": len(values),
                    "max": round(max(values), 3),
                    "median": round(statistics.median(values), 3),
                    "min": round(min(values), 3),
                    "share_at_least": {
                        f: round(sum(v >= f for v in values) / len(values), 3) for f in FLOORS
                    },
                }
            )
        )


if __name__ == "__main__":
    main()
