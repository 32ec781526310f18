"""Reading Claude Code transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

A transcript is one JSON object a line, appended to as the session goes. The lines that
carry conversation are ``type: "user"`` and ``type: "assistant"``, each with a
``sessionId``, a ``timestamp`` and a ``message`` whose ``content`` is a string or a list
of blocks (``text``, ``tool_use``, ``tool_result``, ``thinking``, ``image``). Everything
else is skipped and counted, never an error: summaries, ``system`` records (a
``compact_boundary`` among them), file-history snapshots, record types a later Claude
Code adds, a line that is not JSON or not an object (real files have them: a line cut by
a crash, a test fixture's deliberate ``[]``).

What becomes a message (``Message``), and why:

- the owner's words: a user line's string content or its ``text`` blocks;
- the assistant's ``text`` blocks, and each ``tool_use`` as ``[tool NAME] INPUT`` (the
  input as compact JSON, cut at ``transcript.TOOL_INPUT_CHARS``): the file paths and commands are
  what a coding session is later searched for;
- a user line that only carries ``tool_result`` blocks is the harness returning tool
  output: it becomes an *assistant* message (the turn's tool work, beside the tool call it
  answers, never the owner's words) ``[tool result] OUTPUT``, or ``[tool error] OUTPUT``
  when ``is_error`` (``transcript.tool_output``: head and tail kept). That is where a
  session's error messages live; the secret scan runs on it like on every message;
- skipped: ``thinking`` blocks; ``isMeta`` lines (the harness's own notes);
  ``isCompactSummary`` lines (Claude Code's summary at a compaction: the transcript
  still holds everything it summarised); ``isSidechain`` lines (a subagent's own
  conversation).

Session ids become tether session ids (``session_id_for``): ``cc-`` and the id when it
fits tether's grammar, else a readable part and a hash of the whole, so the same Claude
Code session always lands in the same tether session.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

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

PREFIX = "cc-"


def session_id_for(claude_session: str) -> str:
    """The tether session id of a Claude Code session id (stable, always valid)."""
    return tether_session(PREFIX, claude_session)


def _text(role: str, content: Any) -> str:
    """The words of a message's content (see the module doc); "" when there are none."""
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"].strip())
        elif kind == "tool_use" and role == "assistant":
            parts.append(tool_call(block.get("name"), block.get("input")))
    return "\n\n".join(p for p in parts if p)


def _tool_results(content: Any) -> str:
    """The outputs of a user line made only of ``tool_result`` blocks, one message; ""
    when the line holds anything else (its words are the owner's) or no output."""
    if not isinstance(content, list) or not content:
        return ""
    outputs: list[str] = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            return ""
        out = tool_output(block.get("content"), error=block.get("is_error") is True)
        if out:
            outputs.append(out)
    return "\n\n".join(outputs)


def _said(kind: str, content: Any) -> tuple[Literal["user", "assistant"], str] | str:
    """(role, text) of a user or assistant line's content, or why it has none."""
    text = _text(kind, content)
    if text:
        return ("user", text) if kind == "user" else ("assistant", text)
    if kind == "user":
        results = _tool_results(content)
        if results:
            return "assistant", results
        return "tool_result" if isinstance(content, list) else "no_text"
    return "no_text"


def parse_line(raw: bytes) -> Message | str:
    """One transcript line: its message, or why it is skipped (a short reason code)."""
    record = json_object(raw)
    if isinstance(record, str):
        return record
    kind = record.get("type")
    if kind not in ("user", "assistant"):
        return "not_a_message"
    skipped = _skipped(record)
    if skipped is not None:
        return skipped
    session = record.get("sessionId")
    if not isinstance(session, str) or not session:
        return "no_session"
    time = utc_time(record.get("timestamp"))
    if time is None:
        return "no_time"
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    said = _said(kind, content)
    if isinstance(said, str):
        return said
    return Message(session_id_for(session), said[0], said[1], time)


def _skipped(record: dict[str, Any]) -> str | None:
    """Why a user or assistant record is no turn of the conversation, if it is not: the
    harness's own notes, its compaction summary, a sub-agent's side chain."""
    for flag, reason in (
        ("isMeta", "meta"),
        ("isCompactSummary", "compact_summary"),
        ("isSidechain", "sidechain"),
    ):
        if record.get(flag) is True:
            return reason
    return None


def read_transcript(lines: Iterable[bytes]) -> Transcript:
    """Every message of a transcript's lines, by session; skipped lines counted."""
    out = Transcript()
    for raw in lines:
        out.add(parse_line(raw))
    return out


def window_entry(raw: bytes) -> Entry | str:
    """One transcript line as the checkpoint hooks see it: a turn (the same words
    ``parse_line`` keeps), a compaction boundary (``type: system``, ``subtype:
    compact_boundary``, its ``compactMetadata.trigger``), or why it is skipped. The
    ``isCompactSummary`` record after a boundary is the harness's own summary: skipped, so
    it never becomes part of the next window."""
    record = json_object(raw)
    if isinstance(record, str):
        return record
    kind = record.get("type")
    raw_uid = record.get("uuid")
    uid = raw_uid if isinstance(raw_uid, str) else ""
    if kind == "system" and record.get("subtype") == "compact_boundary":
        meta = record.get("compactMetadata")
        trigger = meta.get("trigger") if isinstance(meta, dict) else None
        return BoundaryMark(trigger if isinstance(trigger, str) else "", uid)
    if kind not in ("user", "assistant"):
        return "not_a_message"
    skipped = _skipped(record)
    if skipped is not None:
        return skipped
    stamp = record.get("timestamp")
    if utc_time(stamp) is None:
        return "no_time"
    assert isinstance(stamp, str)
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    said = _said(kind, content)
    if isinstance(said, str):
        return said
    return Turn(said[0], said[1], stamp, uid)
