"""The harnesses' hooks: what Claude Code (and Codex) send a hook on stdin, what a hook
prints back, and the settings files that name the hooks.

Payloads (Claude Code's hook input; Codex sends the same fields to its SessionEnd hook):
``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, and per event
``trigger`` (PreCompact: ``manual`` | ``auto``), ``custom_instructions`` (PreCompact: "",
null or missing), ``source`` (SessionStart: ``startup`` | ``resume`` | ``clear`` |
``compact``), ``reason`` (SessionEnd). Fields a later harness adds are ignored; a missing
or mistyped field reads as None, and the hook reports a typed skip: a hook never fails
its harness.

Settings (``.claude/settings.json``, ``~/.claude/settings.json``, Codex's
``~/.codex/hooks.json``): ``{"hooks": {"<Event>": [{"matcher"?: ..., "hooks": [{"type":
"command", "command": ..., "timeout"?: s}]}]}}``. ``merge_hooks`` adds our entries and
keeps every other key and hook as it was (the file is re-encoded with two-space indent:
same meaning, key order kept); ``remove_hooks`` removes exactly the entries whose command
is ours; both are idempotent. A file that is not valid JSON is refused naming its line,
and never written.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.errors import BadInputError
from tether.files import write_atomic


@dataclass(frozen=True)
class HookInput:
    """A hook's stdin, the fields tether reads (None: missing or not a string)."""

    event: str | None
    session_id: str | None
    transcript_path: str | None
    cwd: str | None
    trigger: str | None = None
    custom_instructions: str | None = None
    source: str | None = None
    reason: str | None = None


def _str(doc: Mapping[str, Any], key: str) -> str | None:
    value = doc.get(key)
    return value if isinstance(value, str) else None


def parse_hook_input(data: bytes) -> HookInput | str:
    """The payload, or a reason code (``bad_payload``) when stdin is not a JSON object."""
    try:
        doc = json.loads(data or b"{}")
    except (ValueError, UnicodeDecodeError):
        return "bad_payload"
    if not isinstance(doc, dict):
        return "bad_payload"
    return HookInput(
        event=_str(doc, "hook_event_name"),
        session_id=_str(doc, "session_id"),
        transcript_path=_str(doc, "transcript_path"),
        cwd=_str(doc, "cwd"),
        trigger=_str(doc, "trigger"),
        custom_instructions=_str(doc, "custom_instructions"),
        source=_str(doc, "source"),
        reason=_str(doc, "reason"),
    )


def session_start_output(context: str) -> bytes:
    """What a SessionStart hook prints: the pack as ``additionalContext`` (never a
    ``decision``: a hook of tether's never blocks its harness)."""
    out = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}
    return json.dumps(out, ensure_ascii=False).encode() + b"\n"


# -- settings files ---------------------------------------------------------------------

#: A command of ours: a path (or name) ending in ``tether``, maybe ``--home DIR``, then
#: ``hook <harness> <event>``.
OURS = re.compile(r"^(?:\S*/)?tether(?: --home \S+)? hook (?:claude-code|codex) [a-z-]+$")


@dataclass(frozen=True)
class HookEntry:
    event: str  # PreCompact, SessionStart, SessionEnd
    command: str
    timeout_s: int | None = None


def read_settings(path: Path) -> dict[str, Any]:
    """The settings object at ``path`` ({} when there is no file); BadInputError naming
    the line when it is not a JSON object."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{path}: cannot read: {exc}; left untouched") from None
    if not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInputError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno}); "
            "left untouched, fix it and run again"
        ) from None
    if not isinstance(doc, dict):
        raise BadInputError(f"{path}:1: expected a JSON object; left untouched")
    return doc


def _event_list(doc: dict[str, Any], path: Path, event: str) -> list[Any]:
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise BadInputError(f'{path}: "hooks" is not an object; left untouched')
    groups = hooks.setdefault(event, [])
    if not isinstance(groups, list):
        raise BadInputError(f'{path}: "hooks.{event}" is not a list; left untouched')
    return groups


def _is_ours(hook: Any) -> bool:
    return (
        isinstance(hook, dict)
        and isinstance(hook.get("command"), str)
        and bool(OURS.match(hook["command"]))
    )


def merge_hooks(doc: dict[str, Any], path: Path, entries: list[HookEntry]) -> bool:
    """Add each entry unless the same command is there (in any group of its event);
    whether anything changed. A command of ours for the event that differs (another path
    or home) is replaced in place."""
    changed = False
    for entry in entries:
        groups = _event_list(doc, path, entry.event)
        hook: dict[str, Any] = {"type": "command", "command": entry.command}
        if entry.timeout_s is not None:
            hook["timeout"] = entry.timeout_s
        found = False
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                continue
            for i, h in enumerate(inner):
                if _is_ours(h) and h["command"].endswith(entry.command.split(" hook ", 1)[1]):
                    found = True
                    if h != hook:
                        inner[i] = hook
                        changed = True
        if not found:
            groups.append({"hooks": [hook]})
            changed = True
    return changed


def remove_hooks(doc: dict[str, Any]) -> bool:
    """Remove every hook of ours, then the groups and events left empty by it; whether
    anything changed."""
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return False
    changed = False
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list) or not any(_is_ours(h) for h in inner):
                kept_groups.append(group)
                continue
            changed = True
            rest = [h for h in inner if not _is_ours(h)]
            if rest:
                kept_groups.append({**group, "hooks": rest})
        if kept_groups:
            hooks[event] = kept_groups
        else:
            del hooks[event]
    if changed and not hooks:
        del doc["hooks"]
    return changed


def write_settings(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` atomically, keeping the file's mode (0600 for a new file)."""
    try:
        mode: int | None = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    data = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    write_atomic(path, data.encode(), mode=mode)
