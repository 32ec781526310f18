"""Soak, the hook lane: many checkpoint windows through real hook processes killed at random.

Four Claude Code sessions (transcripts in the real format) take ``--windows`` windows in
turn: each window is a run of turns with planted facts (one in ten a window of several
MB of words, banked in parts) between mostly tool output. For each window, PreCompact runs
as Claude Code runs it (a child process, the payload on stdin) and is either left alone,
killed by its own fault point between its segment write and its ledger entry
(``hook-after-segment-write``), or killed with SIGKILL after a random delay; then the
harness's boundary is appended, and half the time SessionStart (``compact``: the
backstop) runs, killed at random too. ``[checkpoint] deadline_s`` is ``--deadline`` (short,
so big windows leave a rest to the hook's detached child).

Reported, as one JSON line: ``acknowledged`` (windows whose PreCompact exited 0 by
itself, its window banked or handed to its detached child; one that exited 0 saying the
next hook banks it is ``deferred_to_next_hook``), ``duplicated`` (a fact in the corpus more
than once: a window banked twice), ``stuck`` (a hook that did not exit within
``HOOK_TIMEOUT_S``, or a detached child still running after two minutes), ``tracebacks``
(in any hook's stderr, and telemetry lines with an ``error``), ``orphans`` (segments
without a ledger entry) and ``lost``: a planted fact of an acknowledged window absent from
the corpus once the hooks, their detached children and the next hook (one ``session-end
--wait`` a session) have run; ``lost_any_window`` counts every window, acknowledged or not.
``acked_waiting_for_next_hook`` names the acknowledged windows that still lacked a fact
before that session end (a detached child killed before it finished: here by the fault
point it inherits from a hook run with ``hook-after-segment-write``), with how their
PreCompact ended.

    .venv/bin/python benchmarks/soak.py --hooks [--windows 60] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tether.home import init_home

TETHER = [sys.executable, "-m", "tether.cli.main"]
SESSIONS = (
    "5a1c2e7a-0b1d-4c55-9f00-1a2b3c4d5e61",
    "5a1c2e7a-0b1d-4c55-9f00-1a2b3c4d5e62",
    "5a1c2e7a-0b1d-4c55-9f00-1a2b3c4d5e63",
    "5a1c2e7a-0b1d-4c55-9f00-1a2b3c4d5e64",
)
HOOK_TIMEOUT_S = 60.0
FACTS_PER_WINDOW = 4
OUTPUT = "drwxr-xr-x 2 owner owner 4096 Nov 1 10:00 build-artifacts-directory\n" * 900


class Transcript:
    """A Claude Code transcript, appended to as the harness does."""

    def __init__(self, path: Path, session: str) -> None:
        self.path, self.session, self.n = path, session, 0
        path.write_bytes(b"")

    def add(self, record: dict[str, object]) -> None:
        self.n += 1
        base = {
            "parentUuid": None,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/work/project",
            "sessionId": self.session,
            "version": "2.0.14",
            "uuid": f"{self.session[:8]}-0000-4000-8000-{self.n:012d}",
            "timestamp": f"2026-11-01T{10 + self.n // 3600 % 10:02d}:"
            f"{self.n // 60 % 60:02d}:{self.n % 60:02d}.000Z",
        }
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({**base, **record}, separators=(",", ":")) + "\n")

    def user(self, text: str) -> None:
        self.add({"type": "user", "message": {"role": "user", "content": text}})

    def tool_output(self) -> None:
        block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": OUTPUT}
        self.add({"type": "user", "message": {"role": "user", "content": [block]}})

    def assistant(self, text: str) -> None:
        content = [{"type": "text", "text": text}]
        self.add({"type": "assistant", "message": {"role": "assistant", "content": content}})

    def boundary(self) -> None:
        meta = {"trigger": "auto", "preTokens": 150000}
        self.add({"type": "system", "subtype": "compact_boundary", "compactMetadata": meta})
        self.add(
            {
                "type": "user",
                "isCompactSummary": True,
                "message": {"role": "user", "content": "SUMMARY-OF-THE-HARNESS"},
            }
        )


@dataclass
class Tally:
    facts: dict[int, list[str]] = field(default_factory=dict)  # window -> its facts
    acked: set[int] = field(default_factory=set)
    deferred: set[int] = field(default_factory=set)
    fates: dict[int, str] = field(default_factory=dict)  # left, crash, kill
    runs: dict[str, int] = field(default_factory=dict)  # how each hook run ended
    stuck: int = 0
    tracebacks: int = 0


def payload(event: str, t: Transcript, **extra: str) -> str:
    doc = {"session_id": t.session, "cwd": "/work/project", "hook_event_name": event, **extra}
    return json.dumps({**doc, "transcript_path": str(t.path)})


def run_hook(
    home: Path,
    args: list[str],
    stdin: str,
    tally: Tally,
    *,
    kill_after: float | None = None,
    crash: bool = False,
) -> int | None:
    """One hook child; its exit code (None when it was stuck)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    if crash:
        env["TETHER_CRASH_AT"] = "hook-after-segment-write"
    proc = subprocess.Popen(
        [*TETHER, "--home", str(home), "hook", "claude-code", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None
    assert proc.stderr is not None
    proc.stdin.write(stdin.encode())
    proc.stdin.close()
    try:
        proc.wait(timeout=kill_after if kill_after is not None else HOOK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        if kill_after is None:
            tally.stuck += 1
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    tally.tracebacks += err.count("Traceback")
    code = proc.returncode
    how = f"killed_{-code}" if code < 0 else f"exit_{code}"
    tally.runs[f"{args[0]}:{how}"] = tally.runs.get(f"{args[0]}:{how}", 0) + 1
    return proc.returncode


def window(t: Transcript, w: int, big: bool, rng: random.Random) -> list[str]:
    """Append window ``w``'s turns; its planted facts."""
    facts = [f"SOAK-FACT-{w:04d}-{i}" for i in range(FACTS_PER_WINDOW)]
    talk = "words of a long design discussion " * (rng.randint(60_000, 120_000) if big else 30)
    for fact in facts:
        t.user(f"Remember {fact}: it matters.")
        for _ in range(rng.randint(0, 3)):
            t.tool_output()
        t.assistant(f"Kept {fact}. {talk[: len(talk) // FACTS_PER_WINDOW]}")
    return facts


def corpus_counts(home: Path) -> dict[str, int]:
    text = "".join(p.read_text() for p in sorted((home / "corpus").glob("*.seg-*.txt")))
    found: dict[str, int] = {}
    for m in re.finditer(r"Remember (SOAK-FACT-\d{4}-\d):", text):
        found[m.group(1)] = found.get(m.group(1), 0) + 1
    return found


def finishers(home: Path) -> int:
    """The hooks' detached children (``pre-compact --rest-from``) of this home still
    running."""
    alive = 0
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        alive += b"--rest-from" in argv and str(home).encode() in argv
    return alive


def wait_for_children(home: Path, timeout: float) -> int:
    """Wait for the hooks' detached children to end; how many never did. (One killed by
    an inherited fault point ends without finishing: what it left is session end's.)"""
    deadline = time.monotonic() + timeout
    while (left := finishers(home)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def telemetry(home: Path) -> list[dict[str, object]]:
    path = home / "telemetry" / "heartbeat.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def orphans(home: Path) -> int:
    held: set[str] = set()
    for ledger in (home / "corpus").glob("*.ledger.json"):
        held |= {b["segment"] for b in json.loads(ledger.read_text())["boundaries"]}
    return sum(p.name not in held for p in (home / "corpus").glob("*.seg-*.txt"))


def drive(home: Path, root: Path, windows: int, rng: random.Random) -> Tally:
    tally = Tally()
    transcripts = [Transcript(root / f"t{i}.jsonl", s) for i, s in enumerate(SESSIONS)]
    for w in range(windows):
        t = transcripts[w % len(transcripts)]
        tally.facts[w] = window(t, w, big=w % 10 == 9, rng=rng)
        fate = rng.random()
        crash, kill_after = fate < 0.25, (rng.uniform(0.05, 1.2) if 0.25 <= fate < 0.5 else None)
        tally.fates[w] = "crash" if crash else "kill" if kill_after is not None else "left"
        stdin = payload("PreCompact", t, trigger="auto")
        code = run_hook(home, ["pre-compact"], stdin, tally, kill_after=kill_after, crash=crash)
        if code == 0 and telemetry(home)[-1].get("rest") == "next_hook":
            tally.deferred.add(w)  # exited 0 but said the next hook banks it
        elif code == 0:
            tally.acked.add(w)
        t.boundary()  # the harness compacts whatever the hook did
        if rng.random() < 0.5:
            kill = rng.uniform(0.05, 1.2) if rng.random() < 0.3 else None
            stdin = payload("SessionStart", t, source="compact")
            run_hook(home, ["session-start"], stdin, tally, kill_after=kill)
    return tally


def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="thk", dir="/tmp") as tmp:
        root = Path(tmp)
        home = root / "home"
        init_home(home)
        (home / "tether.toml").write_text(f"[checkpoint]\ndeadline_s = {args.deadline}\n")
        tally = drive(home, root, args.windows, rng)
        tally.stuck += wait_for_children(home, timeout=120)
        before = corpus_counts(home)
        acked_facts = [f for w in tally.acked for f in tally.facts[w]]
        waiting = sorted({int(f[10:14]) for f in acked_facts if not before.get(f)})
        lines = telemetry(home)
        errors = sum(bool(x.get("error")) for x in lines)
        for i, session in enumerate(SESSIONS):
            t = Transcript.__new__(Transcript)
            t.path, t.session = root / f"t{i}.jsonl", session
            stdin = payload("SessionEnd", t, reason="exit")
            run_hook(home, ["session-end", "--wait"], stdin, tally)
        after = corpus_counts(home)
        every = [f for facts in tally.facts.values() for f in facts]
        lost_windows = sorted({int(f[10:14]) for f in acked_facts if not after.get(f)})
        figures = {
            "figure": "soak_hooks",
            "windows": args.windows,
            "acknowledged": len(tally.acked),
            "deferred_to_next_hook": len(tally.deferred),
            "lost": sum(after.get(f, 0) == 0 for f in acked_facts),
            "lost_windows": {w: tally.fates[w] for w in lost_windows},
            "acked_waiting_for_next_hook": {w: tally.fates[w] for w in waiting},
            "duplicated": sum(c > 1 for c in after.values()),
            "stuck": tally.stuck,
            "tracebacks": tally.tracebacks + errors,
            "lost_any_window": sum(after.get(f, 0) == 0 for f in every),
            "orphans": orphans(home),
            "segments": len(list((home / "corpus").glob("*.seg-*.txt"))),
            "lines_with_parts": sum(isinstance(x.get("parts"), int) for x in lines),
            "rest_detached": sum(x.get("rest") == "detached" for x in lines),
            "rest_next_hook": sum(x.get("rest") == "next_hook" for x in lines),
            "rest_finished": sum(x.get("rest") == "finished" for x in lines),
            "hook_runs": dict(sorted(tally.runs.items())),
            "deadline_s": args.deadline,
            "seed": args.seed,
            "seconds": round(time.monotonic() - started, 1),
        }
    ok = all(figures[k] == 0 for k in ("lost", "duplicated", "stuck", "tracebacks"))
    ok = ok and figures["lost_any_window"] == 0 and figures["orphans"] == 0
    figures["ok"] = ok
    print(json.dumps(figures))
    return 0 if ok else 1
