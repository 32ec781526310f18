"""``tether setup``: tether's hooks and its MCP server in the files a harness reads.

What goes where (``--project DIR``, the default being this folder; or ``--user``):

============  =====================================  ======================================
harness       hooks                                  MCP server ``tether`` (stdio)
============  =====================================  ======================================
claude-code   ``DIR/.claude/settings.json``          ``DIR/.mcp.json`` (``mcpServers``)
              ``~/.claude/settings.json``            ``~/.claude.json`` (top-level
                                                     ``mcpServers``: the user scope)
codex         ``DIR/.codex/hooks.json``              ``DIR/.codex/config.toml``
              ``$CODEX_HOME/hooks.json``             ``$CODEX_HOME/config.toml``
              (``~/.codex`` unless set)              (``[mcp_servers.tether]``)
============  =====================================  ======================================

The hooks: PreCompact banks the window, PostCompact and SessionStart (source ``compact``)
are the backstop, SessionStart prints the pack, SessionEnd banks what no boundary covered.
A hook command is a shell string (quoted with ``shlex`` where a path has a space); the MCP
server is an argv (``command`` and ``args``), so any path goes as it is. Both name this
tether by its absolute path, and the home with ``--home`` unless it is the default.

Every file is read and checked before any is written: a file that is not valid JSON or
TOML, or that has an unexpected shape (``hooks`` not an object of lists, ``mcpServers``
not an object, a server ``tether`` that tether did not write), is refused naming it, and
nothing is written. Each write is atomic and keeps the file's mode and indentation (see
``harnesses.hooks.write_settings``); running setup twice changes nothing. ``--uninstall``
removes exactly the hooks and the server tether added; a file left with nothing in it
(``{}``, or an empty TOML file) is deleted: setup created it, or it meant nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tether.core.views import toml_block
from tether.errors import SettingsFileError, TetherError
from tether.harnesses.hooks import (
    HookEntry,
    check_hooks_shape,
    encode_json,
    json_style,
    merge_hooks,
    read_settings,
    remove_hooks,
    tether_hook_command,
)

Harness = Literal["claude-code", "codex"]
SERVER = "tether"
CODEX_TABLE = "mcp_servers.tether"

#: (event, tether's hook, timeout in seconds) per harness. Codex caps SessionEnd at 3 s.
HOOKS: dict[str, tuple[tuple[str, str, int], ...]] = {
    "claude-code": (
        ("PreCompact", "pre-compact", 10),
        ("PostCompact", "post-compact", 10),
        ("SessionStart", "session-start", 10),
        ("SessionEnd", "session-end", 5),
    ),
    "codex": (
        ("PreCompact", "pre-compact", 10),
        ("PostCompact", "post-compact", 10),
        ("SessionStart", "session-start", 10),
        ("SessionEnd", "session-end", 3),
    ),
}


def tether_program() -> str:
    """This tether's absolute path: the running program when it is ``tether``, else the
    ``tether`` beside this Python (its virtual environment's), else the one on PATH."""
    me = Path(sys.argv[0])
    if me.name == "tether" and me.is_file():
        return str(me.absolute())
    beside = Path(sys.executable).parent / "tether"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.absolute())
    found = shutil.which("tether")
    if found:
        return str(Path(found).absolute())
    raise TetherError(
        "cannot find the tether program (not beside this Python, not on PATH): install "
        "tether so that `tether` runs, then run setup again"
    )


def hook_entries(harness: str, program: str, home: Path | None) -> list[HookEntry]:
    return [
        HookEntry(event, tether_hook_command(program, home, harness, name), timeout)
        for event, name, timeout in HOOKS[harness]
    ]


def server_argv(home: Path | None) -> list[str]:
    """The MCP server's arguments after the program."""
    return [*(["--home", str(home)] if home is not None else []), "mcp"]


# -- where --------------------------------------------------------------------------------


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def hooks_path(harness: str, project: Path | None) -> Path:
    """The hooks file: ``project`` None is the user scope."""
    if harness == "claude-code":
        return (project or Path.home()) / ".claude" / "settings.json"
    return (project / ".codex" if project else codex_home()) / "hooks.json"


def server_path(harness: str, project: Path | None) -> Path:
    if harness == "claude-code":
        return project / ".mcp.json" if project else Path.home() / ".claude.json"
    return (project / ".codex" if project else codex_home()) / "config.toml"


# -- the MCP entry in JSON ---------------------------------------------------------------


def _is_our_server(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    command, args = entry.get("command"), entry.get("args", [])
    return (
        isinstance(command, str)
        and Path(command).name == "tether"
        and isinstance(args, list)
        and bool(args)
        and args[-1] == "mcp"
        and len(args) in (1, 3)
        and (len(args) == 1 or args[0] == "--home")
    )


def _servers(doc: dict[str, Any], path: Path) -> dict[str, Any] | None:
    servers = doc.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise SettingsFileError(f'{path}: "mcpServers" is not an object; left untouched')
    return servers


def merge_server(doc: dict[str, Any], path: Path, program: str, home: Path | None) -> bool:
    """Put ``mcpServers.tether`` (stdio) in ``doc``; whether anything changed. A server
    named tether that is not tether's is refused."""
    entry = {"type": "stdio", "command": program, "args": server_argv(home)}
    servers = _servers(doc, path)
    current = servers.get(SERVER) if servers is not None else None
    if current is not None and not _is_our_server(current):
        raise SettingsFileError(
            f'{path}: "mcpServers.{SERVER}" is a server tether did not write; rename or '
            "remove it, then run setup again (left untouched)"
        )
    if current == entry:
        return False
    doc.setdefault("mcpServers", {})[SERVER] = entry
    return True


def remove_server(doc: dict[str, Any], path: Path) -> bool:
    """Remove tether's ``mcpServers.tether`` (and ``mcpServers`` when left empty)."""
    servers = _servers(doc, path)
    if servers is None or not _is_our_server(servers.get(SERVER)):
        return False
    del servers[SERVER]
    if not servers:
        del doc["mcpServers"]
    return True


# -- planning and writing ----------------------------------------------------------------


@dataclass(frozen=True)
class Edit:
    """One file's change: its new bytes, or None to delete it."""

    path: Path
    what: str  # "hooks", "MCP server"
    data: bytes | None
    changed: bool


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(f"{path}: cannot read: {exc}; left untouched") from None


def _json_edit(path: Path, what: str, doc: dict[str, Any], changed: bool) -> Edit:
    if not changed:
        return Edit(path, what, b"", False)
    if not doc:
        return Edit(path, what, None, path.exists())
    return Edit(path, what, encode_json(doc, json_style(_read_text(path))), True)


def plan_hooks(path: Path, entries: list[HookEntry], *, uninstall: bool) -> Edit:
    doc = read_settings(path)
    check_hooks_shape(doc, path)
    changed = remove_hooks(doc) if uninstall else merge_hooks(doc, path, entries)
    return _json_edit(path, "hooks", doc, changed)


def plan_server(
    harness: str, path: Path, program: str, home: Path | None, *, uninstall: bool
) -> Edit:
    if harness == "claude-code":
        doc = read_settings(path)
        changed = remove_server(doc, path) if uninstall else merge_server(doc, path, program, home)
        return _json_edit(path, "MCP server", doc, changed)
    text = _read_text(path)
    block = toml_block.server_block(CODEX_TABLE, program, server_argv(home))
    try:
        new = (
            toml_block.remove_block(text, CODEX_TABLE)
            if uninstall
            else toml_block.add_block(text, CODEX_TABLE, block)
        )
    except toml_block.BlockError as exc:
        raise SettingsFileError(f"{path}: {exc}; left untouched") from None
    if new == text:
        return Edit(path, "MCP server", b"", False)
    if not new.strip():
        return Edit(path, "MCP server", None, True)
    return Edit(path, "MCP server", new.encode(), True)


def apply(edit: Edit) -> None:
    """Write (atomically, keeping the mode) or delete the file of ``edit``."""
    from tether.files import write_atomic

    if not edit.changed:
        return
    if edit.data is None:
        edit.path.unlink(missing_ok=True)
        if edit.path.parent.name in (".claude", ".codex"):
            with contextlib.suppress(OSError):  # not empty: the owner's things are in it
                edit.path.parent.rmdir()
        return
    try:
        mode: int | None = os.stat(edit.path).st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    write_atomic(edit.path, edit.data, mode=mode)


def setup(
    harness: str,
    project: Path | None,
    home: Path | None,
    *,
    uninstall: bool,
    program: str | None = None,
) -> list[Edit]:
    """Plan every file's edit (refusing before any write), then apply them; the edits.
    ``program``: the tether to name (default: ``tether_program``; an uninstall needs none)."""
    prog = program or ("tether" if uninstall else tether_program())
    edits = [
        plan_hooks(
            hooks_path(harness, project), hook_entries(harness, prog, home), uninstall=uninstall
        ),
        plan_server(harness, server_path(harness, project), prog, home, uninstall=uninstall),
    ]
    for edit in edits:
        apply(edit)
    return edits
