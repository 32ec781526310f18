"""What every harness transcript reader gives: messages by tether session, and the lines
it skipped, by reason; and the one way a harness's session id becomes a tether id."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from tether.ids import is_session_id

#: Characters of a tool call's input kept in the message that records it.
TOOL_INPUT_CHARS = 300
#: Characters of a tool result kept in the message that records it: its head and its tail
#: (an error's message and a traceback's last lines are at either end; a file read or a
#: test run's middle is rarely what is searched for later).
TOOL_RESULT_HEAD = 1200
TOOL_RESULT_TAIL = 800
#: How a tool's output is marked in the message that records it (``[tool error]`` when the
#: harness flagged it as failed).
TOOL_RESULT = "[tool result]"
TOOL_ERROR = "[tool error]"
_NOT_ID = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class Message:
    session: str  # the tether session id
    role: Literal["user", "assistant"]
    text: str
    time: datetime  # UTC


@dataclass
class Transcript:
    """The messages of a transcript by tether session (first-appearance order), and the
    lines skipped, by reason."""

    sessions: dict[str, list[Message]] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)

    @property
    def messages(self) -> int:
        return sum(len(m) for m in self.sessions.values())

    def add(self, parsed: Message | str) -> None:
        """Keep a message, or count why a line was skipped (a blank line is not counted)."""
        if isinstance(parsed, Message):
            self.sessions.setdefault(parsed.session, []).append(parsed)
        elif parsed != "blank":
            self.skipped[parsed] += 1


def tether_session(prefix: str, harness_session: str) -> str:
    """The tether session id of a harness's session id: ``prefix`` and the id when that
    fits tether's grammar, else a readable part and a hash of the whole (stable, valid,
    and distinct for distinct ids)."""
    plain = f"{prefix}{harness_session}"
    if is_session_id(plain):
        return plain
    readable = _NOT_ID.sub("-", harness_session.lower()).strip("-")[:40].strip("-")
    digest = hashlib.sha256(harness_session.encode()).hexdigest()[:12]
    return f"{prefix}{readable}-{digest}" if readable else f"{prefix}{digest}"


def utc_time(value: Any) -> datetime | None:
    """An RFC 3339 time with a zone, in UTC; None for anything else."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(UTC)


def tool_call(name: Any, args: Any) -> str:
    """``[tool NAME] INPUT``: the input as compact JSON, cut at ``TOOL_INPUT_CHARS``."""
    text = (
        args
        if isinstance(args, str)
        else json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    )
    if len(text) > TOOL_INPUT_CHARS:
        text = text[:TOOL_INPUT_CHARS] + "…"
    return f"[tool {name if isinstance(name, str) and name else '?'}] {text}"


def tool_output(content: Any, *, error: bool = False) -> str:
    """``[tool result] OUTPUT`` (``[tool error]`` when ``error``): a tool's output (a string,
    or a list of ``text`` blocks), its head and tail kept; "" when it has no text."""
    if isinstance(content, list):
        parts = [
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        content = "\n".join(parts)
    if not isinstance(content, str) or not content.strip():
        return ""
    text = content.strip()
    if len(text) > TOOL_RESULT_HEAD + TOOL_RESULT_TAIL:
        cut = len(text) - TOOL_RESULT_HEAD - TOOL_RESULT_TAIL
        head, tail = text[:TOOL_RESULT_HEAD], text[-TOOL_RESULT_TAIL:]
        text = f"{head}\n… [{cut} characters left out] …\n{tail}"
    return f"{TOOL_ERROR if error else TOOL_RESULT} {text}"


def json_object(raw: bytes) -> dict[str, Any] | str:
    """A line as a JSON object, or why it is skipped."""
    if not raw.strip():
        return "blank"
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return "not_json"
    return record if isinstance(record, dict) else "not_an_object"
