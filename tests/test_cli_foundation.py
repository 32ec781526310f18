"""The CLI as a user runs it: real child processes, real files, exit codes, no tracebacks."""

from __future__ import annotations

import importlib
import json
import pkgutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon_helpers import tether
from tether import cli as cli_package
from tether.cli import main
from tether.records import Assistant, Baseline, ToolResult, User
from tether.sessions import Session


def test_init_creates_home_and_never_overwrites(tmp_path: Path) -> None:
    home = tmp_path / "h"
    first = tether(home, "init")
    assert first.returncode == 0, first.stderr
    for rel in [
        "tether.toml",
        "config/system.md",
        "config/compact.md",
        "config/heartbeat.md",
        "config/summarise.md",
        "config/jobs/tier.toml.example",
    ]:
        assert (home / rel).is_file(), rel
    (home / "config/system.md").write_text("my own system prompt\n")
    (home / "tether.toml").write_text("[expect]\nn_ctx = 8192\n")
    second = tether(home, "init")
    assert second.returncode == 0
    assert (home / "config/system.md").read_text() == "my own system prompt\n"
    assert (home / "tether.toml").read_text() == "[expect]\nn_ctx = 8192\n"
    assert "kept" in second.stdout


def test_home_from_environment(tmp_path: Path) -> None:
    home = tmp_path / "envhome"
    out = tether(None, "init", env={"TETHER_HOME": str(home)})
    assert out.returncode == 0, out.stderr
    assert (home / "tether.toml").is_file()


def test_config_check_ok_and_bad(tmp_path: Path) -> None:
    home = tmp_path / "h"
    tether(home, "init")
    ok = tether(home, "config", "check")
    assert ok.returncode == 0
    assert "ok" in ok.stdout
    (home / "tether.toml").write_text("[llm]\nurl = 'http://x:1'\ntimeout = 3\n")
    bad = tether(home, "config", "check")
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1
    assert f"{home / 'tether.toml'}: llm.timeout: unknown key" in lines[0]
    assert "Traceback" not in bad.stderr


def test_config_check_reads_the_scan_files_when_there_are_any(home: Path) -> None:
    assert tether(home, "config", "check").stdout == f"ok: {home / 'tether.toml'}\n"
    (home / ".tether-scan-allow").write_text("# none yet\n")
    (home / ".tether-scan-blocklist").write_text("project falcon\nre: acme-(\n")
    bad = tether(home, "config", "check")
    assert bad.returncode == 2
    assert bad.stdout == f"ok: {home / 'tether.toml'}\nok: {home / '.tether-scan-allow'}\n"
    assert bad.stderr.startswith(
        f"tether: error: {home / '.tether-scan-blocklist'}:2: not a regular expression"
    )
    (home / ".tether-scan-blocklist").write_text("project falcon\n")
    assert tether(home, "config", "check").stdout.endswith(
        f"ok: {home / '.tether-scan-blocklist'}\n"
    )


def test_config_check_without_init(tmp_path: Path) -> None:
    out = tether(tmp_path / "nothing", "config", "check")
    assert out.returncode == 2
    assert "tether init" in out.stderr
    assert "Traceback" not in out.stderr


def _session(home: Path) -> None:
    t = datetime(2026, 11, 1, tzinfo=UTC)
    s = Session.create(home, "chat-1", baseline=Baseline(system="s", memory="m"), slot=0, time=t)
    s.append(User(time=t, text="hi"), Assistant(time=t, text="hello"))
    s.append(ToolResult(time=t, tool_call_id="c", content="x", class_="web", untrusted=True))
    s.end_epoch(summary="greetings", baseline=Baseline(system="s", memory="m"), time=t)
    s.append(User(time=t, text="again"))


def test_session_show_json_contract(tmp_path: Path) -> None:
    home = tmp_path / "h"
    tether(home, "init")
    _session(home)
    out = tether(home, "session", "show", "chat-1", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "id": "chat-1",
        "epoch": 1,
        "epochs": [0, 1],
        "turns": 2,
        "untrusted": True,
        "carry": "greetings",
        "slot": 0,
        "owner": "owner",
        "discarded": False,
        "folder": None,
        "folder_by": None,
    }
    human = tether(home, "session", "show", "chat-1")
    assert "greetings" in human.stdout
    assert "untrusted" in human.stdout


def test_session_list(tmp_path: Path) -> None:
    home = tmp_path / "h"
    tether(home, "init")
    assert json.loads(tether(home, "session", "list", "--json").stdout) == []
    _session(home)
    (home / "sessions" / "broken").mkdir()
    (home / "sessions" / "broken" / "0.jsonl").write_text("x\n")
    (home / "sessions" / "broken" / "0.baseline.json").write_text("{}")
    rows = json.loads(tether(home, "session", "list", "--json").stdout)
    assert [r["id"] for r in rows] == ["broken", "chat-1"]
    assert "error" in rows[0]
    assert rows[1]["turns"] == 2
    table = tether(home, "session", "list")
    assert table.returncode == 0
    assert "chat-1" in table.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["session", "show", "Bad_ID"], "invalid session id 'Bad_ID'"),
        (["session", "show", "ghost"], "no session 'ghost'"),
    ],
)
def test_session_show_errors_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    home = tmp_path / "h"
    tether(home, "init")
    out = tether(home, *args)
    assert out.returncode == 2
    assert needle in out.stderr
    assert "Traceback" not in out.stderr


def test_corrupt_session_exits_1_with_file_and_line(tmp_path: Path) -> None:
    home = tmp_path / "h"
    tether(home, "init")
    _session(home)
    log = home / "sessions" / "chat-1" / "1.jsonl"
    log.write_bytes(
        log.read_bytes()
        + b"{oops}\n"
        + b'{"type":"User","time":"2026-11-01T00:00:00Z","text":"z"}\n'
    )
    out = tether(home, "session", "show", "chat-1")
    assert out.returncode == 1
    assert f"{log}:3: malformed record" in out.stderr
    assert "Traceback" not in out.stderr


def test_unknown_command_is_usage_error(tmp_path: Path) -> None:
    out = tether(tmp_path, "frobnicate")
    assert out.returncode == 2


def test_the_command_tables_name_every_command_where_it_is() -> None:
    # Commands are imported on use from the module the tables name: a command missing
    # from them would vanish from `tether`, a wrong module would fail when it runs.
    found: dict[str, dict[str, str]] = {"COMMANDS": {}, "MEMORY_COMMANDS": {}}
    for info in pkgutil.iter_modules(cli_package.__path__):
        if not info.name.startswith("commands_"):
            continue
        module = importlib.import_module(f"tether.cli.{info.name}")
        for table, names in found.items():
            for command in getattr(module, table, ()):
                assert command.name not in names, f"{command.name} is in two modules"
                names[command.name] = info.name
    assert found["COMMANDS"] == dict(main.COMMANDS)
    assert found["MEMORY_COMMANDS"] == dict(main.MEMORY_COMMANDS)


def test_help_lists_every_command() -> None:
    top = tether(None, "--help")
    memory = tether(None, "memory", "--help")
    assert top.returncode == 0, top.stderr
    assert memory.returncode == 0, memory.stderr
    commands = top.stdout.split("Commands:")[1]
    assert {line.split()[0] for line in commands.strip().splitlines()} == {*main.COMMANDS, "memory"}
    listed = memory.stdout.split("Commands:")[1]
    assert {line.split()[0] for line in listed.strip().splitlines()} == set(main.MEMORY_COMMANDS)
