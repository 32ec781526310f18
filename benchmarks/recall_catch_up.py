"""What a recall pays to catch up banked windows, on a home with many banked sessions.

Every recall (``memory recall``, MCP, ui) first puts in their sessions the windows the
checkpoint hooks banked but had no time to (``checkpoint.recallable.catch_up``). Without a
per-session "caught up" mark that means reading every banked session's ledger and its
``.recalled.jsonl``, however old; with the marks (``corpus/caught-up.json``: the ledger
state each session was last found caught up at) a recall with nothing new reads one
file and stats each ledger.

The home: ``--sessions`` harness sessions (``cc-<uuid>``), each with ``--windows`` banked
pre-compact windows of ``--turns`` turns, all already in their sessions and indexed
(lexical recall: vectors are not what is measured). Figures, median of ``--repeat``:

- ``catch_up``: the call alone, in this process;
- ``recall_in_process``: ``tether memory recall QUERY --json``, the command's own code
  run in this process (click's runner): what a recall costs without interpreter start;
- ``recall_cli``: the same as a child process, wall time (interpreter start included).

Baseline, in the same run on the same home: the marks file removed before each call, so
every ledger is read as before the marks (``catch_up``: ``pending`` alone, exactly the
old no-news path; the CLI's baseline also pays the one marks write that follows). Then one
session gains a window (a hook that deferred it) and one catch-up brings it in:
``one_new``.

    nice -n 10 .venv/bin/python benchmarks/recall_catch_up.py [--sessions 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from click.testing import CliRunner

from tether.checkpoint.bank import bank_redacted, redact_text
from tether.checkpoint.recallable import catch_up, marks_path, pending
from tether.cli.main import cli
from tether.config import load_config
from tether.core.checkpoints.window import Turn, render
from tether.home import init_home
from tether.memory.indexer import index_home
from tether.stores import open_store

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = [
    "the",
    "owner",
    "asked",
    "about",
    "the",
    "garden",
    "plan",
    "watering",
    "schedule",
    "roof",
    "repair",
    "quote",
]


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _window(i: int, w: int, turns: int) -> str:
    start = T0 + timedelta(days=i, hours=w)
    out = []
    for n in range(turns):
        words = " ".join(WORDS[(i + w + n + k) % len(WORDS)] for k in range(24))
        role: Literal["user", "assistant"] = "user" if n % 2 == 0 else "assistant"
        out.append(
            Turn(
                role,
                f"session {i} window {w} turn {n}: {words}",
                _stamp(start + timedelta(seconds=n)),
            )
        )
    return render(out)


def bank(home: Path, i: int, w: int, turns: int, sid: str) -> None:
    red = redact_text(_window(i, w, turns))
    when = T0 + timedelta(days=i, hours=w, minutes=30)
    bank_redacted(home, sid, red, what="pre-compact", time=when, source="pre-compact")


def build(home: Path, sessions: int, windows: int, turns: int) -> list[str]:
    init_home(home)
    with (home / "tether.toml").open("a") as f:
        f.write("\n[recall]\nvectors = false\n")
    sids = [f"cc-{uuid.UUID(int=i + 1)}" for i in range(sessions)]
    for i, sid in enumerate(sids):
        for w in range(windows):
            bank(home, i, w, turns, sid)
    catch_up(home, allow=frozenset(), wait=True)  # every window into its session
    store = open_store(home, load_config(home))
    try:
        index_home(home, store)
    finally:
        store.close()
    return sids


def median_ms(run: Callable[[], object], repeat: int, before: Callable[[], None]) -> float:
    times = []
    for _ in range(repeat):
        before()
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="catchup") as tmp:
        home = Path(tmp) / "home"
        t = time.perf_counter()
        sids = build(home, args.sessions, args.windows, args.turns)
        built_s = round(time.perf_counter() - t, 1)
        marks = marks_path(home)

        def unmarked() -> None:
            marks.unlink(missing_ok=True)

        def keep() -> None:
            pass

        def catch() -> object:
            return catch_up(home, allow=frozenset())

        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

        runner = CliRunner()
        words = ["--home", str(home), "memory", "recall", "garden roof quote", "-k", "5", "--json"]

        def recall_in_process() -> object:
            done = runner.invoke(cli, words)
            assert done.exit_code == 0, done.output
            return done

        def recall() -> object:
            argv = [sys.executable, "-m", "tether.cli.main", "--home", str(home)]
            argv += ["memory", "recall", "garden roof quote", "-k", "5", "--json"]
            return subprocess.run(argv, check=True, capture_output=True, env=env)

        catch()  # the marks written once
        figures = {
            "catch_up_ms": {
                # what catch_up did before the marks when nothing was new: pending() alone
                "baseline_read_every_ledger": median_ms(
                    lambda: pending(home), args.repeat, unmarked
                ),
                "unmarked_then_marks_written": median_ms(catch, args.repeat, unmarked),
                "marked": median_ms(catch, args.repeat, keep),
            },
            "recall_in_process_ms": {
                "baseline_unmarked": median_ms(recall_in_process, args.repeat, unmarked),
                "marked": median_ms(recall_in_process, args.repeat, keep),
            },
            "recall_cli_ms": {
                "baseline_unmarked": median_ms(recall, args.repeat, unmarked),
                "marked": median_ms(recall, args.repeat, keep),
            },
        }
        catch()
        news = iter(range(args.repeat))

        def one_new() -> None:  # a hook banked one more window and deferred it
            n = next(news)
            bank(home, n, args.windows + 1 + n, args.turns, sids[n])

        figures["one_new_catch_up_ms"] = {"marked": median_ms(catch, args.repeat, one_new)}
        print(
            json.dumps(
                {
                    "benchmark": "recall_catch_up",
                    "sessions": args.sessions,
                    "windows": args.windows,
                    "turns": args.turns,
                    "repeat": args.repeat,
                    "build_s": built_s,
                    "cpus": os.cpu_count(),
                    "load": [round(x, 2) for x in os.getloadavg()],
                    **figures,
                }
            )
        )


if __name__ == "__main__":
    main()
