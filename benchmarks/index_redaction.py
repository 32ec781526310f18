"""What redacting every indexed row costs the index pass.

Since rows are indexed secret-redacted (``tether.memory.indexer``), an index pass scans
each row's text with ``tether.scan``. This measures a full pass (``reindex``: drop the
index, build it again from the session logs), three ways in the same run, alternated so
machine noise falls on all; medians of ``--runs``:

- ``redacted``: as the indexer does it (``redact_many``: a log's new rows scanned joined,
  and only the rows a hit touches redacted alone);
- ``per_row``: each row redacted on its own (``redact``), the first way it was done;
- ``plain`` (baseline): no scan at all, what the pass did before rows were redacted.

Two homes: ``long``, the haystacks of the first ``--questions`` LongMemEval questions
(rows of about 1,000 characters), and ``short``, the same number of turns as one-line
chat ("ok, see you at 6").

    .venv/bin/python benchmarks/index_redaction.py [--questions 20] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from tether.home import init_home
from tether.imports.jsonl import import_jsonl
from tether.memory import indexer
from tether.memory.indexer import reindex
from tether.scan.secrets import redact, redact_many
from tether.stores.sqlite import SqliteStore

DATA = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "bench-data"
    / "longmemeval"
    / "longmemeval_s_subset100.json"
)
SHORT = ["ok", "thanks!", "see you at 6", "sounds good", "which one?", "yes, the blue one"]

Scan = Callable[..., list[str]]


def _per_row(texts: Sequence[str], *, allow: frozenset[str] = frozenset()) -> list[str]:
    return [redact(t, allow=allow).text for t in texts]


def _unscanned(texts: Sequence[str], *, allow: frozenset[str] = frozenset()) -> list[str]:
    del allow
    return list(texts)


WAYS: tuple[tuple[str, Scan], ...] = (
    ("redacted", redact_many),
    ("per_row", _per_row),
    ("plain", _unscanned),
)


def _build(home: Path, questions: int, *, short: bool) -> int:
    """A home of the first ``questions`` haystacks (or as many one-line turns); turns."""
    init_home(home)
    rnd = random.Random(7)
    src = home.parent / f"{home.name}.jsonl"
    with src.open("w", encoding="utf-8") as out:
        for n, q in enumerate(json.loads(DATA.read_text(encoding="utf-8"))[:questions]):
            for k, messages in enumerate(q["haystack_sessions"]):
                for pos, m in enumerate(messages):
                    line = {
                        "session": f"q{n:03d}-s{k:03d}",
                        "role": m["role"],
                        "text": rnd.choice(SHORT) if short else m["content"],
                        "time": f"2024-01-01T00:{pos // 60:02d}:{pos % 60:02d}Z",
                    }
                    out.write(json.dumps(line) + "\n")
    now = datetime(2026, 11, 29, tzinfo=UTC)
    return import_jsonl(
        home, src, now=now, store=lambda: closing(SqliteStore(home / "tether.db"))
    ).turns


def _pass(home: Path) -> tuple[float, int]:
    store = SqliteStore(home / "tether.db")
    try:
        start = time.perf_counter()
        done = reindex(home, store)
        return time.perf_counter() - start, done.rows
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for kind in ("long", "short"):
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / kind
            turns = _build(home, args.questions, short=kind == "short")
            times: dict[str, list[float]] = {name: [] for name, _ in WAYS}
            rows = 0
            for _ in range(args.runs):
                for name, scan in WAYS:
                    # The one swap the comparison needs: the indexer's scan, by name.
                    vars(indexer)["redact_many"] = scan
                    took, rows = _pass(home)
                    times[name].append(took)
            vars(indexer)["redact_many"] = redact_many
        ms = {name: statistics.median(t) * 1000 for name, t in times.items()}
        result = {
            "benchmark": "index_redaction",
            "rows_kind": kind,
            "turns": turns,
            "rows": rows,
            "runs": args.runs,
            "redacted_ms": round(ms["redacted"], 1),
            "per_row_ms": round(ms["per_row"], 1),
            "plain_ms": round(ms["plain"], 1),
            "ratio": round(ms["redacted"] / ms["plain"], 3),
            "per_row_ratio": round(ms["per_row"] / ms["plain"], 3),
        }
        print(json.dumps(result))
        print(
            f"{kind}: index pass over {rows} rows: {result['redacted_ms']} ms redacted "
            f"(x{result['ratio']}), {result['per_row_ms']} ms row by row "
            f"(x{result['per_row_ratio']}), {result['plain_ms']} ms plain",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
