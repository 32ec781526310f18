"""The daemon's start-up check for interrupted turns over a home of many sessions.

Prints one JSON line per figure. The baseline, measured in the same run on the same
files, opens every session in full (what the check would cost without the tail look) and
asks it whether its last turn is open; the measured path is ``Agent``'s start-up check
(``close_interrupted_all``): a look at each current log's tail, a full open only for the
few whose tail says the turn may be open, then the close. Each run closes the bare turns
it finds, so every repeat uses a fresh copy of the home.

    .venv/bin/python benchmarks/interrupted_scan.py [--sessions 2000] [--turns 50] [--bare 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tether.config import load_config
from tether.daemon.compose import build_runtime
from tether.files import encode_records, write_atomic
from tether.home import init_home
from tether.memory.indexer import index_home
from tether.records import Assistant, Baseline, LogRecord, Usage, User
from tether.sessions import Session, list_sessions
from tether.stores import open_store
from tether.testing.clock import StepClock

T0 = datetime(2026, 11, 1, tzinfo=UTC)
PROSE = "the owner asked about the garden plan and the watering schedule " * 3


def build(home: Path, sessions: int, turns: int, bare: int) -> None:
    init_home(home)
    base = Baseline(system="You are tether.", memory="")
    for n in range(sessions):
        sid = f"s{n}"
        s = Session.create(home, sid, baseline=base, slot=0, time=T0)
        recs: list[LogRecord] = []
        t = T0
        for i in range(turns):
            t += timedelta(seconds=3)
            recs.append(User(time=t, text=f"{i}: {PROSE}"))
            recs.append(Assistant(time=t, text=PROSE))
            recs.append(Usage(time=t, cache_n=100 * i, prompt_n=50, predicted_n=40))
        if n < bare:
            recs.append(User(time=t, text="killed here"))
        write_atomic(s.log_path, s.log_path.read_bytes() + encode_records(recs))
    # A real home's logs are indexed as they grow: the check indexes only what it adds.
    (home / "tether.toml").write_text('[llm]\nurl = "http://127.0.0.1:9"\n')
    store = open_store(home, load_config(home))
    try:
        index_home(home, store)
    finally:
        store.close()


def full_open(home: Path) -> int:
    return sum(Session.open(home, sid).open_turn() for sid in list_sessions(home))


def startup_check(home: Path) -> tuple[int, float]:
    """The check alone (the runtime is built before the clock starts), in ms."""
    rt = build_runtime(home, load_config(home), clock=StepClock(T0 + timedelta(days=1)))
    try:
        start = time.perf_counter()
        closed = len(rt.agent.close_interrupted_all())
        return closed, (time.perf_counter() - start) * 1000
    finally:
        asyncio.run(rt.aclose())


def main() -> None:
    logging.getLogger("tether").setLevel(logging.ERROR)  # one warning per closed turn
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--turns", type=int, default=50)
    ap.add_argument("--bare", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        master = Path(tmp) / "master"
        build(master, args.sessions, args.turns, args.bare)
        base_ms, check_ms = [], []
        found = closed = 0
        for r in range(args.repeat):
            copy = Path(tmp) / f"run{r}"
            shutil.copytree(master, copy)
            start = time.perf_counter()
            found = full_open(copy)
            base_ms.append((time.perf_counter() - start) * 1000)
            closed, ms = startup_check(copy)
            check_ms.append(ms)
            shutil.rmtree(copy)
    base, check = statistics.median(base_ms), statistics.median(check_ms)
    shape = {"sessions": args.sessions, "turns": args.turns, "bare": args.bare}
    print(json.dumps({"figure": "full_open_every_session_ms", "median": round(base, 1), **shape}))
    print(json.dumps({"figure": "startup_check_ms", "median": round(check, 1), **shape}))
    print(json.dumps({"figure": "startup_check_over_baseline", "ratio": round(check / base, 3)}))
    print(json.dumps({"figure": "bare_turns", "found": found, "closed": closed}))


if __name__ == "__main__":
    main()
