"""Wall time of the PreCompact hook, from process start to banked segment, for a window of
2 MiB, Python start-up included, beside ``python -c pass`` in the same run.

Each run is a fresh child process, ``tether hook claude-code pre-compact`` (the installed
entry point, as Claude Code runs it) with the hook's JSON on stdin, on a fresh home, no
daemon running (the IPC round trip finds no socket). Runs alternate with the baseline so
machine noise falls on both alike; the figure is the median. The goal is under 300 ms (the
hook's deadline is 3 s). One JSON line per figure:

    .venv/bin/python benchmarks/hook_wall_time.py [--runs 9] [--mib 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_MS = 300.0


def transcript(path: Path, mib: float) -> None:
    """A Claude Code transcript: an old window, a boundary, then ``mib`` MiB of window."""
    session = "4f1c2e7a-0b1d-4c55-9f00-1a2b3c4d5e6f"
    lines = []

    def add(n: int, record: dict[str, object]) -> None:
        base = {
            "parentUuid": None,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/work",
            "sessionId": session,
            "uuid": f"00000000-0000-4000-8000-{n:012d}",
            "timestamp": f"2026-11-01T10:{(n // 60) % 60:02d}:{n % 60:02d}.000Z",
        }
        lines.append(json.dumps({**base, **record}, separators=(",", ":")))

    add(0, {"type": "user", "message": {"role": "user", "content": "old window"}})
    add(
        1, {"type": "system", "subtype": "compact_boundary", "compactMetadata": {"trigger": "auto"}}
    )
    add(2, {"type": "user", "isCompactSummary": True, "message": {"role": "user", "content": "s"}})
    text = "a line of the session: edited src/app.py, ran pytest -q, 12 passed; " * 12
    n, size = 3, 0
    while size < mib * 1024 * 1024:
        role = "user" if n % 2 else "assistant"
        content: object = text if role == "user" else [{"type": "text", "text": text}]
        add(n, {"type": role, "message": {"role": role, "content": content}})
        size += len(lines[-1]) + 1
        n += 1
    path.write_text("\n".join(lines) + "\n")


def _timed(argv: list[str], stdin: bytes = b"") -> float:
    start = time.perf_counter()
    subprocess.run(argv, input=stdin, check=True, capture_output=True)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--mib", type=float, default=2.0)
    args = parser.parse_args()
    tether = shutil.which("tether", path=str(Path(sys.executable).parent))
    entry = [tether] if tether else [sys.executable, "-m", "tether.cli.main"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "t.jsonl"
        transcript(path, args.mib)
        stdin = json.dumps(
            {
                "session_id": "4f1c2e7a-0b1d-4c55-9f00-1a2b3c4d5e6f",
                "transcript_path": str(path),
                "cwd": "/work",
                "hook_event_name": "PreCompact",
                "trigger": "auto",
                "custom_instructions": "",
            }
        ).encode()
        base: list[float] = []
        hook: list[float] = []
        for i in range(args.runs):
            home = root / f"home{i}"
            subprocess.run([*entry, "--home", str(home), "init"], check=True, capture_output=True)
            base.append(_timed([sys.executable, "-c", "pass"]))
            hook.append(
                _timed([*entry, "--home", str(home), "hook", "claude-code", "pre-compact"], stdin)
            )
            beat = (home / "telemetry" / "heartbeat.jsonl").read_text().splitlines()[-1]
            if json.loads(beat).get("segment") != "segment_banked":
                raise SystemExit(f"the hook did not bank the window: {beat}")
            parts = list((home / "corpus").glob("*.seg-*.txt"))
        window = sum(p.stat().st_size for p in parts)  # a window past 2 MiB: in parts
    python_ms = statistics.median(base)
    hook_ms = statistics.median(hook)
    print(json.dumps({"figure": "python_c_pass_ms", "median_ms": round(python_ms, 1)}))
    print(
        json.dumps(
            {
                "figure": "pre_compact_hook_ms",
                "median_ms": round(hook_ms, 1),
                "baseline_ms": round(python_ms, 1),
                "over_baseline_ms": round(hook_ms - python_ms, 1),
                "segment_bytes": window,
                "segments": len(parts),
                "runs": args.runs,
                "goal_ms": GOAL_MS,
                "within_goal": hook_ms < GOAL_MS,
            }
        )
    )


if __name__ == "__main__":
    main()
