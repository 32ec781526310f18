"""What every inference backend takes and returns, independent of its wire protocol.

The agent builds a ``CompletionRequest`` from replayed records and gets a ``Completion``
back; only the adapters (``llama_server``, later ``openai_compat`` and ``embedded``) know
how that maps onto HTTP. ``cache_n`` / ``prompt_n`` / ``predicted_n`` are reported the way
llama-server's ``timings`` reports them, because compaction and the slot gates reason in
those terms: ``cache_n`` tokens of the prompt were reused from the slot's KV cache and
``prompt_n`` had to be evaluated anew.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from tether.records import ChatMessage, ToolCallRequest, ToolSchema


class CompletionRequest(msgspec.Struct, frozen=True):
    """One chat completion: the whole prompt, on an optional slot.

    ``slot`` pins the request to one of the server's slots so its KV cache stays warm
    across turns (None lets the server choose). ``json_schema`` asks for a reply that
    validates against that schema (grammar-constrained on llama-server).
    """

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSchema, ...] = ()
    slot: int | None = None
    max_tokens: int | None = None
    json_schema: dict[str, Any] | None = None
    temperature: float | None = None


class Completion(msgspec.Struct, frozen=True):
    """The model's answer and the server's token accounting for the request."""

    content: str
    tool_calls: tuple[ToolCallRequest, ...]
    finish_reason: str
    cache_n: int
    prompt_n: int
    predicted_n: int


class Llm(Protocol):
    """An inference backend. Errors are always ``tether.errors.LlmError`` subclasses."""

    async def complete(self, request: CompletionRequest) -> Completion:
        """Run one completion; raises ContextFullError when the prompt does not fit."""
        ...

    async def aclose(self) -> None:
        """Release connections; the backend is unusable afterwards."""
        ...
