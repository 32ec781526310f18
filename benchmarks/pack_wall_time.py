"""Wall time of the SessionStart hook printing the pack, with the checkpoints' digests
(``core.checkpoints.digest``: the newest 8 segments, the last 256 KiB of each) for a session of 8
banked windows of 2 MiB, beside the same hook for a session with nothing banked and
``python -c pass``, alternated in the same run; the figure is the median.

Each run is a fresh child process, ``tether hook claude-code session-start`` (source
``startup``: the pack alone, no backstop) with the hook's JSON on stdin, as Claude Code
runs it. One JSON line per figure:

    .venv/bin/python benchmarks/pack_wall_time.py [--runs 9] [--segments 8] [--mib 2]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from tether.checkpoint.bank import bank_redacted, redact_text
from tether.harnesses.claude_code import session_id_for
from tether.home import init_home

SESSION = "4f1c2e7a-0b1d-4c55-9f00-1a2b3c4d5e6f"
WORDS = [
    "we",
    "settled",
    "on",
    "pyarrow",
    "instead",
    "of",
    "pandas",
    "TODO",
    "next",
    "steps",
    "the",
    "billing",
    "export",
    "ran",
    "pytest",
    "edited",
    "src/app.py",
    "deploy",
    "frankfurt",
    "ledger",
    "owner",
    "asked",
    "please",
    "add",
    "a",
    "test",
]


def window(rng: random.Random, mib: float) -> str:
    blocks, size, n = [], 0, 0
    while size < mib * 1024 * 1024:
        who = "USER" if n % 2 == 0 else "ASSISTANT"
        text = " ".join(rng.choice(WORDS) for _ in range(120)) + "."
        blocks.append(f"[2026-11-01T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z] {who}: {text}")
        size += len(blocks[-1]) + 2
        n += 1
    return "\n\n".join(blocks) + "\n"


def _timed(argv: list[str], stdin: bytes = b"") -> float:
    start = time.perf_counter()
    subprocess.run(argv, input=stdin, check=True, capture_output=True)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--segments", type=int, default=8)
    parser.add_argument("--mib", type=float, default=2.0)
    args = parser.parse_args()
    tether = shutil.which("tether", path=str(Path(sys.executable).parent))
    entry = [tether] if tether else [sys.executable, "-m", "tether.cli.main"]
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        full, empty = root / "full", root / "empty"
        init_home(full)
        init_home(empty)
        now = datetime(2026, 11, 1, 12, tzinfo=UTC)
        for i in range(args.segments):
            red = redact_text(window(rng, args.mib))
            bank_redacted(
                full, session_id_for(SESSION), red, what=f"window {i}", time=now, source="bench"
            )
        stdin = json.dumps(
            {
                "session_id": SESSION,
                "transcript_path": str(root / "absent.jsonl"),
                "cwd": "/work",
                "hook_event_name": "SessionStart",
                "source": "startup",
            }
        ).encode()
        base: list[float] = []
        bare: list[float] = []
        packed: list[float] = []
        hook = ["hook", "claude-code", "session-start"]
        for _ in range(args.runs):
            base.append(_timed([sys.executable, "-c", "pass"]))
            bare.append(_timed([*entry, "--home", str(empty), *hook], stdin))
            packed.append(_timed([*entry, "--home", str(full), *hook], stdin))
        out = subprocess.run(
            [*entry, "--home", str(full), *hook], input=stdin, capture_output=True, check=True
        )
        context = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    python_ms, bare_ms, packed_ms = (statistics.median(x) for x in (base, bare, packed))
    print(json.dumps({"figure": "python_c_pass_ms", "median_ms": round(python_ms, 1)}))
    print(json.dumps({"figure": "session_start_empty_ms", "median_ms": round(bare_ms, 1)}))
    print(
        json.dumps(
            {
                "figure": "session_start_digests_ms",
                "median_ms": round(packed_ms, 1),
                "baseline_ms": round(bare_ms, 1),
                "over_baseline_ms": round(packed_ms - bare_ms, 1),
                "segments": args.segments,
                "segment_mib": args.mib,
                "pack_chars": len(context),
                "digest_lines": sum(1 for line in context.splitlines() if line.startswith("  - ")),
                "runs": args.runs,
            }
        )
    )


if __name__ == "__main__":
    main()
