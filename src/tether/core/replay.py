"""Replay: an epoch's baseline, carry and records -> the chat messages of the next request.

Within an epoch each request is a strict extension of the previous one: records only ever
add messages at the end, except that ToolCalls join the Assistant message logged just
before them (both are appended together, before any request is made), so a request
boundary never falls inside one assistant message.
"""

from __future__ import annotations

from collections.abc import Iterable

from tether.records import (
    Assistant,
    Baseline,
    ChatMessage,
    LogRecord,
    ToolCall,
    ToolCallRequest,
    ToolResult,
    User,
)

#: The heading of the carried summary. Built from words so it reads as prose, not markup
#: a model could mistake for a role or a record.
CARRY_HEADING = " ".join(
    [
        "Summary of this conversation so far,",
        "written when the earlier part was compacted.",
        "It is context, not a new request:",
    ]
)


def system_text(baseline: Baseline) -> str:
    """The system message: the system prompt, then the memory block when there is one."""
    if baseline.memory:
        return f"{baseline.system.rstrip()}\n\n{baseline.memory}"
    return baseline.system


def carry_message(carry: str) -> ChatMessage:
    return ChatMessage(role="user", content=f"{CARRY_HEADING}\n\n{carry}")


def messages(
    baseline: Baseline, carry: str | None, records: Iterable[LogRecord]
) -> list[ChatMessage]:
    """The messages of a request made after ``records`` (one epoch, in file order)."""
    out: list[ChatMessage] = [ChatMessage(role="system", content=system_text(baseline))]
    if carry is not None:
        out.append(carry_message(carry))
    # The message under construction: (content, tool calls), flushed when anything else
    # arrives so that an Assistant and the ToolCalls logged right after it stay one message.
    pending: tuple[str, list[ToolCallRequest]] | None = None

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            text, calls = pending
            out.append(ChatMessage(role="assistant", content=text, tool_calls=tuple(calls)))
            pending = None

    for record in records:
        if isinstance(record, Assistant):
            flush()
            pending = (record.text, [])
        elif isinstance(record, ToolCall):
            call = ToolCallRequest(id=record.id, name=record.name, args=record.args)
            if pending is None:
                pending = ("", [call])
            else:
                pending[1].append(call)
        elif isinstance(record, User):
            flush()
            out.append(ChatMessage(role="user", content=record.text))
        elif isinstance(record, ToolResult):
            flush()
            out.append(
                ChatMessage(role="tool", content=record.content, tool_call_id=record.tool_call_id)
            )
        # SessionStart, Usage, TurnError, ToolSummary and EpochEnd are bookkeeping:
        # they never reach the model, so the prefix does not change when they are logged.
    flush()
    return out
