"""The budget gate writes the ledger once per call: a call's settle rides in the next
reservation's transaction, and whoever owns the gate writes what is left when it closes.

Writes are seen as another process would see them: ``PRAGMA data_version`` of a second
connection changes only when some other connection committed.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon_helpers import ScheduledRuntime
from tether.agent.budget import BudgetGate
from tether.config import BudgetConfig, KindBudget, load_config
from tether.core.spend.budget_rules import Bound
from tether.records import Completion
from tether.stores import open_store
from tether.testing.clock import StepClock
from tether.testing.fake_llama import FakeLlama

START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


class Watcher:
    """A second connection: did anyone commit since the last look?"""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path)
        self.last = self._version()

    def _version(self) -> int:
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def wrote(self) -> bool:
        now = self._version()
        changed, self.last = now != self.last, now
        return changed


def used(n: int) -> Completion:
    return Completion("ok", (), "stop", cache_n=0, prompt_n=n, predicted_n=10)


def test_one_write_per_call_and_the_ledger_catches_up(home: Path) -> None:
    config = load_config(home)
    store = open_store(home, config)
    gate = BudgetGate(
        config=BudgetConfig(cron=KindBudget(day_tokens=10_000)),
        store=store,
        clock=StepClock(start=START, step=timedelta(0)),
        zone=UTC,
    )
    watch = Watcher(home / "tether.db")
    try:
        first = gate.reserve("cron", "job-a", Bound(prompt=400, max_tokens=100))
        assert watch.wrote()
        gate.settle(first, used(300))
        assert not watch.wrote()  # the settle waits for the next call's transaction
        (row,) = store.budget_rows()
        assert (row.state, row.bound_tokens) == ("reserved", 500)
        assert store.budget_spent("2026-11-01", "cron").tokens == 500  # never under

        second = gate.reserve("cron", "job-a", Bound(prompt=400, max_tokens=100))
        assert watch.wrote()
        first_row, second_row = store.budget_rows()
        assert (first_row.state, first_row.tokens, first_row.prompt_n) == ("settled", 310, 300)
        assert second_row.state == "reserved"
        assert store.budget_spent("2026-11-01", "cron").tokens == 310 + 500

        gate.settle(second, None)  # a failed call spends nothing
        assert not watch.wrote()
        gate.flush()
        assert watch.wrote()
        assert [(r.state, r.tokens) for r in store.budget_rows()] == [
            ("settled", 310),
            ("settled", 0),
        ]
        assert store.budget_spent("2026-11-01", "cron").tokens == 310
        gate.flush()  # nothing left: no write
        assert not watch.wrote()
    finally:
        watch.db.close()
        store.close()


def test_a_refused_call_still_carries_the_earlier_settle(home: Path) -> None:
    store = open_store(home, load_config(home))
    gate = BudgetGate(
        config=BudgetConfig(cron=KindBudget(day_tokens=900)),
        store=store,
        clock=StepClock(start=START, step=timedelta(0)),
        zone=UTC,
    )
    try:
        first = gate.reserve("cron", "job-a", Bound(prompt=400, max_tokens=100))
        gate.settle(first, used(100))  # 110 used of its 500
        # 500 more would pass 900 at the first call's bound; with its settle folded in
        # first, the decision weighs what it used, and this call passes.
        gate.reserve("cron", "job-a", Bound(prompt=400, max_tokens=100))
        assert [r.state for r in store.budget_rows()] == ["settled", "reserved"]
    finally:
        store.close()


@pytest.mark.anyio
async def test_a_daemon_that_stops_leaves_no_call_reserved(home: Path) -> None:
    with FakeLlama(n_ctx=16384, parallel=2) as fake:
        (home / "tether.toml").write_text(
            f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\nmax_tokens = 16\n'
            "[heartbeat]\nevery_s = 1\n[budget.heartbeat]\nday_tokens = 1000000\n"
        )
        clock = StepClock(start=START, step=timedelta(0))
        d = ScheduledRuntime(home, clock)
        try:
            for _ in range(3):
                clock.advance(timedelta(seconds=1))
                assert d.scheduler.tick().heartbeat == "started"
                await d.scheduler.idle()
            assert [r.state for r in d.runtime.store.budget_rows()] == [
                "settled",
                "settled",
                "reserved",
            ]
        finally:
            await d.close()
        assert len(fake.requests) == 3
    store = open_store(home, load_config(home))
    try:
        rows = store.budget_rows()
        assert [r.state for r in rows] == ["settled"] * 3
        assert all(r.prompt_n > 0 for r in rows)
    finally:
        store.close()
