"""Typed records: the session-log union and the chat messages built from it.

A session log is one JSON object a line, tagged by ``type``. Decoding is strict: an
unknown field, a missing field or a wrong type is an error, and every record carries a
UTC ``time``. These types are pure data; reading and writing files is ``tether.sessions``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
UtcTime = Annotated[datetime, msgspec.Meta(tz=True)]


def is_utc(time: datetime) -> bool:
    """True for a time whose zone is UTC (msgspec decodes ``Z`` and ``+00:00`` to ``UTC``)."""
    return time.tzinfo is UTC or time.utcoffset() == UTC.utcoffset(None)


class _LogRecord(
    msgspec.Struct, tag_field="type", forbid_unknown_fields=True, frozen=True, kw_only=True
):
    # Aware is checked by the decoder; UTC is checked where logs are read and written
    # (tether.sessions), once per record in a loop that runs anyway: a __post_init__
    # would cost a Python call per record and dominate replay time.
    time: UtcTime


class SessionStart(_LogRecord, tag=True, frozen=True):
    """First record of every epoch log: which epoch, which slot, which baseline."""

    epoch: NonNegative
    slot: NonNegative
    baseline: str


class User(_LogRecord, tag=True, frozen=True):
    """An owner (or scheduler) message: one turn."""

    text: str
    speaker: str | None = None


class Assistant(_LogRecord, tag=True, frozen=True):
    """The model's text reply (possibly followed by the ToolCalls of the same message)."""

    text: str


class ToolCall(_LogRecord, tag=True, frozen=True):
    """A tool call the model asked for, recorded before it runs."""

    id: str
    name: str
    args: dict[str, Any]


class ToolResult(_LogRecord, tag=True, frozen=True):
    """What a tool returned; ``untrusted`` content taints the session."""

    tool_call_id: str
    content: str
    class_: str = msgspec.field(name="class")
    untrusted: bool


class ToolSummary(_LogRecord, tag=True, frozen=True):
    """An index-only summary of a ToolResult; never part of the replayed prefix."""

    call: str
    tool_call_id: str
    content: str
    class_: str = msgspec.field(name="class")
    untrusted: bool


class Usage(_LogRecord, tag=True, frozen=True):
    """Token accounting of one request, as the server reported it."""

    cache_n: NonNegative
    prompt_n: NonNegative
    predicted_n: NonNegative


TurnErrorKind = Literal[
    "session_full",  # the prompt does not fit the slot, even after compaction
    "llm_unreachable",
    "llm_timeout",
    "llm_protocol",
    "tool_step_limit",  # the tool loop hit its step limit
    "interrupted",  # the daemon stopped mid-turn
]


class TurnError(_LogRecord, tag=True, frozen=True):
    """A turn that ended without an answer; the log stays valid."""

    kind: TurnErrorKind


class EpochEnd(_LogRecord, tag=True, frozen=True):
    """Last record of a compacted epoch: the next epoch number and the carried summary."""

    next: Annotated[int, msgspec.Meta(ge=1)]
    summary: str


LogRecord = (
    SessionStart
    | User
    | Assistant
    | ToolCall
    | ToolResult
    | ToolSummary
    | Usage
    | TurnError
    | EpochEnd
)


class ToolSchema(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A tool offered to the model, in OpenAI function form."""

    name: str
    description: str
    parameters: dict[str, Any]


class Baseline(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The fixed prefix of an epoch: system prompt, memory block and tool schemas."""

    system: str
    memory: str
    tools: tuple[ToolSchema, ...] = ()


# -- chat messages (what goes to the model) -----------------------------------------


class ToolCallRequest(msgspec.Struct, frozen=True):
    """A tool call inside an assistant message (OpenAI form, arguments as a JSON object)."""

    id: str
    name: str
    args: dict[str, Any]


class ChatMessage(msgspec.Struct, frozen=True, omit_defaults=True):
    """One chat message. ``tool_calls`` only on assistant messages, ``tool_call_id`` on tool."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: tuple[ToolCallRequest, ...] = ()
    tool_call_id: str | None = None
