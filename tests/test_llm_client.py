"""LlamaServerClient against the fake llama-server over real loopback HTTP."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tether.errors import (
    ContextFullError,
    LlmProtocolError,
    LlmTimeoutError,
    LlmUnreachableError,
)
from tether.llm import LlamaServerClient
from tether.records import ChatMessage, Completion, CompletionRequest, ToolSchema
from tether.testing import FakeLlama, Reply

pytestmark = pytest.mark.anyio

SYSTEM = ChatMessage(role="system", content="You are a careful assistant.")
WEATHER = ToolSchema(
    name="weather",
    description="Current weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=512, parallel=2) as server:
        yield server


def client_for(fake: FakeLlama, timeout_s: float = 10.0) -> LlamaServerClient:
    return LlamaServerClient(fake.url, timeout_s=timeout_s)


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def reply_of(completion: Completion) -> ChatMessage:
    return ChatMessage(role="assistant", content=completion.content)


async def test_chat_turn_pins_the_slot_and_asks_for_prompt_caching(fake: FakeLlama) -> None:
    async with client_for(fake) as client:
        request = CompletionRequest(messages=(SYSTEM, user("hello there")), slot=1, max_tokens=64)
        completion = await client.complete(request)
    assert completion.content == "ok: hello there"
    assert completion.finish_reason == "stop"
    assert completion.tool_calls == ()
    assert completion.predicted_n > 0
    sent = fake.requests[-1]
    assert sent.slot == 1
    assert sent.cache_prompt is True
    assert sent.body["max_tokens"] == 64
    assert sent.messages == [
        {"role": "system", "content": SYSTEM.content},
        {"role": "user", "content": "hello there"},
    ]


async def test_extending_a_conversation_reuses_the_slot_cache(fake: FakeLlama) -> None:
    async with client_for(fake) as client:
        first_msgs = (SYSTEM, user("what is a slot?"))
        first = await client.complete(CompletionRequest(messages=first_msgs, slot=0))
        assert first.cache_n == 0
        second_msgs = (*first_msgs, reply_of(first), user("and a prefix?"))
        second = await client.complete(CompletionRequest(messages=second_msgs, slot=0))
        # Everything the slot saw (prompt + reply) is reused; only the new turn is evaluated.
        assert second.cache_n == first.prompt_n + first.predicted_n
        assert second.prompt_n > 0
        elsewhere = await client.complete(CompletionRequest(messages=second_msgs, slot=1))
        assert elsewhere.cache_n == 0
        assert elsewhere.prompt_n == second.cache_n + second.prompt_n


async def test_traffic_on_another_slot_keeps_the_main_slot_warm(fake: FakeLlama) -> None:
    async with client_for(fake) as client:
        main = (SYSTEM, user("plan my week"))
        first = await client.complete(CompletionRequest(messages=main, slot=0))
        await client.complete(CompletionRequest(messages=(user("summarise a page"),), slot=1))
        extended = (*main, reply_of(first), user("and next week?"))
        again = await client.complete(CompletionRequest(messages=extended, slot=0))
    assert again.cache_n == first.prompt_n + first.predicted_n


async def test_context_overflow_is_a_typed_error_with_sizes_and_slot(fake: FakeLlama) -> None:
    long_text = " ".join(["word"] * 600)
    async with client_for(fake) as client:
        with pytest.raises(ContextFullError) as caught:
            await client.complete(CompletionRequest(messages=(user(long_text),), slot=1))
    assert caught.value.n_ctx == 512
    assert caught.value.n_prompt_tokens == fake.requests[-1].n_tokens > 512
    assert caught.value.slot == 1
    assert "512" in str(caught.value)


async def test_tool_call_round_trip(fake: FakeLlama) -> None:
    fake.script(Reply(content="", tool_calls=[("weather", {"city": "Paris", "days": 2})]))
    async with client_for(fake) as client:
        asked = (SYSTEM, user("weather in Paris?"))
        first = await client.complete(CompletionRequest(messages=asked, tools=(WEATHER,), slot=0))
        assert first.finish_reason == "tool_calls"
        (call,) = first.tool_calls
        assert call.name == "weather"
        assert call.args == {"city": "Paris", "days": 2}
        assert call.id
        answered = (
            *asked,
            ChatMessage(role="assistant", content=first.content, tool_calls=first.tool_calls),
            ChatMessage(role="tool", content="sunny, 21 C", tool_call_id=call.id),
        )
        second = await client.complete(
            CompletionRequest(messages=answered, tools=(WEATHER,), slot=0)
        )
    sent = fake.requests[-1]
    assert sent.tools == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": WEATHER.description,
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assistant, tool = sent.messages[-2:]
    assert assistant["tool_calls"][0]["id"] == call.id
    assert assistant["tool_calls"][0]["type"] == "function"
    assert assistant["tool_calls"][0]["function"]["name"] == "weather"
    assert isinstance(assistant["tool_calls"][0]["function"]["arguments"], str)
    assert tool == {"role": "tool", "content": "sunny, 21 C", "tool_call_id": call.id}
    # The tool call went back exactly as it came, so the slot cache still covers it.
    assert second.cache_n == first.prompt_n + first.predicted_n


async def test_json_schema_is_sent_as_response_format(fake: FakeLlama) -> None:
    schema = {"type": "object", "properties": {"facts": {"type": "array"}}}
    fake.script(Reply(content='{"facts": []}'))
    async with client_for(fake) as client:
        completion = await client.complete(
            CompletionRequest(messages=(user("extract"),), json_schema=schema, temperature=0.0)
        )
    assert completion.content == '{"facts": []}'
    sent = fake.requests[-1]
    assert sent.json_schema == schema
    assert sent.body["response_format"]["json_schema"]["name"] == "reply"
    assert sent.body["temperature"] == 0.0
    assert "id_slot" not in sent.body


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_unreachable_server() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    async with LlamaServerClient(url, timeout_s=5.0) as client:
        with pytest.raises(LlmUnreachableError) as caught:
            await client.complete(CompletionRequest(messages=(user("hi"),)))
        assert not await client.health()
    assert caught.value.url.startswith(url)


async def test_slow_reply_times_out(fake: FakeLlama) -> None:
    fake.script(Reply(content="too late", delay_s=30.0))
    async with client_for(fake, timeout_s=0.2) as client:
        with pytest.raises(LlmTimeoutError) as caught:
            await client.complete(CompletionRequest(messages=(user("hi"),), slot=0))
    assert caught.value.timeout_s == 0.2


async def test_server_error_is_a_protocol_error_with_a_short_excerpt(fake: FakeLlama) -> None:
    fake.script(
        Reply(status=500, error_body={"error": {"message": "boom " * 100, "type": "server"}})
    )
    async with client_for(fake) as client:
        with pytest.raises(LlmProtocolError) as caught:
            await client.complete(CompletionRequest(messages=(user("hi"),)))
    assert caught.value.status == 500
    assert "boom" in caught.value.problem
    assert len(caught.value.problem) <= 200


@pytest.mark.parametrize("arguments", ["not json", "[1, 2]", '"city"'])
async def test_tool_arguments_that_are_not_an_object_are_refused(
    fake: FakeLlama, arguments: str
) -> None:
    fake.script(Reply(tool_calls=[("weather", arguments)]))
    async with client_for(fake) as client:
        with pytest.raises(LlmProtocolError) as caught:
            await client.complete(CompletionRequest(messages=(user("hi"),), tools=(WEATHER,)))
    assert "weather" in caught.value.problem
    assert "JSON object" in caught.value.problem


async def test_unreadable_body_is_a_protocol_error(fake: FakeLlama) -> None:
    fake.script(Reply(error_body="<html>proxy says hello</html>"))
    async with client_for(fake) as client:
        with pytest.raises(LlmProtocolError) as caught:
            await client.complete(CompletionRequest(messages=(user("hi"),)))
    assert caught.value.status == 200
    assert "proxy says hello" in caught.value.problem


async def test_generic_openai_server_usage_is_read_from_usage(fake: FakeLlama) -> None:
    # An OpenAI-compatible server without llama-server's timings block.
    openai_body = {
        "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 120,
            "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 100},
        },
    }
    fake.script(Reply(error_body=openai_body))
    async with client_for(fake) as client:
        completion = await client.complete(CompletionRequest(messages=(user("hi"),)))
    assert (completion.cache_n, completion.prompt_n, completion.predicted_n) == (100, 20, 7)


async def test_health_tokenize_and_slots(fake: FakeLlama) -> None:
    async with client_for(fake) as client:
        assert await client.health()
        tokens = await client.tokenize("hello world, hello")
        assert tokens == await client.tokenize("hello world, hello")
        assert len(tokens) > 2
        slots = await client.slots()
    assert [(s["id"], s["n_ctx"]) for s in slots] == [(0, 512), (1, 512)]
