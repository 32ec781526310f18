"""The llama-server protocol as the fake speaks it: error bodies, request parsing, and the
deterministic prompt rendering whose token prefix a slot caches.

Split from ``fake_llama`` (the server) so each stays small; ``fake_llama`` re-exports what
tests use.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from tether.core.context.tokens import pieces

IM_START = "<|im_start|>"
IM_END = "<|im_end|>\n"


class BadRequest(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def error_json(code: int, message: str, kind: str) -> dict[str, Any]:
    """An error body in llama-server's shape."""
    return {"error": {"code": code, "message": message, "type": kind}}


def context_error_json(n_prompt_tokens: int, n_ctx: int) -> dict[str, Any]:
    """llama-server's context-overflow body, byte for byte in structure and wording."""
    return {
        "error": {
            "code": 400,
            "message": f"request ({n_prompt_tokens} tokens) exceeds the available context size "
            f"({n_ctx} tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": n_prompt_tokens,
            "n_ctx": n_ctx,
        }
    }


def message_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    raise BadRequest(f"message content must be a string, a list of parts or null: {content!r}")


def calls_json(tool_calls: Any) -> str:
    """Tool calls normalised (arguments parsed, keys sorted) so formatting cannot matter."""
    if not tool_calls:
        return ""
    if not isinstance(tool_calls, list):
        raise BadRequest("tool_calls must be a list")
    out = []
    for call in tool_calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise BadRequest("each tool call needs a 'function' object")
        args = function.get("arguments")
        if isinstance(args, str):
            with contextlib.suppress(ValueError):
                args = json.loads(args)
        out.append({"id": call.get("id"), "name": function.get("name"), "arguments": args})
    return json.dumps(out, sort_keys=True, ensure_ascii=False)


def body_tokens(message: dict[str, Any]) -> list[str]:
    return pieces(message_text(message.get("content"))) + pieces(
        calls_json(message.get("tool_calls"))
    )


def render(tools: list[Any], messages: list[dict[str, Any]]) -> list[str]:
    """The prompt tokens of a request; a request that appends messages extends them."""
    out: list[str] = []
    if tools:
        out += [IM_START, *pieces("system\n"), *pieces(json.dumps(tools, sort_keys=True)), IM_END]
    for message in messages:
        out += [IM_START, *pieces(str(message.get("role")) + "\n")]
        out += [*body_tokens(message), IM_END]
    return [*out, IM_START, *pieces("assistant\n")]


def common_prefix(cached: list[str], tokens: list[str]) -> int:
    pairs = zip(cached, tokens, strict=False)
    return next((i for i, (x, y) in enumerate(pairs) if x != y), min(len(cached), len(tokens)))


def request_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages
    ):
        raise BadRequest("'messages' must be a list of objects with a string 'role'")
    return messages


def request_json_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and isinstance(fmt.get("json_schema"), dict):
        schema = fmt["json_schema"].get("schema")
        return schema if isinstance(schema, dict) else None
    return None
