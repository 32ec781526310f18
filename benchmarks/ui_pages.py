"""How fast the memory browser page (``tether ui``) opens a long session and a big home,
beside the same data through the CLI's ``--json`` output, in the same run.

Two homes, built once (their logs written in bulk, as many appends would leave them):

- ``session``: one session of ``--turns`` turns (default 100,000), in two epochs;
- ``home``: ``--home-turns`` turns in all (default 1,000,000) over ``--sessions`` sessions.

For each, the median of ``--runs``:

- ``cold_ttfb_ms``: the first request of each page (one run), before the page process
  has read any of the logs (the session list keeps each session's row until its logs
  change);
- ``ttfb_ms``: time to the first byte of the page over HTTP from ``tether ui`` running as
  a child process (the page is rendered whole before its first byte, so this is the
  server's time for the page);
- ``rendered_ms``: time until a headless chromium (Playwright, the system's ``chromium``)
  has loaded and laid out the page (absent with the reason when no browser can be had);
- ``cli_ms``: the same data from the CLI, a child process to its end: ``tether session
  show ID --messages --json`` for the session, ``tether session list --json`` for the home
  (the baseline: what a user reads without the page).

The session page shows one page of 50 turns (the first, and the last), the CLI all of
them; the home page lists 100 sessions a page, the CLI all of them.

    .venv/bin/python benchmarks/ui_pages.py [--turns 100000] [--home-turns 1000000]
        [--sessions 100] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from tether.files import encode_records
from tether.home import init_home
from tether.records import Assistant, Baseline, LogRecord, User
from tether.sessions import Session
from tether.ui.auth import UiAuth

T0 = datetime(2026, 10, 1, tzinfo=UTC)
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
ARGS += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _turns(n: int, start: int) -> list[LogRecord]:
    out: list[LogRecord] = []
    for i in range(start, start + n):
        t = T0 + timedelta(seconds=i)
        out.append(User(time=t, text=f"turn {i}: what about the kumquat release, step {i}?"))
        out.append(Assistant(time=t, text=f"step {i} of the kumquat release is done"))
    return out


def write_session(home: Path, sid: str, turns: int) -> None:
    """A session of ``turns`` turns in two epochs, appended in bulk."""
    base = Baseline(system="you are tether", memory="")
    s = Session.create(home, sid, baseline=base, slot=0, time=T0)
    first = turns // 2
    with s.log_path.open("ab") as f:
        f.write(encode_records(_turns(first, 0)))
    s = Session.open(home, sid)
    s.end_epoch(summary=f"{sid}: the first {first} steps.", baseline=base, time=T0)
    with s.log_path.open("ab") as f:
        f.write(encode_records(_turns(turns - first, first)))


def _median_ms(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 1)


class Ui:
    def __init__(self, home: Path) -> None:
        self.home = home
        argv = [sys.executable, "-m", "tether.cli.main", "--home", str(home)]
        self.proc = subprocess.Popen(
            [*argv, "ui", "--port", "0", "--no-open"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.proc.stdout is not None
        found = re.search(r"(http://127\.0\.0\.1:\d+)(/login\S+)", self.proc.stdout.readline())
        assert found is not None
        self.base = found.group(1)

    def login(self) -> str:
        return f"{self.base}/login?token={UiAuth(self.home).issue_login(datetime.now(UTC))}"

    def close(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def ttfb(client: httpx.Client, path: str) -> float:
    start = time.perf_counter()
    with client.stream("GET", path) as r:
        chunks = r.iter_raw()
        next(chunks)
        took = time.perf_counter() - start
        for _ in chunks:
            pass
    assert r.status_code == 200, (path, r.status_code)
    return took


def rendered(ui: Ui, paths: list[str], runs: int) -> dict[str, float] | str:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "Playwright absent (pip install -e '.[browser]')"
    if not Path(CHROMIUM).exists():
        return f"no {CHROMIUM}"
    out: dict[str, float] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.goto(ui.login())
        for path in paths:
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                page.goto(ui.base + path, wait_until="load")
                page.evaluate("document.body.getBoundingClientRect().height")  # laid out
                times.append(time.perf_counter() - start)
            out[path] = _median_ms(times)
        browser.close()
    return out


def cli(home: Path, *args: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tether.cli.main", "--home", str(home), *args],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def measure(home: Path, paths: list[str], cli_args: list[str], runs: int) -> dict[str, Any]:
    ui = Ui(home)
    try:
        client = httpx.Client(base_url=ui.base, timeout=300)
        assert client.get(ui.login(), follow_redirects=False).status_code == 303
        client.get("/")  # the first request imports the views and the templates
        cold = {p: _median_ms([ttfb(client, p)]) for p in paths}
        first = {p: _median_ms([ttfb(client, p) for _ in range(runs)]) for p in paths}
        client.close()
        shown = rendered(ui, paths, runs)
    finally:
        ui.close()
    return {
        "cold_ttfb_ms": cold,
        "ttfb_ms": first,
        "rendered_ms": shown,
        "cli": " ".join(["tether", *cli_args]),
        "cli_ms": _median_ms([cli(home, *cli_args) for _ in range(runs)]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--home-turns", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    result: dict[str, Any] = {"turns": args.turns, "home_turns": args.home_turns}
    with tempfile.TemporaryDirectory(prefix="tether-ui-bench-") as tmp:
        one = Path(tmp) / "one"
        init_home(one)
        start = time.perf_counter()
        write_session(one, "long", args.turns)
        result["build_session_s"] = round(time.perf_counter() - start, 1)
        last = -(-args.turns // 50)
        result["session"] = measure(
            one,
            ["/sessions/long", f"/sessions/long?page={last}"],
            ["session", "show", "long", "--messages", "--json"],
            args.runs,
        )
        big = Path(tmp) / "big"
        init_home(big)
        start = time.perf_counter()
        each = args.home_turns // args.sessions
        for i in range(args.sessions):
            write_session(big, f"s{i:04d}", each)
        result["build_home_s"] = round(time.perf_counter() - start, 1)
        result["home"] = measure(
            big, ["/sessions", "/sessions/s0000"], ["session", "list", "--json"], args.runs
        )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
