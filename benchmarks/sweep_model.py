"""The sweep's model pass: owners/s of a run over 1,000 owners x 1 day with the fake
llama-server at zero latency (real HTTP, scripted phase-A and phase-B replies), beside
the deterministic producer over the same owners in the same run, and model requests per
owner-day (goal: exactly the 2 phases, plus at most one digest per undigested session).

Each owner has one session on the day in the store (rows and its owner, as the indexer
and ``sessions import`` leave them), short enough to need no digest; ``--long`` makes it
long enough for one digest each.

    .venv/bin/python benchmarks/sweep_model.py [--owners 1000] [--long]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio.from_thread

from tether.agent.metered import Meter, MeteredLlm
from tether.config import Config, SweepConfig
from tether.core.timing.scheduling import Priority
from tether.daemon.compose import sweep_runner
from tether.llm.llama_server import LlamaServerClient
from tether.records import Completion, CompletionRequest, IndexCursor, LogRow, SessionMeta
from tether.stores.sqlite import SqliteStore
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.sweep import owners
from tether.sweep.producer import DeterministicProducer
from tether.sweep.runner import Runner, members
from tether.testing.fake_llama import FakeLlama, Reply

CREATED = datetime(2026, 11, 2, 8, tzinfo=UTC)  # first day: 2026-11-01 (UTC)
DAY = datetime(2026, 11, 1, 10, tzinfo=UTC)
NOW = CREATED + timedelta(hours=4)


def _owner(i: int) -> str:
    return f"o{i:05d}"


def setup(home: Path, n: int, long: bool) -> None:
    home.mkdir()
    sweep = SqliteSweepStore(home / "tether.db")
    with sweep.transaction() as tx:
        for i in range(n):
            tx.put_owner(owners.new_owner(_owner(i), "UTC", CREATED))
    sweep.close()
    filler = " and the details of it" * (40 if long else 0)
    with SqliteStore(home / "tether.db") as store:
        batch = []
        for i in range(n):
            sid = f"s-{_owner(i)}"
            rows = [
                LogRow(session=sid, epoch=0, turn=1, field="user", tainted=False, time=DAY,
                       text=f"We moved the book club to Tuesdays{filler}."),
                LogRow(session=sid, epoch=0, turn=1, field="assistant", tainted=False,
                       time=DAY + timedelta(seconds=3), text="Noted: Tuesdays."),
            ]  # fmt: skip
            batch.append(
                (rows, IndexCursor(path=f"{sid}/0.jsonl", offset=1, turn=1, tainted=False))
            )
            store.put_session_meta(SessionMeta(session=sid, owner=_owner(i), first_seen=DAY))
        store.index_logs(batch)


def script(fake: FakeLlama, n: int, long: bool) -> None:
    for i in range(n):
        sid = f"s-{_owner(i)}"
        if long:
            fake.script(Reply(content="They moved the book club to Tuesdays."))
        fake.script(Reply(content='{"excerpts": []}'))
        memory = {
            "text": "The book club meets on Tuesdays",
            "subject": "owner",
            "entity": "book-club",
            "sessions": [sid],
            "first_turn": 1,
            "last_turn": 1,
            "quote": "moved the book club to Tuesdays",
        }
        fake.script(Reply(content=json.dumps({"memories": [memory], "folders": []})))


def model_run(home: Path, n: int, long: bool) -> tuple[float, float, int, int]:
    """Seconds of the run, seconds of it spent in model calls, requests, writes."""
    config = Config(sweep=SweepConfig(enabled=True))
    in_calls = [0.0]
    with FakeLlama(n_ctx=65536, parallel=2) as fake:
        script(fake, n, long)
        llm = LlamaServerClient(fake.url, timeout_s=30)
        main = SqliteStore(home / "tether.db")
        try:
            with anyio.from_thread.start_blocking_portal() as portal:
                metered = MeteredLlm(llm, Meter(None, None, 1024), "sweep", priority=Priority.SWEEP)
                inner = metered.blocking(portal.call)

                def call(request: CompletionRequest) -> Completion:
                    began = time.perf_counter()
                    try:
                        return inner(request)
                    finally:
                        in_calls[0] += time.perf_counter() - began

                with sweep_runner(home, config, main=main, call=call, llm=llm) as runner:
                    start = time.perf_counter()
                    report = runner.run(NOW)
                    elapsed = time.perf_counter() - start
                portal.call(llm.aclose)
        finally:
            main.close()
        requests = len(fake.requests)
    t = report.totals()
    assert t["days_complete"] == n, t
    return elapsed, in_calls[0], requests, t["writes"]


def deterministic_run(path: Path, n: int) -> float:
    store = SqliteSweepStore(path)
    with store.transaction() as tx:
        for i in range(n):
            tx.put_owner(owners.new_owner(_owner(i), "UTC", CREATED))
    try:
        runner = Runner(
            store,
            DeterministicProducer(),
            config=SweepConfig(enabled=True),
            cohort=members(["*"]),
            claimant="bench",
        )
        start = time.perf_counter()
        report = runner.run(NOW)
        elapsed = time.perf_counter() - start
    finally:
        store.close()
    assert report.totals()["days_complete"] == n
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--owners", type=int, default=1000)
    parser.add_argument("--long", action="store_true", help="one digest per session")
    args = parser.parse_args()
    n = args.owners
    with tempfile.TemporaryDirectory(prefix="tether-sweep-model-") as tmp:
        det_s = deterministic_run(Path(tmp) / "det.db", n)
        home = Path(tmp) / "home"
        setup(home, n, args.long)
        model_s, calls_s, requests, writes = model_run(home, n, args.long)
    common = {"owners": n, "days": 1, "digests": args.long}
    for line in (
        {"figure": "sweep_model_owners_per_s", "value": round(n / model_s, 1), **common},
        {
            "figure": "sweep_model_engine_owners_per_s",  # the run less its time in calls
            "value": round(n / (model_s - calls_s), 1),
            **common,
        },
        {"figure": "sweep_deterministic_owners_per_s", "value": round(n / det_s, 1), **common},
        {"figure": "model_requests_per_owner_day", "value": round(requests / n, 3), **common},
        {"figure": "canonical_writes", "value": writes, **common},
    ):
        print(json.dumps(line))


if __name__ == "__main__":
    main()
