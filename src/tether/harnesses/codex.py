"""Reading Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``).

A rollout is one JSON object a line, ``{"timestamp", "type", "payload"}``, appended to as
the session goes. The first line is ``session_meta`` (``payload.id``: the session); the
conversation is in ``response_item`` lines:

- ``payload.type == "message"`` with ``role`` ``user`` (``input_text`` blocks) or
  ``assistant`` (``output_text`` blocks). The user messages Codex writes itself at the
  start of a session (``<environment_context>``, ``<user_instructions>``) are skipped as
  ``boilerplate``; other roles (``developer``, ``system``) as ``not_a_message``;
- ``function_call`` (``name``, ``arguments``) and ``local_shell_call`` (``action.command``)
  are kept as the assistant's ``[tool NAME] INPUT``, as for Claude Code: the commands and
  files of a session are what it is searched for later;
- their outputs (``function_call_output``, ``local_shell_call_output``,
  ``custom_tool_call_output``) as the assistant's ``[tool result] OUTPUT``, head and tail
  kept (``transcript.tool_output``), as for Claude Code: error messages live there;
- skipped: ``reasoning``
  (encrypted), ``event_msg`` lines (the UI's copies of the same messages, and token
  counts), ``turn_context``, ``compacted`` (Codex's summary at a compaction: the rollout
  keeps what it summarised), and record types a later Codex adds.

A bad line (not JSON, not an object, no time) is skipped and counted, never an error.
Messages before any ``session_meta`` have no session and are skipped (``no_session``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tether.core.checkpoints.window import BoundaryMark, Entry, Turn
from tether.harnesses.transcript import (
    Message,
    Transcript,
    json_object,
    tether_session,
    tool_call,
    tool_output,
    utc_time,
)

PREFIX = "codex-"
BOILERPLATE = ("<environment_context>", "<user_instructions>")
_SKIPPED_ITEMS = {"reasoning": "reasoning"}
_OUTPUTS = ("function_call_output", "local_shell_call_output", "custom_tool_call_output")


def session_id_for(codex_session: str) -> str:
    """The tether session id of a Codex session id (stable, always valid)."""
    return tether_session(PREFIX, codex_session)


def _words(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    parts = [
        b["text"].strip()
        for b in content
        if isinstance(b, dict)
        and b.get("type") in ("input_text", "output_text", "text")
        and isinstance(b.get("text"), str)
    ]
    return "\n\n".join(p for p in parts if p)


def _item(payload: dict[str, Any]) -> tuple[str, str] | str:
    """A response item as (role, text), or why it is skipped."""
    kind = payload.get("type")
    if kind == "message":
        role = payload.get("role")
        if role not in ("user", "assistant"):
            return "not_a_message"
        text = _words(payload.get("content"))
        if not text:
            return "no_text"
        if role == "user" and text.startswith(BOILERPLATE):
            return "boilerplate"
        return role, text
    if kind in ("function_call", "custom_tool_call"):
        args = payload.get("arguments", payload.get("input"))
        return "assistant", tool_call(payload.get("name"), args)
    if kind == "local_shell_call":
        action = payload.get("action")
        command = action.get("command") if isinstance(action, dict) else None
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        return "assistant", tool_call("shell", command if isinstance(command, str) else "")
    if kind in _OUTPUTS:
        text = tool_output(_output_text(payload.get("output")))
        return ("assistant", text) if text else "tool_result"
    return _SKIPPED_ITEMS.get(str(kind), "not_a_message")


def _output_text(output: Any) -> Any:
    """A tool output's text: Codex writes a shell call's as JSON ``{"output": ...,
    "metadata": ...}`` in a string, other tools' as plain text or content blocks."""
    if isinstance(output, dict):
        return output.get("output", output.get("content"))
    if isinstance(output, str) and output.startswith("{"):
        try:
            doc = json.loads(output)
        except ValueError:
            return output
        if isinstance(doc, dict) and isinstance(doc.get("output"), str):
            return doc["output"]
    return output


def read_rollout(lines: Iterable[bytes]) -> Transcript:
    """Every message of a rollout's lines, by session; skipped lines counted."""
    out = Transcript()
    session: str | None = None
    for raw in lines:
        record = json_object(raw)
        if isinstance(record, str):
            out.add(record)
            continue
        kind = record.get("type")
        payload = record.get("payload")
        if not isinstance(payload, dict):
            out.add("not_a_message")
            continue
        if kind == "session_meta":
            sid = payload.get("id")
            if isinstance(sid, str) and sid:
                session = session_id_for(sid)
            out.add("not_a_message")
            continue
        if kind != "response_item":
            out.add("compact_summary" if kind == "compacted" else "not_a_message")
            continue
        item = _item(payload)
        if isinstance(item, str):
            out.add(item)
            continue
        time = utc_time(record.get("timestamp"))
        if time is None:
            out.add("no_time")
        elif session is None:
            out.add("no_session")
        else:
            role, text = item
            out.add(Message(session, "user" if role == "user" else "assistant", text, time))
    return out


def window_entry(raw: bytes) -> Entry | str:
    """One rollout line as the checkpoint capture sees it: a turn, a compaction boundary
    (a ``compacted`` record: Codex's summary, itself never part of a window), or why it is
    skipped."""
    record = json_object(raw)
    if isinstance(record, str):
        return record
    kind = record.get("type")
    if kind == "compacted":
        return BoundaryMark("auto")
    payload = record.get("payload")
    if kind != "response_item" or not isinstance(payload, dict):
        return "not_a_message"
    item = _item(payload)
    if isinstance(item, str):
        return item
    stamp = record.get("timestamp")
    if utc_time(stamp) is None:
        return "no_time"
    assert isinstance(stamp, str)
    role, text = item
    return Turn("user" if role == "user" else "assistant", text, stamp)
