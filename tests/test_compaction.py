"""Compaction end to end: the fake llama server over HTTP, real files, real child processes."""

from __future__ import annotations

import math
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from daemon_helpers import tether
from tether.agent.compaction import CompactionFailedError
from tether.agent.outcomes import TurnFailedError
from tether.checkpoint.bank import ledger
from tether.config import load_config
from tether.core.context.compaction_rules import CHECKPOINTS_HEADING
from tether.core.context.replay import CARRY_HEADING
from tether.daemon.compose import Runtime, build_runtime
from tether.records import Assistant, EpochEnd, SessionStart, TurnError, User
from tether.sessions import Session
from tether.testing.clock import StepClock
from tether.testing.fake_llama import FakeLlama, Reply, context_error_json, error_json

pytestmark = pytest.mark.anyio
AWS_KEY = "AKIA" + "QWERTYUIOPASDFGH"
COMPACT_LINE = "Write a summary of the conversation above"


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=65536, parallel=2) as f:
        yield f


def runtime(home: Path, fake: FakeLlama, n_ctx: int = 32768, threshold: float = 0.85) -> Runtime:
    (home / "tether.toml").write_text(
        f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n[expect]\nn_ctx = {n_ctx}\n'
        f"[compact]\nthreshold = {threshold}\n"
    )
    return build_runtime(home, load_config(home), clock=StepClock())


@pytest.fixture
async def rt(home: Path, fake: FakeLlama) -> AsyncIterator[Runtime]:
    r = runtime(home, fake)
    yield r
    await r.aclose()


def summary_requests(fake: FakeLlama) -> list[int]:
    return [i for i, r in enumerate(fake.requests) if r.slot == 1]


async def _depth_after_one_turn(home: Path, fake: FakeLlama) -> int:
    r = runtime(home, fake)
    try:
        done = await r.agent.run_turn("chat", "tell me about the garden plan")
    finally:
        await r.aclose()
    assert done.usage is not None
    return done.usage.cache_n + done.usage.prompt_n


async def test_84_percent_does_nothing(home: Path, fake: FakeLlama) -> None:
    depth = await _depth_after_one_turn(home, fake)
    r = runtime(home, fake, n_ctx=math.ceil(depth / 0.84) + 1)
    try:
        done = await r.agent.run_turn("chat", "and the watering?")
    finally:
        await r.aclose()
    assert done.epoch == 0
    assert summary_requests(fake) == []


async def test_85_percent_compacts_before_the_next_turn(home: Path, fake: FakeLlama) -> None:
    depth = await _depth_after_one_turn(home, fake)
    r = runtime(home, fake, n_ctx=math.floor(depth / 0.85))
    try:
        fake.script(Reply(content="We planned the garden."), slot=1)
        fake.script(Reply(content="Water at seven."), slot=0)
        done = await r.agent.run_turn("chat", "and the watering?")
    finally:
        await r.aclose()
    assert done.epoch == 1
    assert done.reply == "Water at seven."
    (i,) = summary_requests(fake)
    summary_req = fake.requests[i]
    assert summary_req.tools == []
    assert COMPACT_LINE in summary_req.messages[-1]["content"]
    # The next turn ran after the summary, as a new prefix: baseline + carry + message.
    first = fake.requests[i + 1]
    assert first.slot == 0
    assert [m["role"] for m in first.messages] == ["system", "user", "user"]
    carry = first.messages[1]["content"]
    assert carry.startswith(CARRY_HEADING)
    assert "We planned the garden." in carry
    assert CHECKPOINTS_HEADING in carry
    assert "tether://corpus/chat.seg-" in carry
    assert first.messages[2] == {"role": "user", "content": "and the watering?"}
    assert first.cache_n < fake.requests[0].n_tokens  # not an extension of epoch 0
    s = Session.open(home, "chat")
    assert s.epochs == [0, 1]
    assert s.turns() == 2


async def test_quiet_session_is_never_compacted(rt: Runtime, fake: FakeLlama) -> None:
    await rt.agent.run_turn("chat", "hello")
    assert await rt.agent.compact_if_due("chat") is None
    assert summary_requests(fake) == []


async def test_context_full_compacts_and_retries_once(rt: Runtime, fake: FakeLlama) -> None:
    await rt.agent.run_turn("chat", "first, small")
    fake.script(Reply(status=400, error_body=context_error_json(40000, 32768)), slot=0)
    fake.script(Reply(content="Summary of epoch zero."), slot=1)
    fake.script(Reply(content="Answered in epoch one."), slot=0)
    done = await rt.agent.run_turn("chat", "a message that does not fit")
    assert done.reply == "Answered in epoch one."
    assert done.epoch == 1
    old = [type(r).__name__ for r in Session.open(rt.home, "chat").records]
    assert old == ["SessionStart", "User", "Assistant", "Usage"]
    epoch0 = (rt.home / "sessions" / "chat" / "0.jsonl").read_text().splitlines()
    assert '"kind":"session_full"' in epoch0[-2]
    assert '"type":"EpochEnd"' in epoch0[-1]


async def test_context_full_twice_ends_session_full(rt: Runtime, fake: FakeLlama) -> None:
    await rt.agent.run_turn("chat", "first")
    fake.script(Reply(status=400, error_body=context_error_json(40000, 32768)), slot=0)
    fake.script(Reply(content="summary"), slot=1)
    fake.script(Reply(status=400, error_body=context_error_json(40000, 32768)), slot=0)
    with pytest.raises(TurnFailedError) as info:
        await rt.agent.run_turn("chat", "huge")
    assert info.value.kind == "session_full"
    s = Session.open(rt.home, "chat")
    assert s.epoch == 1
    last = s.records[-1]
    assert isinstance(last, TurnError)
    assert last.kind == "session_full"


async def test_summary_on_background_slot_keeps_main_cache(rt: Runtime, fake: FakeLlama) -> None:
    await rt.agent.run_turn("alpha", "alpha's first message")
    b1 = await rt.agent.run_turn("bravo", "bravo's first message")
    fake.script(Reply(content="alpha summary"), slot=1)
    done = await rt.agent.compact_now("alpha")
    assert done.to_epoch == 1
    summary = fake.requests[summary_requests(fake)[0]]
    assert summary.slot == 1
    b2 = await rt.agent.run_turn("bravo", "bravo's second message")
    assert b1.usage is not None
    assert b2.usage is not None
    assert b2.usage.cache_n == b1.usage.cache_n + b1.usage.prompt_n + b1.usage.predicted_n


async def test_fallback_summary_when_the_call_fails(rt: Runtime, fake: FakeLlama) -> None:
    await rt.agent.run_turn("chat", "remember the blue door")
    await rt.agent.run_turn("chat", "and the red gate")
    fake.script(Reply(status=500, error_body=error_json(500, "boom", "server_error")), slot=1)
    done = await rt.agent.compact_now("chat")
    assert done.source == "fallback"
    s = Session.open(rt.home, "chat")
    assert s.carry is not None
    assert s.carry.index("blue door") < s.carry.index("red gate")


async def test_both_fail_leaves_the_epoch_intact(rt: Runtime, fake: FakeLlama) -> None:
    fake.script(Reply(tool_calls=[("note", {"text": "x"})]), slot=0)
    fake.script(Reply(content="done"), slot=0)
    await rt.agent.run_turn("chat", "   ")  # no owner text to fall back on
    log = rt.home / "sessions" / "chat" / "0.jsonl"
    before = log.read_bytes()
    fake.script(Reply(status=500, error_body=error_json(500, "boom", "server_error")), slot=1)
    with pytest.raises(CompactionFailedError) as info:
        await rt.agent.compact_now("chat")
    assert info.value.runbook == "session-compact-failed"
    assert "session-compact-failed" in str(info.value)
    assert log.read_bytes() == before
    assert Session.open(rt.home, "chat").epoch == 0


async def test_secret_never_reaches_the_segment_or_summary(rt: Runtime, fake: FakeLlama) -> None:
    await rt.agent.run_turn("chat", f"my key is {AWS_KEY} keep it safe")
    fake.script(Reply(content=f"The owner shared the key {AWS_KEY}."), slot=1)
    await rt.agent.compact_now("chat")
    for path in (rt.home / "corpus").iterdir():
        assert AWS_KEY.encode() not in path.read_bytes(), path
    s = Session.open(rt.home, "chat")
    assert s.carry is not None
    assert AWS_KEY not in s.carry
    assert "[REDACTED:aws-access-key]" in s.carry
    assert AWS_KEY not in (rt.home / "sessions" / "chat" / "1.baseline.json").read_text()


async def test_identity_edit_lands_in_the_new_baseline(rt: Runtime, fake: FakeLlama) -> None:
    fake.script(Reply(tool_calls=[("add", {"text": "The owner's cat is called Miso"})]), slot=0)
    fake.script(Reply(content="noted"), slot=0)
    await rt.agent.run_turn("chat", "my cat is Miso")
    old = Session.open(rt.home, "chat").baseline
    assert "Miso" not in old.memory  # the epoch's prefix does not change mid-epoch
    await rt.agent.compact_now("chat")
    new = Session.open(rt.home, "chat").baseline
    assert "The owner's cat is called Miso" in new.memory


async def test_page_read_follows_the_checkpoint_link(rt: Runtime, fake: FakeLlama) -> None:
    await rt.agent.run_turn("chat", "the boat is moored at pier nineteen")
    fake.script(Reply(content="boat talk"), slot=1)
    await rt.agent.compact_now("chat")
    (boundary,) = ledger(rt.home, "chat")
    link = f"tether://corpus/chat.seg-{boundary.hash}"
    fake.script(Reply(tool_calls=[("page_read", {"ref": link})]), slot=0)
    fake.script(Reply(content="pier nineteen"), slot=0)
    await rt.agent.run_turn("chat", "where is the boat?")
    tool_msg = fake.requests[-1].messages[-1]
    assert tool_msg["role"] == "tool"
    assert "pier nineteen" in tool_msg["content"]


async def test_recall_finds_epoch_zero_after_compaction(rt: Runtime, fake: FakeLlama) -> None:
    await rt.agent.run_turn("chat", "the spare key hides under the green flowerpot")
    await rt.agent.compact_now("chat")
    fake.script(Reply(tool_calls=[("recall", {"query": "where is the spare key?"})]), slot=0)
    fake.script(Reply(content="under the flowerpot"), slot=0)
    await rt.agent.run_turn("chat", "where did I hide the spare key?")
    tool_msg = fake.requests[-1].messages[-1]
    assert "green flowerpot" in tool_msg["content"]
    assert "[memory]" in tool_msg["content"]


def _tether(home: Path, *args: str, crash: str | None = None) -> subprocess.CompletedProcess[str]:
    return tether(home, *args, env={"TETHER_CRASH_AT": crash} if crash else None)


@pytest.mark.slow
async def test_crash_between_epoch_end_and_baseline(rt: Runtime, fake: FakeLlama) -> None:
    await rt.agent.run_turn("chat", "the ferry leaves at noon")
    fake.script(Reply(content="Ferry at noon."), slot=1)
    out = _tether(rt.home, "session", "compact", "chat", crash="epoch-end-before-baseline")
    assert out.returncode == -9, out.stderr
    directory = rt.home / "sessions" / "chat"
    assert sorted(p.name for p in directory.glob("*.json*")) == ["0.baseline.json", "0.jsonl"]
    s = Session.open(rt.home, "chat")
    assert s.epoch == 0
    assert s.ended
    # The next turn finishes the compaction from EpochEnd, then runs in epoch 1.
    fake.script(Reply(content="on epoch one"), slot=0)
    done = await rt.agent.run_turn("chat", "when is the ferry?")
    assert done.epoch == 1
    s = Session.open(rt.home, "chat")
    assert s.carry is not None
    assert "Ferry at noon." in s.carry
    users = [r.text for n in s.epochs for r in _records(directory, n) if isinstance(r, User)]
    assert users == ["the ferry leaves at noon", "when is the ferry?"]
    assert sum(isinstance(r, EpochEnd) for r in _records(directory, 0)) == 1
    assert len(list((rt.home / "corpus").glob("chat.seg-*.txt"))) == 1


@pytest.mark.slow
async def test_crash_after_banking_banks_once(rt: Runtime, fake: FakeLlama) -> None:
    await rt.agent.run_turn("chat", "the meeting moved to thursday")
    out = _tether(rt.home, "session", "compact", "chat", crash="compact-after-bank")
    assert out.returncode == -9, out.stderr
    assert Session.open(rt.home, "chat").epoch == 0
    again = _tether(rt.home, "session", "compact", "chat", "--json")
    assert again.returncode == 0, again.stderr
    assert '"segment_code":"segment_dup"' in again.stdout
    assert len(list((rt.home / "corpus").glob("chat.seg-*.txt"))) == 1
    assert len(ledger(rt.home, "chat")) == 1
    assert Session.open(rt.home, "chat").epoch == 1


def _records(directory: Path, epoch: int) -> list[object]:
    from tether.files import read_log

    records, _ = read_log(directory / f"{epoch}.jsonl")
    return list(records)


def test_session_compact_cli(home: Path, fake: FakeLlama) -> None:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n')
    fake.script(Reply(content="hi"))
    assert _tether(home, "chat", "hello there").returncode == 0
    fake.script(Reply(content="They said hello."), slot=1)
    out = _tether(home, "session", "compact", "chat")
    assert out.returncode == 0, out.stderr
    assert "compacted chat: epoch 0 -> 1 (summary: model" in out.stdout
    show = _tether(home, "session", "show", "chat", "--json")
    assert '"epoch":1' in show.stdout
    missing = _tether(home, "session", "compact", "nobody")
    assert missing.returncode == 2
    assert "no session 'nobody'" in missing.stderr
    assert isinstance(Session.open(home, "chat").records[0], SessionStart)
    assert not any(isinstance(r, Assistant) for r in Session.open(home, "chat").records)
