"""Scan + redact throughput and ``bank_window`` time for a ~2 MiB pre-compaction window.

Prints one JSON line per figure. The window is realistic: mostly prose (a little
non-ASCII), tool calls with JSON arguments, tool results with code and web text, a few
secrets. Baselines, measured in the same run on the same bytes:

- scan: a naive scanner, one case-insensitive ``re.finditer`` per rule over the ``str``
  (what a straightforward rule loop does), and ``hashlib.sha256`` of the bytes (a floor);
- bank: ``sha256`` + ``write_atomic`` (temp file, fsync, rename) of the same bytes.

Goal (issue: compaction into epochs): everything compaction does except the model call
under 100 ms for a 2 MiB epoch, so scanning + banking should stay well under 50 ms.

    .venv/bin/python benchmarks/bank_window.py [--mib 2] [--repeat 15]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tether.checkpoint import bank_window, render_window
from tether.files import write_atomic
from tether.records import Assistant, LogRecord, SessionStart, ToolCall, ToolResult, Usage, User
from tether.scan import redact, redact_bytes

T0 = datetime(2026, 11, 1, tzinfo=UTC)
WORDS = [
    "the",
    "owner",
    "asked",
    "about",
    "garden",
    "plan",
    "watering",
    "schedule",
    "next",
    "week",
    "roof",
    "repair",
    "quote",
    "budget",
    "meeting",
    "notes",
    "token",
    "count",
    "context",
    "window",
    "summary",
    "decision",
    "deadline",
    "café",
    "review",
    "tests",
    "passed",
    "failing",
    "build",
    "deploy",
    "server",
    "config",
    "api",
    "key",
    "rotation",
    "secret",
    "manager",
    "password",
    "policy",
    "—",
    "tomorrow",
    "morning",
    "brief",
    "weather",
    "calendar",
    "invoice",
    "draft",
]
CODE = '''def load(path: str) -> dict[str, object]:
    """Read the config; missing keys fall back to defaults."""
    with open(path) as handle:
        data = json.load(handle)
    return {**DEFAULTS, **data}
'''
SECRETS = [
    "AKIA" + "IOSFODNN7EXAMPLE",
    "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8",
    'DB_PASSWORD = "' + "corr3ct-h0rse" + '"',
    "eyJ" + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0",
    "-----BEGIN "
    + "RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZ\n-----END RSA PRIVATE KEY-----",
]


def prose(rng: random.Random, n: int) -> str:
    words = rng.choices(WORDS, k=n)
    return " ".join(words).capitalize() + "."


def records(target: int, seed: int = 7) -> list[LogRecord]:
    rng = random.Random(seed)
    out: list[LogRecord] = [SessionStart(time=T0, epoch=3, slot=0, baseline="sha256:" + "0" * 64)]
    size = 0
    i = 0
    t = T0
    while size < target:
        t += timedelta(seconds=1)
        kind = i % 5
        rec: LogRecord
        if kind == 0:
            text = prose(rng, 50)
            if i % 400 == 0:
                text += " here it is: " + SECRETS[(i // 400) % len(SECRETS)]
            rec = User(time=t, text=text, speaker="ana")
        elif kind == 1:
            rec = ToolCall(time=t, id=f"c{i}", name="http_fetch", args={"url": f"https://x/{i}"})
        elif kind == 2:
            body = CODE if i % 3 else prose(rng, 250)
            rec = ToolResult(
                time=t, tool_call_id=f"c{i - 1}", content=body, class_="web", untrusted=True
            )
        elif kind == 3:
            rec = Assistant(time=t, text=prose(rng, 110))
        else:
            rec = Usage(time=t, cache_n=1000 + i, prompt_n=50, predicted_n=40)
        out.append(rec)
        size += len(getattr(rec, "text", "") or getattr(rec, "content", "")) + 60
        i += 1
    return out


NAIVE = [
    (re.compile(p, re.IGNORECASE | re.DOTALL))
    for p in (
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY-----.*?-----END[ A-Z0-9]*PRIVATE KEY-----",
        r"sk-ant-[A-Za-z0-9_-]{20,}",
        r"sk-(?:proj-)?[A-Za-z0-9_-]{20,}",
        r"gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}",
        r"xox[abeprs]-[A-Za-z0-9-]{10,}",
        r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
        r"(?:AKIA|ASIA)[A-Z0-9]{16}",
        r"aws_secret_access_key\s*[:=]\s*[A-Za-z0-9/+=]{40}",
        r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        r"(?:password|passwd|pwd|secret|token|api_key)\s*[:=]\s*\"[^\"\n]+\"",
    )
]


def naive_scan(text: str) -> int:
    return sum(1 for p in NAIVE for _ in p.finditer(text))


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def emit(figure: str, value: float, **extra: object) -> None:
    print(json.dumps({"figure": figure, "value": round(value, 2), **extra}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    recs = records(int(args.mib * 1024 * 1024))
    text = render_window(recs)
    data = text.encode()
    mb = len(data) / 1e6
    common = {"bytes": len(data), "records": len(recs), "ascii": text.isascii()}

    render_ms = statistics.median(timed(lambda: render_window(recs), args.repeat))
    emit("render_window_ms_p50", render_ms, **common)

    ours = statistics.median(timed(lambda: redact_bytes(data), args.repeat))
    ours_str = statistics.median(timed(lambda: redact(text), args.repeat))
    naive = statistics.median(timed(lambda: naive_scan(text), args.repeat))
    sha = statistics.median(timed(lambda: hashlib.sha256(data).hexdigest(), args.repeat))
    emit(
        "scan_redact_mb_per_s",
        mb / (ours / 1000),
        ms=round(ours, 2),
        api="redact_bytes (what bank_window uses)",
        redactions=redact_bytes(data).counts,
        baseline="naive: one re.IGNORECASE finditer per rule over the str (scan only)",
        baseline_value=round(mb / (naive / 1000), 2),
        floor_sha256_mb_per_s=round(mb / (sha / 1000), 2),
        ratio=round(naive / ours, 2),
        **common,
    )
    emit(
        "scan_redact_str_mb_per_s",
        mb / (ours_str / 1000),
        ms=round(ours_str, 2),
        api="redact(str): adds encode, decode and character offsets",
    )

    with tempfile.TemporaryDirectory() as tmp:
        homes = [Path(tmp) / f"h{n}" for n in range(args.repeat)]
        for h in homes:
            (h / "corpus").mkdir(parents=True)
        it = iter(homes)
        fresh = timed(lambda: bank_window(next(it), "bench", recs, epoch=3, time=T0), args.repeat)
        dup = timed(lambda: bank_window(homes[0], "bench", recs, epoch=3, time=T0), args.repeat)
        red = redact_bytes(data).data
        plain_path = Path(tmp) / "plain.txt"

        def plain() -> None:
            digest = hashlib.sha256(red).hexdigest()
            write_atomic(plain_path.with_name(f"plain-{digest[:24]}.txt"), red)

        base = timed(plain, args.repeat)
    med, base_med = statistics.median(fresh), statistics.median(base)
    emit(
        "bank_window_ms_p50",
        med,
        max_ms=round(max(fresh), 2),
        baseline="sha256 + write_atomic (fsync, rename) of the same redacted bytes",
        baseline_value=round(base_med, 2),
        ratio=round(med / base_med, 2),
        goal="well under 50 ms (compaction minus the model call < 100 ms)",
        **common,
    )
    emit("bank_window_dup_ms_p50", statistics.median(dup), code="segment_dup")


if __name__ == "__main__":
    main()
