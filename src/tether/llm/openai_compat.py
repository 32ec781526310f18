"""A generic OpenAI-compatible endpoint: the llama-server client without slots.

Such servers have no ``id_slot``; sending it could be refused, so requests go out with no
slot and usage comes from ``usage.prompt_tokens_details.cached_tokens``.
"""

from __future__ import annotations

from tether.llm.llama_server import LlamaServerClient
from tether.records import Completion, CompletionRequest


class OpenAiCompatClient:
    def __init__(self, url: str, *, timeout_s: float, model: str = "") -> None:
        self._inner = LlamaServerClient(url, timeout_s=timeout_s, model=model)

    async def complete(self, request: CompletionRequest) -> Completion:
        return await self._inner.complete(
            CompletionRequest(
                messages=request.messages,
                tools=request.tools,
                slot=None,
                max_tokens=request.max_tokens,
                json_schema=request.json_schema,
                temperature=request.temperature,
            )
        )

    async def aclose(self) -> None:
        await self._inner.aclose()
