"""`tether sessions import --format claude-code` on a long transcript, beside the generic
import of the same messages, in the same run.

A synthetic Claude Code transcript in the real line format: N user/assistant exchanges,
each assistant line with a text block and a tool call, each followed by a tool-result
line (skipped by the reader), so 3N lines and 2N messages. Timed: the first import; the
generic import of the same messages written as `tether` lines (the baseline: the work
the transcript path adds is reading the transcript and comparing with the session); a
re-import of the unchanged transcript (nothing new: read and compare only); and an
import after 1% more exchanges. Prints one JSON line per figure.

    .venv/bin/python benchmarks/transcript_import.py [--exchanges 5000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tether.home import init_home
from tether.imports.jsonl import import_jsonl
from tether.imports.transcript import import_transcript
from tether.stores.sqlite import SqliteStore

START = datetime(2026, 11, 1, 9, tzinfo=UTC)
SESSION = "4f1c2e7a-0b1d-4c55-9f00-1a2b3c4d5e6f"

#: Run in a child: import a transcript, print the peak resident memory (VmHWM, which a
#: new program starts afresh) before and after, in kB.
PEAK = """
import sys
from datetime import UTC, datetime
from pathlib import Path
from tether.home import init_home
from tether.imports.transcript import import_transcript
def hwm():
    return next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM"))
home, path = Path(sys.argv[1]), Path(sys.argv[2])
init_home(home)
before = hwm()
from tether.stores.sqlite import SqliteStore
from contextlib import closing
opener = lambda: closing(SqliteStore(home / "tether.db"))
import_transcript(home, path, harness="claude-code", now=datetime.now(UTC), store=opener)
print(before, hwm())
"""


def stamp(n: int) -> str:
    return (START + timedelta(seconds=n)).isoformat().replace("+00:00", "Z")


def texts(i: int) -> tuple[str, str, dict[str, str]]:
    """Exchange ``i``: the owner's words, the reply's text, the tool call's input."""
    ask = f"step {i}: fix the failing assertion in tests/test_api_{i % 50}.py and rerun"
    return (
        ask,
        f"Reading the test file for step {i} first.",
        {"file_path": f"/src/tests/test_api_{i % 50}.py"},
    )


def exchange(i: int, output: int = 400) -> list[dict[str, object]]:
    """Exchange ``i`` as transcript lines; ``output``: characters of its tool result."""
    t = 10 * i
    ask, reply, args = texts(i)
    common = {"sessionId": SESSION}
    result = "x" * output
    return [
        {
            "type": "user",
            **common,
            "timestamp": stamp(t),
            "uuid": f"u{i}",
            "message": {"role": "user", "content": ask},
        },
        {
            "type": "assistant",
            **common,
            "timestamp": stamp(t + 2),
            "uuid": f"a{i}",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": reply},
                    {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": args},
                ],
            },
        },
        {
            "type": "user",
            **common,
            "timestamp": stamp(t + 3),
            "uuid": f"r{i}",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": result}],
            },
        },
    ]


def write_transcript(path: Path, exchanges: range, output: int = 400) -> None:
    with path.open("a") as f:
        for i in exchanges:
            for record in exchange(i, output):
                f.write(json.dumps(record, separators=(",", ":")) + "\n")


def write_generic(path: Path, exchanges: int) -> None:
    """The same messages, as `tether sessions import` lines (what the baseline imports)."""
    with path.open("w") as f:
        for i in range(exchanges):
            ask, reply, args = texts(i)
            tool = "[tool Read] " + json.dumps(args, separators=(",", ":"))
            for role, text, t in (
                ("user", ask, stamp(10 * i)),
                ("assistant", f"{reply}\n\n{tool}", stamp(10 * i + 2)),
            ):
                line = {"session": "generic", "role": role, "text": text, "time": t}
                f.write(json.dumps(line) + "\n")


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def peak(exchanges: int) -> None:
    """The memory an import takes on a transcript of 20 KB tool results (a file read's
    worth each), beside the transcript's size."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fat.jsonl"
        write_transcript(path, range(exchanges), output=20_000)
        size_mb = path.stat().st_size / 1e6
        out = subprocess.run(
            [sys.executable, "-c", PEAK, str(Path(tmp) / "home"), str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
    before, after = (int(x) / 1000 for x in out.stdout.split())
    common = {"exchanges": exchanges, "transcript_mb": round(size_mb, 1)}
    for figure, value in (
        ("peak_rss_mb_before_import", before),
        ("peak_rss_mb", after),
        ("peak_rss_over_transcript_size", after / size_mb),
    ):
        print(json.dumps({"figure": figure, "value": round(value, 2), **common}))


def _transcript(home: Path, transcript: Path, now: datetime) -> object:
    """One ``sessions import --format claude-code``, its store opened and closed as the CLI does."""
    opener = lambda: closing(SqliteStore(home / "tether.db"))  # noqa: E731
    return import_transcript(home, transcript, harness="claude-code", now=now, store=opener)


def _generic(home: Path, src: Path, now: datetime) -> object:
    return import_jsonl(home, src, now=now, store=lambda: closing(SqliteStore(home / "tether.db")))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exchanges", type=int, default=5000)
    parser.add_argument(
        "--fat", action="store_true", help="measure peak memory on 20 KB tool results instead"
    )
    args = parser.parse_args()
    n = args.exchanges
    if args.fat:
        peak(n)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        transcript, generic = root / "t.jsonl", root / "g.jsonl"
        write_transcript(transcript, range(n))
        write_generic(generic, n)
        a, b = root / "a", root / "b"
        init_home(a)
        init_home(b)
        now = datetime.now(UTC)
        first = timed(lambda: _transcript(a, transcript, now))
        base = timed(lambda: _generic(b, generic, now))
        again = timed(lambda: _transcript(a, transcript, now))
        write_transcript(transcript, range(n, n + max(1, n // 100)))
        grown = timed(lambda: _transcript(a, transcript, now))
    common = {"exchanges": n, "messages": 2 * n, "transcript_lines": 3 * n}
    for figure, value in (
        ("generic_import_s", base),
        ("transcript_import_s", first),
        ("transcript_over_generic", first / base),
        ("reimport_unchanged_s", again),
        ("reimport_after_1pct_growth_s", grown),
    ):
        print(json.dumps({"figure": figure, "value": round(value, 3), **common}))


if __name__ == "__main__":
    main()
