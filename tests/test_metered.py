"""The metered model call (``agent.metered``), against the fake llama-server over HTTP and
a real SQLite ledger: whatever way a call ends (it comes back, it times out, it is
cancelled while it waits on the model, the budget refuses it) its reservation is settled,
so the ledger never keeps a call ``reserved`` at its bound, and an extraction call is one
line of the call log (a refusal none: nothing was sent)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tether.agent.budget import BudgetGate, BudgetRefusedError
from tether.agent.locks import SlotGates
from tether.agent.metered import Meter, MeteredLlm
from tether.config import BudgetConfig, KindBudget, load_config
from tether.core.timing.scheduling import Priority
from tether.daemon.compose import build_llm
from tether.errors import LlmTimeoutError
from tether.extract.calls import CallLog, read_calls
from tether.ports import Store
from tether.records import ChatMessage, CompletionRequest, SpendRow
from tether.stores import open_store
from tether.testing.clock import StepClock
from tether.testing.fake_llama import FakeLlama, Reply

START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
REQUEST = CompletionRequest(
    messages=(ChatMessage(role="user", content="What did we settle on for the ledger?"),),
    slot=1,
    max_tokens=32,
)


@pytest.fixture
def store(home: Path) -> Iterator[Store]:
    s = open_store(home, load_config(home))
    try:
        yield s
    finally:
        s.close()


def metered(
    home: Path, fake: FakeLlama, store: Store, day_tokens: int = 100_000, timeout_s: float = 0.5
) -> tuple[MeteredLlm, BudgetGate]:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = {timeout_s}\n')
    gate = BudgetGate(
        config=BudgetConfig(harvest=KindBudget(day_tokens=day_tokens)),
        store=store,
        clock=StepClock(start=START, step=timedelta(0)),
        zone=UTC,
    )
    meter = Meter(gate, SlotGates(), 256)
    calls = CallLog(home, "harvest", now=lambda: START)
    return MeteredLlm(
        build_llm(load_config(home)), meter, "harvest", priority=Priority.SWEEP, calls=calls
    ), gate


def ledger(gate: BudgetGate, store: Store) -> list[SpendRow]:
    gate.flush()  # what the gate kept for its next write
    return store.budget_rows()


@pytest.mark.anyio
async def test_a_call_that_comes_back_is_settled_with_what_it_used(
    home: Path, fake: FakeLlama, store: Store
) -> None:
    llm, gate = metered(home, fake, store)
    fake.script(Reply(content="PostgreSQL 16."))
    try:
        done = await llm.complete(REQUEST)
    finally:
        await llm.llm.aclose()
    assert done.content == "PostgreSQL 16."
    (row,) = ledger(gate, store)
    assert (row.kind, row.state) == ("harvest", "settled")
    assert row.prompt_n == done.prompt_n > 0
    assert row.predicted_n == done.predicted_n
    (line,) = read_calls(home)
    assert (line.ok, line.gated, line.prompt_n) == (True, True, done.prompt_n)


@pytest.mark.anyio
async def test_a_call_that_times_out_is_settled_at_nothing_and_logged_failed(
    home: Path, fake: FakeLlama, store: Store
) -> None:
    llm, gate = metered(home, fake, store)
    fake.script(Reply(content="late", delay_s=3))
    try:
        with pytest.raises(LlmTimeoutError):
            await llm.complete(REQUEST)
    finally:
        await llm.llm.aclose()
    (row,) = ledger(gate, store)
    assert (row.state, row.tokens, row.usd) == ("settled", 0, 0.0)
    (line,) = read_calls(home)
    assert (line.ok, line.reason) == (False, "model_timeout")


@pytest.mark.anyio
async def test_a_call_cancelled_while_it_waits_on_the_model_is_settled(
    home: Path, fake: FakeLlama, store: Store
) -> None:
    llm, gate = metered(home, fake, store, timeout_s=30)
    fake.script(Reply(content="late", delay_s=2))
    try:
        task = asyncio.create_task(llm.complete(REQUEST))
        while not store.budget_rows():  # reserved: the request is on its way
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        await llm.llm.aclose()
    (row,) = ledger(gate, store)
    assert (row.state, row.tokens) == ("settled", 0)  # not left reserved at its bound
    assert read_calls(home) == []  # a cancelled call is no line: it neither ended nor failed


@pytest.mark.anyio
async def test_a_refused_call_sends_nothing_and_is_no_call_log_line(
    home: Path, fake: FakeLlama, store: Store
) -> None:
    llm, gate = metered(home, fake, store, day_tokens=10)
    try:
        with pytest.raises(BudgetRefusedError) as refused:
            await llm.complete(REQUEST)
    finally:
        await llm.llm.aclose()
    assert refused.value.reason == "budget_daily"
    assert fake.requests == []
    (row,) = ledger(gate, store)
    assert (row.state, row.reason) == ("refused", "budget_daily")
    assert read_calls(home) == []
