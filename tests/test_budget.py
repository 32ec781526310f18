"""Spend control end to end: the daemon's runtime and scheduler as ``daemon/compose.py``
wires them, the fake llama server over HTTP, the real SQLite ledger, real files and an
injected clock; the CLI as a child process."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon_helpers import ScheduledRuntime, tether
from tether.agent.budget import BudgetGate, BudgetRefusedError
from tether.config import BudgetConfig, KindBudget, load_config
from tether.core.spend.budget_rules import Bound
from tether.files import read_log
from tether.records import SpentToday, ToolSummary, TurnError, Usage, User
from tether.scheduler.ledger import RunLedger
from tether.sessions import Session, list_sessions
from tether.stores import open_store, open_sweep_store
from tether.stores.sqlite import SqliteStore
from tether.sweep import owners
from tether.testing.clock import StepClock
from tether.testing.fake_llama import FakeLlama, Reply
from web_helpers import allow, serve_page

pytestmark = pytest.mark.anyio
#: 09:00 UTC on 1 November 2026 is 22:00 in Auckland (UTC+13): its next local day starts
#: at 11:00 UTC, long before the UTC date changes.
ZONE = "Pacific/Auckland"
START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=16384, parallel=2) as f:
        yield f


@pytest.fixture
def clock() -> StepClock:
    return StepClock(start=START, step=timedelta(0))


def set_owner_zone(home: Path, zone: str) -> None:
    store = open_sweep_store(home, load_config(home))
    try:
        owners.add(store, owners.DEFAULT_OWNER, zone, START)
    finally:
        store.close()


@pytest.fixture
async def daemons() -> AsyncIterator[list[ScheduledRuntime]]:
    made: list[ScheduledRuntime] = []
    yield made
    for d in made:
        await d.close()


def configure(home: Path, fake: FakeLlama, extra: str) -> None:
    (home / "tether.toml").write_text(
        f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\nmax_tokens = 16\n{extra}'
    )


def telemetry(home: Path) -> list[dict[str, object]]:
    path = home / "telemetry" / "budget.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def beat(d: ScheduledRuntime, clock: StepClock) -> None:
    clock.advance(timedelta(seconds=1))
    assert d.scheduler.tick().heartbeat == "started"
    await d.scheduler.idle()


# -- the heartbeat stops at its day's budget, keeps it through a restart, resumes tomorrow -


async def test_a_heartbeat_every_second_stops_at_the_budget_and_resumes_the_next_local_day(
    home: Path, fake: FakeLlama, clock: StepClock, daemons: list[ScheduledRuntime]
) -> None:
    set_owner_zone(home, ZONE)
    day_tokens = 6000  # a beat of this home's prompts bounds at about 1500 tokens
    configure(
        home, fake, f"[heartbeat]\nevery_s = 1\n[budget.heartbeat]\nday_tokens = {day_tokens}\n"
    )
    d = ScheduledRuntime(home, clock)
    daemons.append(d)
    for _ in range(10):
        await beat(d, clock)
    ran = len(fake.requests)
    assert 2 <= ran <= 5  # a few beats, then none
    assert len(Session.open(home, "heartbeat").records) > 1
    # Skipped beats wrote nothing to the session: one User per request made.
    users = [r for r in Session.open(home, "heartbeat").records if isinstance(r, User)]
    assert len(users) == ran
    spent = d.runtime.store.budget_spent("2026-11-01", "heartbeat")
    assert spent.tokens <= day_tokens
    lines = telemetry(home)
    assert len(lines) == 10 - ran
    assert {(x["kind"], x["reason"], x["day"]) for x in lines} == {
        ("heartbeat", "budget_daily", "2026-11-01")
    }
    assert all(set(x) == {"time", "day", "kind", "reason", "bound_tokens"} for x in lines)

    # A restart keeps the day's spend.
    await d.close()
    daemons.remove(d)
    again = ScheduledRuntime(home, clock)
    daemons.append(again)
    await beat(again, clock)
    assert len(fake.requests) == ran
    assert again.runtime.store.budget_spent("2026-11-01", "heartbeat") == spent

    # The owner's next local day (still 1 November in UTC) has a fresh budget.
    clock.advance(timedelta(hours=2))
    assert clock.current.date().isoformat() == "2026-11-01"
    await beat(again, clock)
    assert len(fake.requests) == ran + 1
    assert again.runtime.store.budget_spent("2026-11-02", "heartbeat").tokens > 0


# -- compaction and cron over budget ------------------------------------------------------


async def test_a_compaction_over_budget_uses_the_fallback_summary(
    home: Path, fake: FakeLlama, clock: StepClock, daemons: list[ScheduledRuntime]
) -> None:
    configure(home, fake, "[budget.compaction]\ncall_tokens = 10\n")
    d = ScheduledRuntime(home, clock)
    daemons.append(d)
    await d.runtime.agent.run_turn("mm-alpha", "Remember the harbour code is blue-seven.")
    done = await d.runtime.agent.compact_now("mm-alpha")
    assert (done.source, done.to_epoch) == ("fallback", 1)
    assert len(fake.requests) == 1  # the live turn only: the summary call was never sent
    assert "blue-seven" in (Session.open(home, "mm-alpha").carry or "")
    (refused,) = [r for r in d.runtime.store.budget_rows() if r.state == "refused"]
    assert (refused.kind, refused.reason, refused.session) == (
        "compaction",
        "budget_call",
        "mm-alpha",
    )
    assert [x["reason"] for x in telemetry(home)] == ["budget_call"]


async def test_a_cron_job_over_budget_is_a_skipped_run(
    home: Path, fake: FakeLlama, clock: StepClock, daemons: list[ScheduledRuntime]
) -> None:
    (home / "jobs" / "brief.toml").write_text('schedule = "* * * * *"\nprompt = "Brief me."\n')
    configure(home, fake, "[budget]\nday_usd = 0.001\nusd_per_mtok_in = 3.0\n")
    d = ScheduledRuntime(home, clock)
    daemons.append(d)
    (event,) = d.scheduler.tick().cron
    await d.scheduler.idle()
    ledger = RunLedger(home).read()
    assert [(r.session, r.status, r.reason) for r in ledger] == [
        (event.session, "started", None),
        (event.session, "skipped", "budget_usd"),
    ]
    assert fake.requests == []
    assert event.session not in list_sessions(home)  # refused before its session was made
    line = (home / "jobs" / "runs.jsonl").read_text().splitlines()[-1]
    assert json.loads(line)["reason"] == "budget_usd"


async def test_live_turns_are_capped_only_when_asked(
    home: Path, fake: FakeLlama, clock: StepClock, daemons: list[ScheduledRuntime]
) -> None:
    configure(home, fake, "[budget]\nday_usd = 0.0\nusd_per_mtok_in = 3.0\n")
    d = ScheduledRuntime(home, clock)
    daemons.append(d)
    await d.runtime.agent.run_turn("mm-alpha", "hello")  # day_usd is background work only
    assert d.runtime.store.budget_rows() == []  # and an uncapped live turn costs no ledger row
    await d.close()
    daemons.remove(d)
    configure(home, fake, "[budget]\nlive_day_tokens = 100\n")
    d = ScheduledRuntime(home, clock)
    daemons.append(d)
    with pytest.raises(BudgetRefusedError) as refused:
        await d.runtime.agent.run_turn("mm-alpha", "hello again")
    assert (refused.value.kind, refused.value.reason) == ("live", "budget_daily")
    assert len(fake.requests) == 1
    assert [r.text for r in Session.open(home, "mm-alpha").records if isinstance(r, User)] == [
        "hello"
    ]


# -- the ledger: two calls at once cannot both slip under a cap ---------------------------


def test_concurrent_reservations_from_two_connections_never_pass_the_cap(home: Path) -> None:
    path = home / "tether.db"
    open_store(home, load_config(home)).close()  # migrated
    cap = 10 * 130
    config = BudgetConfig(cron=KindBudget(day_tokens=cap))
    clock = StepClock(start=START, step=timedelta(0))
    stores = [SqliteStore(path), SqliteStore(path)]
    gates = [
        BudgetGate(config=config, store=s, clock=clock, zone=UTC, telemetry=None) for s in stores
    ]
    allowed: list[int] = []
    lock = threading.Lock()

    def worker(gate: BudgetGate) -> None:
        for _ in range(20):
            try:
                r = gate.reserve("cron", "job-x-t1", Bound(prompt=100, max_tokens=30))
            except BudgetRefusedError:
                continue
            with lock:
                allowed.append(r.id or 0)

    threads = [threading.Thread(target=worker, args=(g,)) for g in gates for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(allowed) == 10
    assert stores[0].budget_spent("2026-11-01", "cron") == SpentToday(tokens=cap, usd=0.0)
    for s in stores:
        s.close()


# -- tether usage and tether doctor, as a user runs them -----------------------------------


async def test_the_usage_report_sums_equal_the_logs_usage_records(
    home: Path, fake: FakeLlama, clock: StepClock, daemons: list[ScheduledRuntime]
) -> None:
    configure(home, fake, "[heartbeat]\nevery_s = 1\n")
    d = ScheduledRuntime(home, clock)
    daemons.append(d)
    for n in range(3):
        await d.runtime.agent.run_turn("mm-alpha", f"message {n} about the lighthouse")
        await beat(d, clock)
    await d.runtime.agent.compact_now("mm-alpha")
    await d.runtime.agent.run_turn("mm-beta", "a second conversation")
    await d.close()
    daemons.remove(d)

    logged: list[Usage] = []
    live: list[Usage] = []
    for sid in list_sessions(home):
        for path in sorted((home / "sessions" / sid).glob("*.jsonl")):
            found = [r for r in read_log(path)[0] if isinstance(r, Usage)]
            logged += found
            live += found if sid.startswith("mm-") else []
    assert len(logged) == 7
    out = tether(home, "usage", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    compaction = [row for row in report["rows"] if row["key"] == "compaction"]
    turns = [row for row in report["rows"] if row["key"] != "compaction"]
    for field in ("cache_n", "prompt_n", "predicted_n"):
        assert sum(row[field] for row in turns) == sum(getattr(u, field) for u in logged)
    assert {row["key"]: row["calls"] for row in turns} == {"live": 4, "heartbeat": 3}
    assert compaction[0]["calls"] == 1  # from the gate's ledger: compaction logs no Usage
    assert report["total"]["calls"] == 8
    cached = sum(u.cache_n for u in live)
    assert report["main_cache_hit_share"] == cached / (cached + sum(u.prompt_n for u in live))
    assert report["main_cache_hit_share"] > 0  # the heartbeats never evicted the live cache
    by_session = json.loads(tether(home, "usage", "--by", "session", "--json").stdout)
    keys = {row["key"] for row in by_session["rows"]}
    assert keys == {"mm-alpha", "mm-beta", "heartbeat"}
    assert by_session["total"] == report["total"]
    later = tether(home, "usage", "--since", "2026-11-02", "--json")
    assert json.loads(later.stdout)["rows"] == []
    text = tether(home, "usage", "--by", "day")
    assert "2026-11-01" in text.stdout
    assert "main-slot cache hit share:" in text.stdout
    bad = tether(home, "usage", "--since", "yesterday")
    assert bad.returncode == 2
    assert "yesterday" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_doctor_warns_when_a_budget_was_hit_today(home: Path) -> None:
    with FakeLlama(n_ctx=8192, parallel=2) as fake:
        (home / "tether.toml").write_text(
            f'[llm]\nurl = "{fake.url}"\n[expect]\nn_ctx = 8192\n'
            "[budget.heartbeat]\ncall_tokens = 10\n"
        )
        quiet = tether(home, "doctor", "--json")
        assert json.loads(quiet.stdout)["warnings"] == []
        config = load_config(home)
        store = open_store(home, config)
        # The doctor's "today" is the wall clock's, so this refusal is made at it.
        now = StepClock(start=datetime.now(UTC), step=timedelta(0))
        gate = BudgetGate(config=config.budget, store=store, clock=now, zone=UTC)
        with pytest.raises(BudgetRefusedError):
            gate.reserve("heartbeat", "heartbeat", Bound(prompt=50, max_tokens=16))
        store.close()
        out = tether(home, "doctor", env={"TZ": "UTC"})
        as_json = tether(home, "doctor", "--json", env={"TZ": "UTC"})
    assert out.returncode == 0, out.stderr  # a warning, not a failure
    assert "WARN budget: heartbeat hit its budget today (budget_call" in out.stdout
    assert json.loads(as_json.stdout)["warnings"][0].startswith("budget: heartbeat")


# -- a bad budget value is a config error naming the key ---------------------------------


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[budget.heartbeat]\nday_tokens = -1\n", "budget.heartbeat.day_tokens"),
        ('[budget.cron]\ncall_tokens = "many"\n', "budget.cron.call_tokens"),
        ("[budget]\nday_usd = -0.5\n", "budget.day_usd"),
        ("[budget]\nusd_per_mtok_in = nan\n", "budget.usd_per_mtok_in"),
        ("[budget.nightly]\nday_tokens = 5\n", "budget.nightly"),
        ("[budget.sweep]\ndaily_tokens = 5\n", "budget.sweep.daily_tokens"),
    ],
)
def test_a_bad_budget_value_is_a_config_error_naming_the_key(
    home: Path, toml: str, key: str
) -> None:
    (home / "tether.toml").write_text(toml)
    out = tether(home, "config", "check")
    assert out.returncode == 2
    assert f"tether.toml: {key}:" in out.stderr
    assert "Traceback" not in out.stderr


# -- tool summaries and a tool loop over budget -------------------------------------------


@pytest.fixture
def web() -> Iterator[str]:
    with serve_page(("<p>The harbour ferry timetable changes in May. </p>" * 160).encode()) as url:
        yield url


async def test_a_tool_summary_over_budget_is_not_made(
    home: Path, fake: FakeLlama, clock: StepClock, daemons: list[ScheduledRuntime], web: str
) -> None:
    # The page is on loopback, so the owner allows it (issue 24: no private networks).
    configure(home, fake, "[budget.tool_summary]\nday_tokens = 0\n" + allow(web))
    d = ScheduledRuntime(home, clock)
    daemons.append(d)
    fake.script(Reply(tool_calls=[("http_fetch", {"url": web})]), slot=0)
    fake.script(Reply(content="Read it."), slot=0)
    await d.runtime.agent.run_turn("chat", "read that page")
    await d.scheduler.idle()
    assert not any(isinstance(r, ToolSummary) for r in Session.open(home, "chat").records)
    assert [r.slot for r in fake.requests] == [0, 0]  # no background call was sent
    assert [(x["kind"], x["reason"]) for x in telemetry(home)] == [("tool_summary", "budget_daily")]


async def test_a_later_step_of_a_tool_loop_over_budget_ends_the_turn_with_a_budget_error(
    home: Path, fake: FakeLlama, clock: StepClock, daemons: list[ScheduledRuntime], web: str
) -> None:
    # The first request (about 1500 tokens) fits; the page fetched makes the next too big.
    configure(
        home,
        fake,
        "[heartbeat]\nevery_s = 1\n[budget.heartbeat]\ncall_tokens = 2500\n" + allow(web),
    )
    d = ScheduledRuntime(home, clock)
    daemons.append(d)
    fake.script(Reply(tool_calls=[("http_fetch", {"url": web})]), slot=1)
    await beat(d, clock)
    records = Session.open(home, "heartbeat").records
    assert [r.kind for r in records if isinstance(r, TurnError)] == ["budget"]
    assert [r.slot for r in fake.requests] == [1, 1]  # the first step, then its summary
    assert not fake.requests[1].tools  # the summary; the turn's second step was never sent
    assert [x["reason"] for x in telemetry(home)] == ["budget_call"]
