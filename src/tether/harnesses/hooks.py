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
keeps every other key and hook as it was; ``remove_hooks`` removes exactly the entries
whose command is ours (``hook_command``: ``tether [--home DIR] hook <harness> <event>``,
read the way a shell reads it); both are idempotent. A hook command is a shell string, so
a path with a space in it is quoted (``shlex``). ``write_settings`` re-encodes the file in
the indentation it had (two spaces, four, a tab; Claude Code writes two), key order
kept, so an install then an uninstall gives back the same bytes for a file in that form.
A file that is not valid JSON, or whose ``hooks`` is not the shape above, is refused
naming its line or key, and never written.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.errors import SettingsFileError
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


#: The most of a hook's stdin read: a harness's payload is a small JSON object (ids, a
#: path, a few fields); anything longer is not one, and is never read whole (a hook fed
#: an endless stream must still end at once, exit 0).
MAX_PAYLOAD_BYTES = 1024 * 1024


def parse_hook_input(data: bytes) -> HookInput | str:
    """The payload, or a reason code when stdin is not one: ``payload_too_large`` (over
    ``MAX_PAYLOAD_BYTES``), ``bad_payload`` (not a JSON object)."""
    if len(data) > MAX_PAYLOAD_BYTES:
        return "payload_too_large"
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

HARNESSES = ("claude-code", "codex")
_EVENT = re.compile(r"[a-z][a-z-]*")


def hook_command(command: str) -> tuple[str, str] | None:
    """(harness, event) of a hook command of ours: a program named ``tether`` (any path),
    maybe ``--home DIR``, then ``hook <harness> <event>``, split as a shell splits it;
    None for any other command."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if len(argv) == 6 and argv[1] == "--home":
        argv = [argv[0], *argv[3:]]
    if len(argv) != 4 or Path(argv[0]).name != "tether" or argv[1] != "hook":
        return None
    if argv[2] not in HARNESSES or not _EVENT.fullmatch(argv[3]):
        return None
    return argv[2], argv[3]


def tether_hook_command(program: str, home: Path | None, harness: str, event: str) -> str:
    """The shell command a harness runs for a hook: quoted where a path needs it."""
    home_args = ["--home", str(home)] if home is not None else []
    return shlex.join([program, *home_args, "hook", harness, event])


@dataclass(frozen=True)
class HookEntry:
    event: str  # PreCompact, SessionStart, SessionEnd
    command: str
    timeout_s: int | None = None


def read_settings(path: Path) -> dict[str, Any]:
    """The settings object at ``path`` ({} when there is no file); SettingsFileError naming
    the line when it is not a JSON object."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(f"{path}: cannot read: {exc}; left untouched") from None
    if not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsFileError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno}); "
            "left untouched, fix it and run again"
        ) from None
    if not isinstance(doc, dict):
        raise SettingsFileError(f"{path}:1: expected a JSON object; left untouched")
    return doc


def check_hooks_shape(doc: dict[str, Any], path: Path) -> None:
    """SettingsFileError naming the key when ``hooks`` is not the shape the harness reads
    (an object of event -> list of groups, each an object whose ``hooks`` is a list)."""
    hooks = doc.get("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsFileError(f'{path}: "hooks" is not an object; left untouched')
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise SettingsFileError(f'{path}: "hooks.{event}" is not a list; left untouched')
        for i, group in enumerate(groups):
            if not isinstance(group, dict) or not isinstance(group.get("hooks", []), list):
                raise SettingsFileError(
                    f'{path}: "hooks.{event}[{i}]" is not a group {{"hooks": [...]}}; '
                    "left untouched"
                )


def _event_list(doc: dict[str, Any], path: Path, event: str) -> list[Any]:
    check_hooks_shape(doc, path)
    groups: list[Any] = doc.setdefault("hooks", {}).setdefault(event, [])
    return groups


def _is_ours(hook: Any) -> bool:
    return (
        isinstance(hook, dict)
        and isinstance(hook.get("command"), str)
        and hook_command(hook["command"]) is not None
    )


def merge_hooks(doc: dict[str, Any], path: Path, entries: list[HookEntry]) -> bool:
    """Add each entry unless the same command is there (in any group of its event);
    whether anything changed. A command of ours for the same harness and event that
    differs (another path or home) is replaced in place."""
    changed = False
    for entry in entries:
        groups = _event_list(doc, path, entry.event)
        hook: dict[str, Any] = {"type": "command", "command": entry.command}
        if entry.timeout_s is not None:
            hook["timeout"] = entry.timeout_s
        wanted = hook_command(entry.command)
        found = False
        for group in groups:
            inner = group.get("hooks")
            if not isinstance(inner, list):
                continue
            for i, h in enumerate(inner):
                if _is_ours(h) and hook_command(h["command"]) == wanted:
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
            rest = [h for h in inner if not _is_ours(h)]
            if rest:
                kept_groups.append({**group, "hooks": rest})
        if kept_groups == groups:  # nothing of ours in this event
            continue
        changed = True
        if kept_groups:
            hooks[event] = kept_groups
        else:
            del hooks[event]
    if changed and not hooks:
        del doc["hooks"]
    return changed


_INDENT = re.compile(r"^([ \t]+)\S", re.MULTILINE)


def json_style(text: str) -> tuple[int | str | None, bool]:
    """(indent, final newline) of a JSON text as ``json.dumps`` takes them: the first
    indented line's indentation (spaces: their count; else the string), None for a
    one-line document; two spaces and a newline for an empty text."""
    if not text.strip():
        return 2, True
    final = text.endswith("\n")
    if "\n" not in text.strip():
        return None, final
    m = _INDENT.search(text)
    if m is None:
        return 2, final
    ws = m.group(1)
    return (len(ws) if set(ws) == {" "} else ws), final


def encode_json(doc: Any, style: tuple[int | str | None, bool]) -> bytes:
    indent, final = style
    data = json.dumps(doc, indent=indent, ensure_ascii=False)
    return (data + ("\n" if final else "")).encode()


def write_settings(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` atomically in the file's own indentation (``json_style``), keeping
    its mode (0600 for a new file)."""
    try:
        mode: int | None = os.stat(path).st_mode & 0o7777
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        mode, old = None, ""
    write_atomic(path, encode_json(doc, json_style(old)), mode=mode)
