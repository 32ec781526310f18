"""An async client for llama.cpp's ``llama-server`` (and any OpenAI-compatible server).

Why a client of our own rather than an OpenAI SDK: tether depends on two llama-server
extensions the SDKs do not model, ``id_slot`` (pin a conversation to a slot so its KV cache
stays warm) and ``timings`` (how much of the prompt was served from that cache), and on the
typed context-overflow error that triggers compaction. When ``timings`` is absent the
client falls back to OpenAI's ``usage`` block, so a generic server still reports usage.

Every failure leaves this module as a ``tether.errors.LlmError``; no httpx exception
escapes, so callers map errors to turn records and exit codes without knowing the transport.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

import anyio
import httpx
import msgspec

from tether.errors import ContextFullError, LlmProtocolError, LlmTimeoutError, LlmUnreachableError
from tether.records import ChatMessage, Completion, CompletionRequest, ToolCallRequest, ToolSchema
from tether.scan.urls import shown_url

#: How much of an unreadable body an error message quotes.
EXCERPT_CHARS = 200

CHAT_PATH = "/v1/chat/completions"

_T = TypeVar("_T")


# -- the parts of a response we read (unknown fields are ignored: servers add many) ----


class _Function(msgspec.Struct):
    name: str
    arguments: str | dict[str, Any] = "{}"


class _ToolCall(msgspec.Struct):
    function: _Function
    id: str | None = None


class _Message(msgspec.Struct):
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(msgspec.Struct):
    message: _Message
    finish_reason: str | None = None


class _Timings(msgspec.Struct):
    cache_n: int = 0
    prompt_n: int = 0
    predicted_n: int = 0


class _PromptDetails(msgspec.Struct):
    cached_tokens: int = 0


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_details: _PromptDetails | None = None


class _ChatResponse(msgspec.Struct):
    choices: list[_Choice]
    usage: _Usage | None = None
    timings: _Timings | None = None


class _ErrorDetail(msgspec.Struct):
    type: str | None = None
    n_prompt_tokens: int | None = None
    n_ctx: int | None = None


class _ErrorBody(msgspec.Struct):
    error: _ErrorDetail


class _Tokens(msgspec.Struct):
    tokens: list[int]


# -- request encoding -------------------------------------------------------------------


def _encode_args(args: dict[str, Any]) -> str:
    # Insertion order, compact: the same record always re-encodes to the same bytes, which
    # keeps the replayed prompt a byte-exact extension of the previous one.
    return msgspec.json.encode(args).decode()


def message_json(message: ChatMessage) -> dict[str, Any]:
    """One message in OpenAI chat form (tool calls with JSON-string arguments)."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": _encode_args(call.args)},
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


def tool_json(tool: ToolSchema) -> dict[str, Any]:
    """One tool in OpenAI function form."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def request_json(request: CompletionRequest, model: str = "") -> dict[str, Any]:
    """The body of ``POST /v1/chat/completions`` for ``request``."""
    body: dict[str, Any] = {
        "messages": [message_json(m) for m in request.messages],
        "cache_prompt": True,
    }
    if model:
        body["model"] = model
    if request.slot is not None:
        body["id_slot"] = request.slot
    if request.tools:
        body["tools"] = [tool_json(t) for t in request.tools]
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.json_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "reply", "schema": request.json_schema},
        }
    return body


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


class LlamaServerClient:
    """Talks to one llama-server (or OpenAI-compatible) base URL.

    ``timeout_s`` bounds each call as a whole, not only each socket read, because a
    non-streaming completion sends nothing until it is done. ``transport`` lets a caller
    supply e.g. ``httpx.MockTransport``; tests use the real ``FakeLlama`` server instead.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        model: str = "",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.model = model
        try:
            base = httpx.URL(self.url)
        except httpx.InvalidURL:
            raise LlmUnreachableError(shown_url(url), "invalid URL") from None
        self._http = httpx.AsyncClient(
            base_url=base, timeout=httpx.Timeout(timeout_s), transport=transport
        )

    async def __aenter__(self) -> LlamaServerClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- the inference call --------------------------------------------------------------

    async def complete(self, request: CompletionRequest) -> Completion:
        """POST the request; map overflow to ContextFullError and usage to timings terms."""
        response = await self._send("POST", CHAT_PATH, request_json(request, self.model))
        if response.status_code == 400:
            self._raise_if_context_full(response, request.slot)
        self._check_status(response, CHAT_PATH)
        parsed = self._decode(response, CHAT_PATH, _ChatResponse)
        if not parsed.choices:
            raise LlmProtocolError(
                self._where(CHAT_PATH), response.status_code, "reply has no choices"
            )
        choice = parsed.choices[0]
        calls = tuple(
            self._tool_call(call, index, response.status_code)
            for index, call in enumerate(choice.message.tool_calls or ())
        )
        cache_n, prompt_n, predicted_n = _usage(parsed)
        return Completion(
            content=choice.message.content or "",
            tool_calls=calls,
            finish_reason=choice.finish_reason or ("tool_calls" if calls else "stop"),
            cache_n=cache_n,
            prompt_n=prompt_n,
            predicted_n=predicted_n,
        )

    # -- helpers (plain JSON) ------------------------------------------------------------

    async def health(self) -> bool:
        """True when the server answers ``GET /health`` with 200 (model loaded, ready)."""
        try:
            response = await self._send("GET", "/health", None)
        except (LlmUnreachableError, LlmTimeoutError):
            return False
        return response.status_code == 200

    async def tokenize(self, text: str) -> list[int]:
        """The server's own token ids for ``text`` (calibrates tether's token counter)."""
        response = await self._send("POST", "/tokenize", {"content": text})
        self._check_status(response, "/tokenize")
        return self._decode(response, "/tokenize", _Tokens).tokens

    async def slots(self) -> list[dict[str, Any]]:
        """``GET /slots`` as the server reports it (``id``, ``n_ctx``, ``is_processing``...)."""
        response = await self._send("GET", "/slots", None)
        self._check_status(response, "/slots")
        return self._decode(response, "/slots", list[dict[str, Any]])

    # -- internals -----------------------------------------------------------------------

    def _where(self, path: str) -> str:
        # An error names the server, never a password in its URL.
        return shown_url(f"{self.url}{path}")

    @contextmanager
    def _mapped_errors(self, path: str) -> Iterator[None]:
        try:
            with anyio.fail_after(self.timeout_s):
                yield
        except (TimeoutError, httpx.TimeoutException):
            raise LlmTimeoutError(self._where(path), self.timeout_s) from None
        except httpx.TransportError as exc:
            reason = str(exc) or type(exc).__name__
            raise LlmUnreachableError(self._where(path), reason) from None

    async def _send(self, method: str, path: str, body: dict[str, Any] | None) -> httpx.Response:
        """One request, fully read, with transport failures mapped to LlmError."""
        content = None if body is None else msgspec.json.encode(body)
        headers = {"content-type": "application/json"} if content is not None else None
        with self._mapped_errors(path):
            response = await self._http.request(method, path, content=content, headers=headers)
            await response.aread()
        return response

    def _check_status(self, response: httpx.Response, path: str) -> None:
        if not 200 <= response.status_code < 300:
            raise LlmProtocolError(
                self._where(path), response.status_code, _excerpt(response.text) or "empty body"
            )

    def _decode(self, response: httpx.Response, path: str, kind: type[_T]) -> _T:
        try:
            return msgspec.json.decode(response.content, type=kind)
        except msgspec.DecodeError as exc:
            raise LlmProtocolError(
                self._where(path),
                response.status_code,
                f"unreadable body ({exc}): {_excerpt(response.text)}",
            ) from None

    def _raise_if_context_full(self, response: httpx.Response, slot: int | None) -> None:
        try:
            detail = msgspec.json.decode(response.content, type=_ErrorBody).error
        except msgspec.DecodeError:
            return
        if (
            detail.type == "exceed_context_size_error"
            and detail.n_prompt_tokens is not None
            and detail.n_ctx is not None
        ):
            raise ContextFullError(detail.n_prompt_tokens, detail.n_ctx, slot)

    def _tool_call(self, call: _ToolCall, index: int, status: int) -> ToolCallRequest:
        raw = call.function.arguments
        if isinstance(raw, str):
            try:
                args = msgspec.json.decode(raw)
            except msgspec.DecodeError:
                args = None
        else:
            args = raw
        if not isinstance(args, dict):
            raise LlmProtocolError(
                self._where(CHAT_PATH),
                status,
                f"tool call {call.function.name!r} has arguments that are not a JSON object: "
                f"{_excerpt(str(raw))}",
            )
        # Servers always name their calls; a missing id would break the tool round trip.
        return ToolCallRequest(id=call.id or f"call_{index}", name=call.function.name, args=args)


def _usage(parsed: _ChatResponse) -> tuple[int, int, int]:
    """(cache_n, prompt_n, predicted_n) from timings, else from OpenAI usage.

    OpenAI's ``prompt_tokens`` counts the whole prompt, cached part included (llama-server
    reports ``prompt_tokens == cache_n + prompt_n``), so the uncached part is the difference.
    """
    if parsed.timings is not None:
        t = parsed.timings
        return t.cache_n, t.prompt_n, t.predicted_n
    if parsed.usage is not None:
        u = parsed.usage
        cached = u.prompt_tokens_details.cached_tokens if u.prompt_tokens_details else 0
        return cached, max(u.prompt_tokens - cached, 0), u.completion_tokens
    return 0, 0, 0
