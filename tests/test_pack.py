"""The context pack as a harness gets it: through the real SessionStart hook, under Claude
Code's 10,000-character cut whatever the budget, with each checkpoint's digest, and naming
the MCP tool that reads its links: checked against the server `tether setup` registers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from checkpoint_helpers import TETHER_SESSION, Transcript, hook, payload, segments
from daemon_helpers import child_env, tether
from mcp_helpers import call
from tether.core.checkpoints.window import MAX_PACK_CHARS

pytestmark = pytest.mark.slow


def many_windows(path: Path, windows: int) -> Transcript:
    t = Transcript(path)
    for i in range(windows):
        t.user(f"Please port module number {i} of the billing service to Rust this week.")
        t.assistant(
            f"We settled on tokio for module {i} instead of async-std. "
            f"TODO: benchmark module {i} against the Python one."
        )
        t.user(f"Keep my notes on module {i} out of it: <private>diary {i} PRIVATE-WORDS</private>")
        t.boundary()
    t.user("What is next?")
    return t


def context_of(stdout: str) -> str:
    text: str = json.loads(stdout)["hookSpecificOutput"]["additionalContext"]
    return text


def test_the_pack_stays_under_claude_codes_cut_whatever_the_budget(
    home: Path, tmp_path: Path
) -> None:
    (home / "tether.toml").write_text("[checkpoint]\npack_tokens = 1000000\n")
    (home / "memory" / "memory.md").write_text(
        "".join(f"- the owner's standing rule number {i}: {'never ' * 40}\n" for i in range(400))
    )
    t = many_windows(tmp_path / "t.jsonl", 30)
    run = hook(home, "session-start", payload("SessionStart", t.path, source="compact"))
    assert run.returncode == 0, run.stderr
    assert len(segments(home)) == 30  # the backstop banked every window
    context = context_of(run.stdout)
    assert len(context) <= MAX_PACK_CHARS
    assert "mcp__tether__read" in context
    assert "PRIVATE-WORDS" not in context
    # the newest checkpoint first, with what was asked, decided and left open in it
    first = context.index("- tether://corpus/")
    assert context.index("asked: Please port module number 29") > first
    assert "decided: We settled on tokio for module 29 instead of async-std." in context
    assert "open: TODO: benchmark module 29 against the Python one." in context
    assert "more lines not shown" in context
    plain = tether(home, "context-pack", "--session", TETHER_SESSION.removeprefix("cc-"))
    assert plain.stdout == context


@pytest.mark.anyio
async def test_the_server_setup_registers_reads_the_links_the_pack_gives(tmp_path: Path) -> None:
    home = tmp_path / "my memory" / "home"
    assert tether(home, "init").returncode == 0
    project = tmp_path / "proj"
    project.mkdir()
    assert tether(home, "setup", "claude-code", "--project", str(project)).returncode == 0
    t = many_windows(tmp_path / "t.jsonl", 2)
    start = hook(home, "session-start", payload("SessionStart", t.path, source="compact"))
    context = context_of(start.stdout)
    link = next(w for w in context.split() if w.startswith("tether://corpus/"))

    # Claude Code starts the server as .mcp.json says, without tether's environment
    server = json.loads((project / ".mcp.json").read_text())["mcpServers"]["tether"]
    assert server["type"] == "stdio"
    env = {k: v for k, v in child_env().items() if not k.startswith("TETHER_")}
    params = StdioServerParameters(command=server["command"], args=server["args"], env=env)
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            tools = {tool.name for tool in (await s.list_tools()).tools}
            assert {"read", "recall"} <= tools  # the names the pack gives
            error, text = await call(s, "read", link=link)
    assert not error, text
    assert "Please port module number 1 of the billing service" in text
    assert "PRIVATE-WORDS" not in text
