"""Soak: the daemon under live turns, a heartbeat and cron, killed with -9 and restarted.

Four live sessions each send turns back to back through ``tether serve`` (the daemon in a
child process, over its socket, as ``tether chat`` does), while the daemon's own heartbeat
beats every second and a cron job runs every minute, against the fake llama server (a
child process too; every request takes ``--latency`` seconds, so most kills land while a
turn is in flight). Every ``--kill-every`` seconds on average (uniformly random) the daemon
is killed with SIGKILL, mid-turn when a turn is in flight at that moment, and started again.

Checked at the end, after a clean stop:

- every acknowledged turn (the client got its reply) is in its session's log exactly once
  (counting every epoch, a compaction's retry not counted twice); a turn that was in flight
  at a kill is there at most once;
- the main slot's cache share over the live sessions' turns is no lower than in a
  baseline run of the same turns with no heartbeat, no cron and no kills, in the same run
  (the first ``--baseline`` seconds, on a home of its own);
- no file is half-written: no temporary file of an atomic write is left, every session log
  reads to its last byte, and ``tether memory reindex`` reads every session;
- no traceback in any daemon's stderr.

    .venv/bin/python benchmarks/soak.py [--minutes 10] [--baseline 60] [--seed 1]

``--hooks`` runs the hook lane instead (``soak_hooks``: checkpoint windows through real
hook processes killed at random): ``benchmarks/soak.py --hooks [--windows 60]``.
``--sweep``: the sweep-worker lane instead (``benchmarks/soak_sweep.py``: workers on
PostgreSQL under SIGKILL and ``pg_terminate_backend``; ``--minutes`` is its deadline).

Prints one JSON document of figures; exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tether.daemon.api import DaemonClient
from tether.errors import TetherError
from tether.files import read_log
from tether.home import init_home
from tether.records import Usage, User
from tether.scheduler.ledger import RunLedger
from tether.sessions import Session, list_sessions

FAKE = """
import sys
from tether.testing.fake_llama import FakeLlama
with FakeLlama(n_ctx=int(sys.argv[2]), parallel=2, latency_s=float(sys.argv[1])) as f:
    print(f.url, flush=True)
    sys.stdin.read()
"""
LIVE = ("soak-a", "soak-b", "soak-c", "soak-d")
TETHER = [sys.executable, "-m", "tether.cli.main"]


class Fake:
    def __init__(self, latency: float, n_ctx: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FAKE, str(latency), str(n_ctx)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def make_home(root: Path, url: str, n_ctx: int, background: bool) -> Path:
    home = root
    init_home(home)
    (home / "tether.toml").write_text(
        f'[llm]\nurl = "{url}"\ntimeout_s = 20\n[expect]\nn_ctx = {n_ctx}\n'
        f"[heartbeat]\nevery_s = {1 if background else 0}\n"
    )
    if background:
        (home / "jobs" / "brief.toml").write_text(
            'schedule = "* * * * *"\nprompt = "Write a one-line brief of open notes."\n'
        )
    return home


class Daemon:
    """`tether serve` in a child process; its stderr kept in a file per start."""

    def __init__(self, home: Path, logs: Path) -> None:
        self.home, self.logs = home, logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.lock = threading.Lock()

    def start(self) -> None:
        self.starts += 1
        err = (self.logs / f"daemon-{self.starts}.err").open("wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
        self.proc = subprocess.Popen(
            [*TETHER, "--home", str(self.home), "serve"],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
        err.close()
        client = DaemonClient(self.home, timeout_s=5)
        deadline = time.monotonic() + 60
        try:
            while not client.alive():
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"daemon did not start (see {self.logs})")
                time.sleep(0.05)
        finally:
            client.close()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


@dataclass
class Tally:
    acked: dict[str, list[str]] = field(default_factory=lambda: {s: [] for s in LIVE})
    unacked: dict[str, list[str]] = field(default_factory=lambda: {s: [] for s in LIVE})
    in_flight: set[str] = field(default_factory=set)
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def client_loop(
    home: Path, sid: str, tally: Tally, stop: threading.Event, up: threading.Event
) -> None:
    n = 0
    client = DaemonClient(home, timeout_s=60)
    try:
        while not stop.is_set():
            if not up.wait(timeout=0.5):
                continue
            n += 1
            text = f"{sid} says hello, turn {n}, about the harbour at {n % 7} o'clock."
            with tally.lock:
                tally.in_flight.add(text)
            try:
                client.turn(sid, text)
                ok = True
            except TetherError:
                ok = False
            with tally.lock:
                tally.in_flight.discard(text)
                (tally.acked if ok else tally.unacked)[sid].append(text)
            if not ok:
                time.sleep(0.2)
    finally:
        client.close()


def drive(home: Path, seconds: float, kill_every: float, rng: random.Random) -> dict[str, object]:
    """Run the four clients for ``seconds``, killing the daemon at random (when
    ``kill_every`` > 0); the tally and kill figures."""
    logs = home.parent / f"{home.name}-logs"
    logs.mkdir(exist_ok=True)
    daemon = Daemon(home, logs)
    daemon.start()
    tally, stop, up = Tally(), threading.Event(), threading.Event()
    up.set()
    threads = [
        threading.Thread(target=client_loop, args=(home, sid, tally, stop, up)) for sid in LIVE
    ]
    for t in threads:
        t.start()
    kills = mid_turn = 0
    end = time.monotonic() + seconds
    downtime = 0.0
    while time.monotonic() < end:
        wait = rng.uniform(0.2, 1.8) * kill_every if kill_every > 0 else end - time.monotonic()
        time.sleep(max(0.0, min(wait, end - time.monotonic())))
        if kill_every <= 0 or time.monotonic() >= end:
            break
        with tally.lock:
            busy = bool(tally.in_flight)
        up.clear()
        daemon.kill()
        kills += 1
        mid_turn += busy
        down = time.monotonic()
        time.sleep(rng.uniform(0.0, 1.0))
        daemon.start()
        downtime += time.monotonic() - down
        up.set()
    stop.set()
    for t in threads:
        t.join(timeout=120)
    rc = daemon.stop()
    tracebacks = sum(p.read_text(errors="replace").count("Traceback") for p in logs.glob("*.err"))
    return {
        "tally": tally,
        "kills": kills,
        "kills_mid_turn": mid_turn,
        "daemon_starts": daemon.starts,
        "downtime_s": round(downtime, 1),
        "tracebacks": tracebacks,
        "last_stop_rc": rc,
    }


def usages(home: Path) -> dict[str, list[Usage]]:
    """Each live session's turn usages, every epoch, in order."""
    out: dict[str, list[Usage]] = {}
    for sid in LIVE:
        if Session.exists(home, sid):
            out[sid] = [
                r
                for _, records in Session.open(home, sid).epoch_records()
                for r in records
                if isinstance(r, Usage)
            ]
    return out


def cache_share(by_session: dict[str, list[Usage]], first: int | None = None) -> float:
    """cache_n / (cache_n + prompt_n) over each session's first ``first`` turns (all when
    None): a session's share falls as its history grows, so runs of different lengths
    are compared over the same turns."""
    picked = [u for us in by_session.values() for u in us[:first]]
    cache = sum(u.cache_n for u in picked)
    total = cache + sum(u.prompt_n for u in picked)
    return cache / total if total else 0.0


def check_logs(home: Path, tally: Tally) -> dict[str, object]:
    missing = duplicated = unacked_twice = 0
    for sid in LIVE:
        texts: dict[str, int] = {}
        for _, records in Session.open(home, sid).epoch_records():
            for r in records:
                if isinstance(r, User) and not r.retry:
                    texts[r.text] = texts.get(r.text, 0) + 1
        for text in tally.acked[sid]:
            count = texts.get(text, 0)
            missing += count == 0
            duplicated += count > 1
        unacked_twice += sum(texts.get(t, 0) > 1 for t in tally.unacked[sid])
    torn = 0
    for log in (home / "sessions").rglob("*.jsonl"):
        _, end = read_log(log)
        torn += end != log.stat().st_size
    temps = [p for p in home.rglob("*.tmp") if p.name.startswith(".")]
    reindex = subprocess.run(
        [*TETHER, "--home", str(home), "memory", "reindex"], capture_output=True, check=False
    )
    return {
        "acked_missing": missing,
        "acked_duplicated": duplicated,
        "unacked_logged_twice": unacked_twice,
        "torn_logs": torn,
        "temp_files_left": len(temps),
        "temp_files": sorted(str(p.relative_to(home)) for p in temps),
        "reindex_rc": reindex.returncode,
        "sessions": len(list_sessions(home)),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--baseline", type=float, default=60.0, help="seconds, no background")
    parser.add_argument("--kill-every", type=float, default=30.0, help="mean seconds")
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=1)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
    from benchmarks import soak_sweep

    parser.add_argument("--hooks", action="store_true", help="the hook lane (soak_hooks)")
    parser.add_argument("--windows", type=int, default=60, help="hook lane: windows")
    parser.add_argument("--deadline", type=float, default=0.3, help="hook lane: deadline_s")
    parser.add_argument(
        "--sweep", action="store_true", help="the sweep-worker lane (benchmarks/soak_sweep.py)"
    )
    soak_sweep.add_arguments(parser)
    args = parser.parse_args()
    if args.hooks:
        return hook_lane(args)
    if args.sweep:
        return soak_sweep.run(args)
    rng = random.Random(args.seed)
    fake = Fake(args.latency, args.n_ctx)
    try:
        with tempfile.TemporaryDirectory(prefix="ths", dir="/tmp") as tmp:
            base_home = make_home(Path(tmp) / "b", fake.url, args.n_ctx, background=False)
            base = drive(base_home, args.baseline, 0, rng)
            base_usages = usages(base_home)
            first = min(len(v) for v in base_usages.values())
            base_share = cache_share(base_usages, first)
            home = make_home(Path(tmp) / "s", fake.url, args.n_ctx, background=True)
            soak = drive(home, args.minutes * 60, args.kill_every, rng)
            soak_usages = usages(home)
            share = cache_share(soak_usages, first)
            share_all = cache_share(soak_usages)
            tally = soak.pop("tally")
            assert isinstance(tally, Tally)
            checks = check_logs(home, tally)
            heartbeats = (
                Session.open(home, "heartbeat").turns() if Session.exists(home, "heartbeat") else 0
            )
            cron = sum(r.status == "finished" for r in RunLedger(home).read())
            epochs = {sid: Session.open(home, sid).epoch for sid in LIVE}
    finally:
        fake.close()
    acked = sum(len(v) for v in tally.acked.values())
    ok = (
        checks["acked_missing"] == 0
        and checks["acked_duplicated"] == 0
        and checks["unacked_logged_twice"] == 0
        and checks["torn_logs"] == 0
        and checks["temp_files_left"] == 0
        and checks["reindex_rc"] == 0
        and soak["tracebacks"] == 0
        and share >= base_share - 0.01
    )
    print(
        json.dumps(
            {
                "figure": "soak",
                "ok": ok,
                "minutes": args.minutes,
                "acked_turns": acked,
                "unacked_turns": sum(len(v) for v in tally.unacked.values()),
                **soak,
                **checks,
                "main_cache_share": round(share, 4),
                "main_cache_share_over": f"each live session's first {first} turns",
                "baseline": f"same 4 sessions for {args.baseline:g} s, no heartbeat, cron, kills",
                "baseline_main_cache_share": round(base_share, 4),
                "main_cache_share_whole_run": round(share_all, 4),
                "main_usage_records": sum(len(v) for v in soak_usages.values()),
                "baseline_tracebacks": base["tracebacks"],
                "heartbeat_turns": heartbeats,
                "cron_runs_finished": cron,
                "live_epochs": epochs,
                "seed": args.seed,
            },
            default=str,
        )
    )
    return 0 if ok else 1


def hook_lane(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
    from benchmarks import soak_hooks

    return soak_hooks.run(args)


if __name__ == "__main__":
    sys.exit(main())
