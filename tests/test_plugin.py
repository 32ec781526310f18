"""The Claude Code plugin manifest (``.claude-plugin/plugin.json``): it parses, names the
same hooks ``tether setup claude-code`` installs, and every command in it runs as Claude
Code would run it (through a shell, ``tether`` found on PATH)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checkpoint_helpers import Transcript, payload, segments
from daemon_helpers import child_env, tether
from tether.harnesses.hooks import hook_command
from tether.harnesses.setup import HOOKS

MANIFEST = Path(__file__).resolve().parents[1] / ".claude-plugin" / "plugin.json"


def manifest() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return doc


def test_the_manifest_names_the_hooks_setup_installs_and_the_mcp_server() -> None:
    doc = manifest()
    assert doc["name"] == "tether"
    hooks = doc["hooks"]
    assert set(hooks) == {event for event, _, _ in HOOKS["claude-code"]}
    for event, name, timeout in HOOKS["claude-code"]:
        [group] = hooks[event]
        [entry] = group["hooks"]
        assert entry["type"] == "command"
        assert hook_command(entry["command"]) == ("claude-code", name)
        assert entry["timeout"] == timeout
    server = doc["mcpServers"]["tether"]
    assert (server["type"], server["command"], server["args"]) == ("stdio", "tether", ["mcp"])


def _on_path(tmp_path: Path) -> dict[str, str]:
    """An environment where ``tether`` is this checkout's (a wrapper on PATH)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "tether"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m tether.cli.main "$@"\n')
    wrapper.chmod(0o755)
    return child_env({"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"})


@pytest.mark.slow
def test_every_command_of_the_manifest_runs(home: Path, tmp_path: Path) -> None:
    env = {**_on_path(tmp_path), "TETHER_HOME": str(home)}
    t = Transcript(tmp_path / "t.jsonl")
    t.user("We keep the release notes in docs/CHANGES.md from now on.")
    t.boundary()
    doc = manifest()
    for event in ("PreCompact", "PostCompact", "SessionStart"):
        command = doc["hooks"][event][0]["hooks"][0]["command"]
        run = subprocess.run(
            ["/bin/sh", "-c", command],
            input=payload(event, t.path, source="compact", trigger="auto"),
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        if event == "SessionStart":
            context = json.loads(run.stdout)["hookSpecificOutput"]["additionalContext"]
            assert "tether://corpus/" in context
    assert len(segments(home)) == 1
    server = doc["mcpServers"]["tether"]
    helped = subprocess.run(
        [server["command"], *server["args"], "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert helped.returncode == 0
    assert "Serve the memory to an MCP client" in helped.stdout
    assert tether(home, "hook", "claude-code", "session-end", "--help").returncode == 0
