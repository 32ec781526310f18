"""What redacting every indexed row costs the index pass.

Since rows are indexed secret-redacted (``tether.memory.indexer``), an index pass scans
each row's text with ``tether.scan``. This measures a full pass (``reindex``: drop the
index, build it again from the session logs) over real conversation text, the haystacks
of the first ``--questions`` LongMemEval questions with their ids renamed apart, with the
redaction (``redacted``) and, in the same run, without it (``plain``: the indexer's scan
replaced by one that finds nothing, which is what the pass did before). Runs alternate so
machine noise falls on both; the figure is the median of ``--runs``.

    .venv/bin/python benchmarks/index_redaction.py [--questions 20] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from tether.home import init_home
from tether.memory import indexer
from tether.memory.indexer import reindex
from tether.scan.secrets import Redaction, redact
from tether.sessions.importer import import_jsonl
from tether.stores.sqlite import SqliteStore


def _unscanned(text: str, *, allow: frozenset[str] = frozenset()) -> Redaction:
    del allow
    return Redaction(text, (), {})


DATA = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "bench-data"
    / "longmemeval"
    / "longmemeval_s_subset100.json"
)


def _build(home: Path, questions: int) -> int:
    """A home holding the haystacks of the first ``questions`` questions; its turn count.

    Every message is stamped at the question's first session date, a second apart: the
    index pass reads text, not dates."""
    init_home(home)
    src = home.parent / "haystacks.jsonl"
    with src.open("w", encoding="utf-8") as out:
        for n, q in enumerate(json.loads(DATA.read_text(encoding="utf-8"))[:questions]):
            for k, messages in enumerate(q["haystack_sessions"]):
                for pos, m in enumerate(messages):
                    line = {
                        "session": f"q{n:03d}-s{k:03d}",
                        "role": m["role"],
                        "text": m["content"],
                        "time": f"2024-01-01T00:{pos // 60:02d}:{pos % 60:02d}Z",
                    }
                    out.write(json.dumps(line) + "\n")
    return import_jsonl(home, src, now=datetime(2026, 11, 29, tzinfo=UTC)).turns


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
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        turns = _build(home, args.questions)
        times: dict[str, list[float]] = {"redacted": [], "plain": []}
        rows = 0
        for _ in range(args.runs):
            for name, scan in (("redacted", redact), ("plain", _unscanned)):
                # The one swap the baseline needs: the indexer's scan, by name.
                vars(indexer)["redact"] = scan
                took, rows = _pass(home)
                times[name].append(took)
        vars(indexer)["redact"] = redact
    red, plain = statistics.median(times["redacted"]), statistics.median(times["plain"])
    result = {
        "benchmark": "index_redaction",
        "turns": turns,
        "rows": rows,
        "runs": args.runs,
        "redacted_ms": round(red * 1000, 1),
        "plain_ms": round(plain * 1000, 1),
        "ratio": round(red / plain, 3),
        "redacted_rows_per_s": round(rows / red),
        "plain_rows_per_s": round(rows / plain),
    }
    print(json.dumps(result))
    print(
        f"index pass over {rows} rows: {result['redacted_ms']} ms redacted, "
        f"{result['plain_ms']} ms plain (x{result['ratio']})",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
