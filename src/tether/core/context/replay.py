"""Replay: an epoch's baseline, carry and records -> the chat messages of the next request.

Within an epoch each request is a strict extension of the previous one: records only ever
add messages at the end, except that ToolCalls join the Assistant message logged just
before them (both are appended together, before any request is made), so a request
boundary never falls inside one assistant message.

A turn ended by ``TurnError{kind: "session_full"}`` is left out of the replay: its request
was refused, so the prefix before its User is still what the server cached, and sending
it again would only be refused again (one oversized message would poison every later
turn of the epoch). It stays in the log; compaction retries it once in the next epoch as
a ``User{retry: true}``, which counts as the same turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.core.context import tokens
from tether.records import (
    Assistant,
    Baseline,
    ChatMessage,
    EpochEnd,
    LogRecord,
    ToolCall,
    ToolCallRequest,
    ToolResult,
    TurnError,
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


#: Template tokens around one message (role marker, role, end marker), as llama-style
#: chat templates render it.
MESSAGE_OVERHEAD = 4


def fresh_tokens(baseline: Baseline, text: str) -> int:
    """An estimate (``tether.core.context.tokens``) of the prompt of a fresh epoch holding only
    ``text``: system prompt and memory block, tool schemas, the message. No carry is
    counted, so a message over the limit by this count cannot fit any epoch."""
    schemas = "".join(f"{t.name} {t.description} {t.parameters}" for t in baseline.tools)
    return (
        tokens.count(system_text(baseline))
        + tokens.count(schemas)
        + tokens.count(text)
        + 3 * MESSAGE_OVERHEAD
    )


def refused(records: Sequence[LogRecord]) -> set[int]:
    """Indexes of the records of turns ended by a ``session_full`` TurnError: nothing
    of them goes to the model again (a request, a fallback summary)."""
    out: set[int] = set()
    start = 0
    for i, r in enumerate(records):
        if isinstance(r, User):
            start = i
        elif isinstance(r, TurnError) and r.kind == "session_full":
            out.update(range(start, i + 1))
    return out


def decides_turn(records: Sequence[LogRecord]) -> bool | None:
    """Whether the last turn is open, from the last record that says: a User, ToolCall or
    ToolResult leaves it open; an Assistant (the final answer: a ToolCall after it would
    reopen it), a TurnError or an EpochEnd closes it; None when no record says."""
    for r in reversed(records):
        if isinstance(r, User | ToolCall | ToolResult):
            return True
        if isinstance(r, Assistant | TurnError | EpochEnd):
            return False
    return None


def open_turn(records: Sequence[LogRecord]) -> bool:
    """True when the epoch's last turn has neither an answer nor a TurnError: a process
    died in it. Usage, ToolSummary and SessionStart do not decide."""
    return decides_turn(records) is True


def messages(
    baseline: Baseline,
    carry: str | None,
    records: Sequence[LogRecord],
) -> list[ChatMessage]:
    """The messages of a request made after ``records`` (one epoch, in file order)."""
    out: list[ChatMessage] = [ChatMessage(role="system", content=system_text(baseline))]
    if carry is not None:
        out.append(carry_message(carry))
    dropped = refused(records)
    # The message under construction: (content, tool calls), flushed when anything else
    # arrives so that an Assistant and the ToolCalls logged right after it stay one message.
    building: tuple[str, list[ToolCallRequest]] | None = None

    def flush() -> None:
        nonlocal building
        if building is not None:
            text, calls = building
            out.append(ChatMessage(role="assistant", content=text, tool_calls=tuple(calls)))
            building = None

    for i, record in enumerate(records):
        if i in dropped:
            continue
        if isinstance(record, Assistant):
            flush()
            building = (record.text, [])
        elif isinstance(record, ToolCall):
            call = ToolCallRequest(id=record.id, name=record.name, args=record.args)
            if building is None:
                building = ("", [call])
            else:
                building[1].append(call)
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
