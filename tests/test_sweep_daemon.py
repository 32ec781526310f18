"""``tether serve`` runs the sweep by itself: the daemon's sweep loop over the runtime it
composes, the fake llama-server over real HTTP, a stepping clock (no wall-clock waits)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from tether.config import load_config
from tether.core.timing.scheduling import Priority
from tether.daemon.compose import Runtime, build_runtime
from tether.daemon.sweep_loop import SweepLoop
from tether.memory.indexer import index_home
from tether.records import Assistant, Baseline, User
from tether.sessions import Session
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.testing.clock import StepClock
from tether.testing.fake_llama import FakeLlama, Reply

pytestmark = pytest.mark.anyio

D = date(2026, 11, 1)


def at(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=65536, parallel=2) as f:
        yield f


@pytest.fixture
async def runtime(home: Path, fake: FakeLlama) -> AsyncIterator[tuple[Runtime, StepClock]]:
    (home / "tether.toml").write_text(
        f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n\n[sweep]\nenabled = true\nsettle_s = 900\n'
    )
    clock = StepClock(at(D, 8))
    rt = build_runtime(home, load_config(home), clock=clock)
    yield rt, clock
    await rt.aclose()


def chat(rt: Runtime, sid: str, day: date, text: str) -> None:
    t = at(day, 10)
    s = Session.create(rt.home, sid, baseline=Baseline(system="s", memory="m"), slot=0, time=t)
    s.append(User(time=t, text=text), Assistant(time=t + timedelta(seconds=3), text="Noted."))
    index_home(rt.home, rt.store)
    # These tests are about the daily channel: the runtime's onboarding marks come off.
    meta = rt.store.session_meta(sid)
    assert meta is not None
    rt.store.put_session_meta(msgspec.structs.replace(meta, onboarding=False))


def script_day(fake: FakeLlama, sid: str, entity: str, text: str) -> None:
    fake.script(Reply(content='{"excerpts": []}'))
    memory = {"text": text, "subject": "owner", "entity": entity, "sessions": [sid]}
    fake.script(Reply(content=json.dumps({"memories": [memory], "folders": []})))


def facts(home: Path) -> list[str]:
    with SqliteSweepStore(home / "tether.db") as sweep, sweep.transaction(write=False) as tx:
        return sorted(f.text for f in tx.facts("owner"))


def cursor(home: Path) -> date | None:
    with SqliteSweepStore(home / "tether.db") as sweep, sweep.transaction(write=False) as tx:
        c = tx.cursor("owner")
    return None if c is None else c.local_date


def test_the_sweep_waits_below_every_other_background_kind() -> None:
    assert max(Priority) == Priority.SWEEP


async def test_a_day_that_ends_while_the_daemon_runs_is_swept_after_settle(
    runtime: tuple[Runtime, StepClock], fake: FakeLlama
) -> None:
    rt, clock = runtime
    loop = SweepLoop(rt)
    chat(rt, "club", D, "We moved the book club to Tuesdays.")
    await loop.tick()  # today: nothing of D yet
    assert fake.requests == []
    clock.current = at(D + timedelta(days=1), 0, 5)  # ended, not settled
    await loop.tick()
    assert fake.requests == []
    assert cursor(rt.home) == D - timedelta(days=1)
    script_day(fake, "club", "book-club", "Book club on Tuesdays")
    clock.current = at(D + timedelta(days=1), 0, 20)
    report = await loop.tick()
    assert report is not None
    assert len(fake.requests) == 2
    assert all(r.slot == rt.config.slots.background for r in fake.requests)
    assert facts(rt.home) == ["Book club on Tuesdays"]
    assert cursor(rt.home) == D
    # Tomorrow's first epoch knows today's decision: the fact is in its memory block.
    assert "- Book club on Tuesdays\n" in rt.agent.new_baseline("next").memory


async def test_days_that_ended_while_it_was_down_are_caught_up_three_at_most(
    runtime: tuple[Runtime, StepClock], fake: FakeLlama
) -> None:
    rt, clock = runtime
    loop = SweepLoop(rt)
    await loop.tick()  # the owner is made; its first day, D - 1, is swept (empty)
    assert cursor(rt.home) == D - timedelta(days=1)
    chat(rt, "a", D, "I adopted a cat named Miso.")
    chat(rt, "b", D + timedelta(days=1), "I started learning Go.")
    script_day(fake, "a", "pet", "A cat named Miso")
    script_day(fake, "b", "language", "Learning Go")
    clock.current = at(D + timedelta(days=5), 9)  # down for days
    await loop.tick()
    # D, D+1, D+2 in this run (three at most), oldest first; the rest at the next tick.
    assert cursor(rt.home) == D + timedelta(days=2)
    assert facts(rt.home) == ["A cat named Miso", "Learning Go"]
    assert len(fake.requests) == 4
    await loop.tick()
    assert cursor(rt.home) == D + timedelta(days=4)
    assert len(fake.requests) == 4  # days without sessions need no model


async def test_a_closed_sweep_runs_nothing(home: Path, fake: FakeLlama) -> None:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\n')
    rt = build_runtime(home, load_config(home), clock=StepClock(at(D, 8)))
    try:
        loop = SweepLoop(rt)
        assert await loop.tick() is None
        loop.start()
        assert loop._task is None
    finally:
        await rt.aclose()
    assert fake.requests == []
