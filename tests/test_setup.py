"""``tether setup claude-code|codex``: the hooks and the MCP server in the files the harness
reads, merged into what is there; twice changes nothing; ``--uninstall`` gives back the
files as they were, byte for byte; a file it cannot read safely is refused (exit 2) and
nothing is written. Real files in temporary folders, real ``tether`` child processes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from checkpoint_helpers import Transcript, payload, segments
from daemon_helpers import child_env, tether

EVENTS = {"PreCompact", "PostCompact", "SessionStart", "SessionEnd"}

SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm run test:*)"], "deny": []},
    "hooks": {
        "PreCompact": [{"matcher": "manual", "hooks": [{"type": "command", "command": "echo x"}]}],
        "PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier -w"}]}
        ],
    },
}
MCP: dict[str, Any] = {
    "mcpServers": {"github": {"type": "http", "url": "https://api.example.com/mcp/"}}
}
CLAUDE_JSON: dict[str, Any] = {
    "numStartups": 42,
    "theme": "dark",
    "projects": {"/work/p": {"mcpServers": {}, "allowedTools": [], "lastCost": 0.25}},
    "mcpServers": {"fs": {"type": "stdio", "command": "npx", "args": ["-y", "fs"], "env": {}}},
    "oauthAccount": {"emailAddress": "me@example.com", "displayName": "Ünïcode"},
}
CODEX_TOML = """\
# my Codex settings: keep these comments
model = "gpt-5-codex"  # the default model
approval_policy = "on-request"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]  # a server of mine

[profiles.fast]
model = "gpt-5-mini"
"""


def claude_json_text(doc: dict[str, Any]) -> str:
    """What Claude Code writes (JSON.stringify(doc, null, 2), no final newline)."""
    return json.dumps(doc, indent=2, ensure_ascii=False)


def setup(home: Path, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return tether(home, "setup", *args, env=env)


def ours(doc: dict[str, Any], harness: str = "claude-code") -> dict[str, list[list[str]]]:
    """Event -> the argv of each hook of tether's (as a shell splits its command)."""
    found: dict[str, list[list[str]]] = {}
    for event, groups in doc.get("hooks", {}).items():
        for group in groups:
            for h in group["hooks"]:
                argv = shlex.split(h["command"])
                if f"hook {harness}" in " ".join(argv):
                    found.setdefault(event, []).append(argv)
    return found


def test_claude_code_project_install_is_idempotent_and_uninstall_gives_the_bytes_back(
    home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    settings = project / ".claude" / "settings.json"
    mcp = project / ".mcp.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps(SETTINGS, indent=4) + "\n")  # four spaces: kept
    mcp.write_text(json.dumps(MCP, indent=2) + "\n")
    settings.chmod(0o644)
    before = {p: p.read_bytes() for p in (settings, mcp)}

    run = setup(home, "claude-code", "--project", str(project))
    assert run.returncode == 0, run.stderr
    doc = json.loads(settings.read_text())
    assert {k: v for k, v in doc.items() if k != "hooks"} == {
        k: v for k, v in SETTINGS.items() if k != "hooks"
    }
    assert doc["hooks"]["PostToolUse"] == SETTINGS["hooks"]["PostToolUse"]
    assert doc["hooks"]["PreCompact"][0] == SETTINGS["hooks"]["PreCompact"][0]
    argvs = ours(doc)
    assert set(argvs) == EVENTS
    for event, [argv] in argvs.items():
        assert Path(argv[0]).is_absolute()
        assert Path(argv[0]).name == "tether"
        assert argv[1:3] == ["--home", str(home)]
        assert argv[3:5] == ["hook", "claude-code"]
        assert (
            argv[5]
            == {
                "PreCompact": "pre-compact",
                "PostCompact": "post-compact",
                "SessionStart": "session-start",
                "SessionEnd": "session-end",
            }[event]
        )
    assert settings.read_text().startswith('{\n    "model"')  # its indentation kept
    assert settings.stat().st_mode & 0o777 == 0o644

    servers = json.loads(mcp.read_text())["mcpServers"]
    assert servers["github"] == MCP["mcpServers"]["github"]
    assert servers["tether"]["type"] == "stdio"
    assert Path(servers["tether"]["command"]).is_absolute()
    assert servers["tether"]["args"] == ["--home", str(home), "mcp"]

    installed = {p: p.read_bytes() for p in (settings, mcp)}
    again = setup(home, "claude-code", "--project", str(project))
    assert again.returncode == 0
    assert again.stdout.count("nothing to change") == 2
    assert {p: p.read_bytes() for p in (settings, mcp)} == installed

    gone = setup(home, "claude-code", "--project", str(project), "--uninstall")
    assert gone.returncode == 0, gone.stderr
    assert {p: p.read_bytes() for p in (settings, mcp)} == before
    twice = setup(home, "claude-code", "--project", str(project), "--uninstall")
    assert twice.stdout.count("nothing to change") == 2


def test_files_setup_created_are_removed_by_uninstall(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    run = setup(home, "claude-code", "--project", str(project))
    assert run.returncode == 0, run.stderr
    assert (project / ".mcp.json").exists()
    assert (project / ".claude" / "settings.json").exists()
    assert setup(home, "claude-code", "--project", str(project), "--uninstall").returncode == 0
    assert os.listdir(project) == []  # the folder it made, left empty, goes too


def test_user_scope_writes_claude_json_top_level_and_gives_it_back(
    home: Path, tmp_path: Path
) -> None:
    user = tmp_path / "u"
    user.mkdir()
    claude_json = user / ".claude.json"
    claude_json.write_text(claude_json_text(CLAUDE_JSON))
    claude_json.chmod(0o600)
    original = claude_json.read_bytes()
    env = {"HOME": str(user)}

    run = setup(home, "claude-code", "--user", env=env)
    assert run.returncode == 0, run.stderr
    doc = json.loads(claude_json.read_text())
    assert doc["mcpServers"]["fs"] == CLAUDE_JSON["mcpServers"]["fs"]
    assert doc["mcpServers"]["tether"]["args"] == ["--home", str(home), "mcp"]
    assert doc["projects"] == CLAUDE_JSON["projects"]  # the local scope is not touched
    assert set(ours(json.loads((user / ".claude" / "settings.json").read_text()))) == EVENTS
    assert claude_json.stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / ".mcp.json").exists()

    assert setup(home, "claude-code", "--user", "--uninstall", env=env).returncode == 0
    assert claude_json.read_bytes() == original
    assert not (user / ".claude" / "settings.json").exists()


def test_the_default_home_is_not_named(tmp_path: Path) -> None:
    user = tmp_path / "u"
    user.mkdir()
    env = {"HOME": str(user)}
    run = tether(None, "setup", "claude-code", "--user", env=env)
    assert run.returncode == 0, run.stderr
    server = json.loads((user / ".claude.json").read_text())["mcpServers"]["tether"]
    assert server["args"] == ["mcp"]
    argvs = ours(json.loads((user / ".claude" / "settings.json").read_text()))
    assert argvs["SessionStart"][0][1:] == ["hook", "claude-code", "session-start"]


def test_a_home_with_spaces_is_one_argument_in_both_files_and_the_hook_runs(
    tmp_path: Path,
) -> None:
    home = tmp_path / "my memory" / "tether home"
    assert tether(home, "init").returncode == 0
    project = tmp_path / "proj"
    project.mkdir()
    run = setup(home, "claude-code", "--project", str(project))
    assert run.returncode == 0, run.stderr
    server = json.loads((project / ".mcp.json").read_text())["mcpServers"]["tether"]
    assert server["args"] == ["--home", str(home), "mcp"]
    hooks = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    command = hooks["PreCompact"][0]["hooks"][0]["command"]
    assert shlex.split(command)[1:3] == ["--home", str(home)]

    # Claude Code runs the command line through a shell, TETHER_HOME unset
    t = Transcript(tmp_path / "t.jsonl")
    t.user("We chose the blue logo.")
    t.assistant("Blue it is.")
    env = child_env({k: "" for k in ("TETHER_HOME",)})
    env.pop("TETHER_HOME")
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        input=payload("PreCompact", t.path, trigger="manual"),
        text=True,
        capture_output=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert len(segments(home)) == 1


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        (".mcp.json", '{\n  "mcpServers": {\n    "a": 1,\n  }\n}\n', ".mcp.json:4: not valid JSON"),
        (".mcp.json", '{"mcpServers": ["tether"]}', '"mcpServers" is not an object'),
        (
            ".mcp.json",
            '{"mcpServers": {"tether": {"command": "node", "args": ["srv.js"]}}}',
            "a server tether did not write",
        ),
        (".claude/settings.json", '{"hooks": []}', '"hooks" is not an object'),
        (".claude/settings.json", '{"hooks": {"Stop": [3]}}', '"hooks.Stop[0]" is not a group'),
        (".claude/settings.json", "[1, 2]", "expected a JSON object"),
    ],
)
def test_a_file_it_cannot_merge_is_refused_and_nothing_is_written(
    home: Path, tmp_path: Path, name: str, text: str, needle: str
) -> None:
    project = tmp_path / "proj"
    bad = project / name
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text(text)
    run = setup(home, "claude-code", "--project", str(project))
    assert run.returncode == 2
    assert needle in run.stderr
    assert "Traceback" not in run.stderr
    assert bad.read_text() == text
    written = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file())
    assert written == [name]  # the other file was not written either, no temporary left


def test_codex_project_install_keeps_comments_and_uninstall_gives_the_bytes_back(
    home: Path, tmp_path: Path
) -> None:
    config = tmp_path / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_TOML)
    run = setup(home, "codex", "--project", str(tmp_path))
    assert run.returncode == 0, run.stderr
    text = config.read_text()
    assert text.startswith(CODEX_TOML)  # nothing of the owner's moved or lost
    doc = tomllib.loads(text)
    assert doc["mcp_servers"]["docs"] == {"command": "npx", "args": ["-y", "docs-mcp"]}
    assert doc["profiles"] == {"fast": {"model": "gpt-5-mini"}}
    server = doc["mcp_servers"]["tether"]
    assert Path(server["command"]).is_absolute()
    assert server["args"] == ["--home", str(home), "mcp"]
    hooks = json.loads((tmp_path / ".codex" / "hooks.json").read_text())
    argvs = ours(hooks, "codex")
    assert set(argvs) == EVENTS
    assert hooks["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] == 3  # Codex's cap
    assert "hooks = true" in run.stderr

    installed = config.read_bytes()
    again = setup(home, "codex", "--project", str(tmp_path))
    assert again.stdout.count("nothing to change") == 2
    assert config.read_bytes() == installed

    assert setup(home, "codex", "--project", str(tmp_path), "--uninstall").returncode == 0
    assert config.read_text() == CODEX_TOML
    assert not (tmp_path / ".codex" / "hooks.json").exists()


def test_codex_user_scope_follows_codex_home(home: Path, tmp_path: Path) -> None:
    codex_home = tmp_path / "codex home"
    run = setup(home, "codex", "--user", env={"CODEX_HOME": str(codex_home)})
    assert run.returncode == 0, run.stderr
    doc = tomllib.loads((codex_home / "config.toml").read_text())
    assert doc["mcp_servers"]["tether"]["args"][-1] == "mcp"
    assert (codex_home / "hooks.json").exists()
    gone = setup(home, "codex", "--user", "--uninstall", env={"CODEX_HOME": str(codex_home)})
    assert gone.returncode == 0
    assert not (codex_home / "config.toml").exists()  # it held only tether's block


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('model = "x"\n[mcp_servers\n', "not valid TOML"),
        ('mcp_servers = { docs = { command = "npx" } }\n', "cannot extend"),
        ('[mcp_servers.tether]\ncommand = "node"\n', "already defined, not by tether"),
        ('mcp_servers = "none"\n', "mcp_servers is not a table"),
    ],
)
def test_a_codex_config_it_cannot_extend_is_refused(
    home: Path, tmp_path: Path, text: str, needle: str
) -> None:
    config = tmp_path / "proj" / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(text)
    run = setup(home, "codex", "--project", str(tmp_path / "proj"))
    assert run.returncode == 2
    assert needle in run.stderr
    assert str(config) in run.stderr
    assert "Traceback" not in run.stderr
    assert config.read_text() == text
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.toml"]


def test_project_and_user_together_are_refused(home: Path, tmp_path: Path) -> None:
    run = setup(home, "codex", "--project", str(tmp_path), "--user")
    assert run.returncode == 2
    assert "give one" in run.stderr


def codex_rollout(path: Path, session: str) -> None:
    def line(time: str, kind: str, payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": time, "type": kind, "payload": payload})

    def message(role: str, text: str) -> dict[str, Any]:
        block = "input_text" if role == "user" else "output_text"
        return {"type": "message", "role": role, "content": [{"type": block, "text": text}]}

    lines = [
        line("2026-11-02T09:00:00.000Z", "session_meta", {"id": session, "cwd": "/w"}),
        line("2026-11-02T09:00:01.000Z", "response_item", message("user", "Use pyarrow.")),
        line("2026-11-02T09:00:02.000Z", "response_item", message("assistant", "pyarrow it is.")),
        line("2026-11-02T09:00:03.000Z", "compacted", {"message": "SUMMARY"}),
        line("2026-11-02T09:00:04.000Z", "response_item", message("user", "Ship on Friday.")),
    ]
    path.write_text("\n".join(lines) + "\n")


def test_codex_hooks_bank_at_pre_compact_and_print_the_pack_at_session_start(
    home: Path, tmp_path: Path
) -> None:
    session = "019a0c2e-7f00-7a11-b222-333344445555"
    rollout = tmp_path / "rollout.jsonl"
    codex_rollout(rollout, session)
    pre = tether(
        home,
        "hook",
        "codex",
        "pre-compact",
        input=payload("PreCompact", rollout, session=session, trigger="auto", turn_id="t1"),
    )
    assert pre.returncode == 0, pre.stderr
    [segment] = segments(home)
    assert "Ship on Friday." in segment.read_text()  # the window since the compaction
    post = tether(
        home,
        "hook",
        "codex",
        "post-compact",
        input=payload("PostCompact", rollout, session=session, trigger="auto"),
    )
    assert post.returncode == 0
    assert len(segments(home)) == 2  # the backstop banks the closed window before it
    start = tether(
        home,
        "hook",
        "codex",
        "session-start",
        input=payload("SessionStart", rollout, session=session, source="compact"),
    )
    assert start.returncode == 0
    context = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert context.count("tether://corpus/codex-") == 2


def test_setup_reads_what_claude_code_wrote_with_no_final_newline_and_keeps_it(
    home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    mcp = project / ".mcp.json"
    mcp.write_text(claude_json_text(MCP))
    original = mcp.read_bytes()
    assert setup(home, "claude-code", "--project", str(project)).returncode == 0
    assert not mcp.read_text().endswith("\n")
    assert setup(home, "claude-code", "--project", str(project), "--uninstall").returncode == 0
    assert mcp.read_bytes() == original
    assert os.listdir(project) == [".mcp.json"]


def test_a_tether_installed_under_a_path_with_spaces_is_quoted_and_runs(
    home: Path, tmp_path: Path
) -> None:
    wrapper = tmp_path / "Application Support" / "bin" / "tether"
    wrapper.parent.mkdir(parents=True)
    # a console script as pip writes one: this Python, the CLI's entry point
    wrapper.write_text(
        f"#!{sys.executable}\nimport sys\nfrom tether.cli.main import main\nsys.exit(main())\n"
    )
    wrapper.chmod(0o755)
    project = tmp_path / "proj"
    project.mkdir()
    run = subprocess.run(
        [str(wrapper), "--home", str(home), "setup", "claude-code", "--project", str(project)],
        capture_output=True,
        text=True,
        env=child_env(),
        check=False,
    )
    assert run.returncode == 0, run.stderr
    server = json.loads((project / ".mcp.json").read_text())["mcpServers"]["tether"]
    assert server["command"] == str(wrapper)
    hooks = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    command = hooks["SessionStart"][0]["hooks"][0]["command"]
    assert shlex.split(command)[0] == str(wrapper)
    started = subprocess.run(
        ["/bin/sh", "-c", command],
        input=payload("SessionStart", None, source="startup"),
        capture_output=True,
        text=True,
        env=child_env(),
        check=False,
    )
    assert started.returncode == 0
    assert json.loads(started.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
