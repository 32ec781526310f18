"""Integration lane: the client and the fake agree with a REAL llama-server.

The server is started for this module with ``../shared/tools/real-llama.sh PORT 4096``
(two slots of 2048 tokens, SmolLM2-135M). ``TETHER_SHARED`` overrides where ``shared``
is; without the script the lane is skipped, saying why.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import httpx
import pytest

from tether.errors import ContextFullError
from tether.llm import LlamaServerClient
from tether.records import ChatMessage, CompletionRequest, ToolCallRequest, ToolSchema
from tether.testing import FakeLlama

pytestmark = [pytest.mark.real_llama, pytest.mark.anyio]

N_CTX_PER_SLOT = 2048  # real-llama.sh PORT 4096 with 2 slots
SYSTEM = ChatMessage(role="system", content="You are a helpful assistant. Answer briefly.")
OVERFLOW = ChatMessage(role="user", content=" ".join(["word"] * 5000))


def _shared() -> Path:
    override = os.environ.get("TETHER_SHARED")
    return Path(override) if override else Path(__file__).resolve().parents[2] / "shared"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has already exited


def _stop(pid_file: Path) -> None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            if not _alive(pid):
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    pid_file.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def real_url() -> Iterator[str]:
    script = _shared() / "tools" / "real-llama.sh"
    if not script.is_file():
        reason = (
            f"no real llama-server: {script} is absent (set TETHER_SHARED to the shared folder)"
        )
        print(reason)
        pytest.skip(reason)
    port = _free_port()
    venv = Path(os.environ.get("REAL_LLAMA_VENV", "/tmp/real-llama"))
    try:
        started = subprocess.run(
            ["bash", str(script), str(port), "4096"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,  # the first run installs a venv; later runs take seconds
            check=False,
        )
        if started.returncode != 0:
            pytest.fail(f"real-llama.sh failed ({started.returncode}): {started.stderr[-2000:]}")
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(venv / f"server-{port}.pid")


def client(url: str) -> LlamaServerClient:
    return LlamaServerClient(url, timeout_s=60.0)


async def test_completion_on_slot_0_returns_content(real_url: str) -> None:
    request = CompletionRequest(
        messages=(SYSTEM, ChatMessage(role="user", content="Name three colours.")),
        slot=0,
        max_tokens=16,
        temperature=0.0,
    )
    async with client(real_url) as llm:
        completion = await llm.complete(request)
    assert completion.content.strip()
    assert completion.predicted_n > 0
    assert completion.prompt_n + completion.cache_n > 0


async def test_extending_a_conversation_on_slot_0_hits_the_cache(real_url: str) -> None:
    first_msgs = (SYSTEM, ChatMessage(role="user", content="What is the capital of France?"))
    async with client(real_url) as llm:
        first = await llm.complete(
            CompletionRequest(messages=first_msgs, slot=0, max_tokens=12, temperature=0.0)
        )
        second_msgs = (
            *first_msgs,
            ChatMessage(role="assistant", content=first.content),
            ChatMessage(role="user", content="And of Italy?"),
        )
        second = await llm.complete(
            CompletionRequest(messages=second_msgs, slot=0, max_tokens=12, temperature=0.0)
        )
    assert second.cache_n > 0
    assert second.prompt_n > 0


async def test_tool_round_trip_messages_are_accepted(real_url: str) -> None:
    weather = ToolSchema(
        name="weather",
        description="Current weather in a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    call = ToolCallRequest(id="call_1", name="weather", args={"city": "Paris"})
    messages = (
        SYSTEM,
        ChatMessage(role="user", content="Weather in Paris?"),
        ChatMessage(role="assistant", content="", tool_calls=(call,)),
        ChatMessage(role="tool", content="sunny, 21 C", tool_call_id="call_1"),
    )
    async with client(real_url) as llm:
        completion = await llm.complete(
            CompletionRequest(messages=messages, tools=(weather,), slot=1, max_tokens=12)
        )
    assert completion.predicted_n > 0


async def test_context_overflow_matches_the_slot_size(real_url: str) -> None:
    async with client(real_url) as llm:
        slots = await llm.slots()
        with pytest.raises(ContextFullError) as caught:
            await llm.complete(CompletionRequest(messages=(OVERFLOW,), slot=0, max_tokens=8))
    assert caught.value.n_ctx == slots[0]["n_ctx"] == N_CTX_PER_SLOT
    assert caught.value.n_prompt_tokens > N_CTX_PER_SLOT
    assert caught.value.slot == 0


def _overflow(url: str) -> tuple[int, dict[str, Any]]:
    body = {"messages": [{"role": "user", "content": OVERFLOW.content}], "id_slot": 0}
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60.0)
    error: dict[str, Any] = response.json()["error"]
    return response.status_code, error


async def test_fake_overflows_like_the_real_server(real_url: str) -> None:
    with FakeLlama(n_ctx=N_CTX_PER_SLOT) as fake:
        async with client(fake.url) as llm:
            with pytest.raises(ContextFullError) as caught:
                await llm.complete(CompletionRequest(messages=(OVERFLOW,), slot=0))
        fake_status, fake_error = _overflow(fake.url)
    real_status, real_error = _overflow(real_url)
    assert caught.value.n_ctx == N_CTX_PER_SLOT
    assert fake_status == real_status == 400
    assert set(fake_error) == set(real_error)
    assert fake_error["type"] == real_error["type"] == "exceed_context_size_error"
    assert fake_error["n_ctx"] == real_error["n_ctx"]
    # The same wording; only the token counts differ (different tokenizers).
    assert fake_error["message"].replace(str(fake_error["n_prompt_tokens"]), "N") == real_error[
        "message"
    ].replace(str(real_error["n_prompt_tokens"]), "N")


def test_fake_speaks_the_same_json_shapes(real_url: str) -> None:
    body = {
        "messages": [{"role": "user", "content": "Say hi."}],
        "id_slot": 1,
        "cache_prompt": True,
        "max_tokens": 4,
    }
    with FakeLlama(n_ctx=N_CTX_PER_SLOT) as fake:
        shapes = []
        for url in (real_url, fake.url):
            with httpx.Client(base_url=url, timeout=60.0) as http:
                completion = http.post("/v1/chat/completions", json=body).json()
                shapes.append(
                    {
                        "health": http.get("/health").json(),
                        "slot_keys": set(http.get("/slots").json()[0]),
                        "tokens": http.post("/tokenize", json={"content": "hi"}).json(),
                        "top": set(completion),
                        "usage": set(completion["usage"]),
                        "timings": set(completion["timings"]),
                        "message": set(completion["choices"][0]["message"]),
                    }
                )
    real, fake_shape = shapes
    assert fake_shape["health"] == real["health"]
    assert {"id", "n_ctx", "is_processing"} <= fake_shape["slot_keys"] & real["slot_keys"]
    assert all(
        isinstance(t, int) for t in real["tokens"]["tokens"] + fake_shape["tokens"]["tokens"]
    )
    assert fake_shape["top"] <= real["top"]
    assert fake_shape["usage"] == real["usage"]
    assert fake_shape["timings"] <= real["timings"]
    assert fake_shape["message"] <= real["message"]


def test_fake_keeps_connections_open_like_the_real_server(real_url: str) -> None:
    with FakeLlama(n_ctx=N_CTX_PER_SLOT) as fake:
        seen = []
        for url in (real_url, fake.url):
            host, port = url.removeprefix("http://").rsplit(":", 1)
            connection = HTTPConnection(host, int(port), timeout=60)
            try:
                for _ in range(2):
                    connection.request("GET", "/health")
                    response = connection.getresponse()
                    response.read()
                    seen.append((url == real_url, response.version, response.will_close))
            finally:
                connection.close()
    assert seen == [(True, 11, False)] * 2 + [(False, 11, False)] * 2
