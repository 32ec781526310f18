"""``tether hook install``: tether's entries merged into the harness's settings, every
other key and hook kept; twice changes nothing; --uninstall removes exactly what it added;
a file that is not JSON is refused with its line and left untouched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon_helpers import tether

FOREIGN: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm run test:*)"], "deny": []},
    "hooks": {
        "PreCompact": [
            {"matcher": "manual", "hooks": [{"type": "command", "command": "echo mine"}]}
        ],
        "PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier -w"}]}
        ],
    },
    "env": {"FOO": "1"},
}


def install(home: Path, project: Path, *extra: str, harness: str = "claude-code"):  # type: ignore[no-untyped-def]
    return tether(home, "hook", "install", "--harness", harness, "--project", str(project), *extra)


def test_install_merges_keeps_foreign_hooks_and_is_idempotent(home: Path, tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(FOREIGN, indent=4))
    settings.chmod(0o644)
    run = install(home, tmp_path)
    assert run.returncode == 0, run.stderr
    doc = json.loads(settings.read_text())
    assert {k: v for k, v in doc.items() if k != "hooks"} == {
        k: v for k, v in FOREIGN.items() if k != "hooks"
    }
    assert doc["hooks"]["PostToolUse"] == FOREIGN["hooks"]["PostToolUse"]
    assert doc["hooks"]["PreCompact"][0] == FOREIGN["hooks"]["PreCompact"][0]
    ours = {
        event: [
            h["command"] for g in groups for h in g["hooks"] if " hook claude-code " in h["command"]
        ]
        for event, groups in doc["hooks"].items()
    }
    assert [c.rsplit(" ", 1)[1] for c in ours["PreCompact"]] == ["pre-compact"]
    assert [c.rsplit(" ", 1)[1] for c in ours["SessionStart"]] == ["session-start"]
    assert [c.rsplit(" ", 1)[1] for c in ours["SessionEnd"]] == ["session-end"]
    assert [c.rsplit(" ", 1)[1] for c in ours["PostCompact"]] == ["post-compact"]
    assert settings.stat().st_mode & 0o777 == 0o644
    before = settings.read_bytes()
    again = install(home, tmp_path)
    assert again.returncode == 0
    assert "nothing to change" in again.stdout
    assert settings.read_bytes() == before
    # uninstall: exactly what was added goes
    gone = install(home, tmp_path, "--uninstall")
    assert gone.returncode == 0
    assert json.loads(settings.read_text()) == FOREIGN
    assert install(home, tmp_path, "--uninstall").stdout.startswith("nothing to change")


def test_install_into_no_file_and_uninstall_leaves_an_empty_object(
    home: Path, tmp_path: Path
) -> None:
    assert install(home, tmp_path).returncode == 0
    settings = tmp_path / ".claude" / "settings.json"
    assert set(json.loads(settings.read_text())["hooks"]) == {
        "PreCompact",
        "PostCompact",
        "SessionStart",
        "SessionEnd",
    }
    assert install(home, tmp_path, "--uninstall").returncode == 0
    assert json.loads(settings.read_text()) == {}


@pytest.mark.parametrize(
    ("text", "line"), [('{\n  "model": "opus",\n  "hooks": {\n}}\n,', 5), ('{\n  "a": 1,\n}', 3)]
)
def test_a_settings_file_that_is_not_json_is_refused_with_its_line(
    home: Path, tmp_path: Path, text: str, line: int
) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(text)
    run = install(home, tmp_path)
    assert run.returncode == 2
    assert f"{settings}:{line}: not valid JSON" in run.stderr
    assert "Traceback" not in run.stderr
    assert settings.read_text() == text
    assert [p.name for p in settings.parent.iterdir()] == ["settings.json"]  # no temp left


def test_codex_gets_its_session_end_entry_in_hooks_json(home: Path, tmp_path: Path) -> None:
    run = install(home, tmp_path, harness="codex")
    assert run.returncode == 0, run.stderr
    doc = json.loads((tmp_path / ".codex" / "hooks.json").read_text())
    [group] = doc["hooks"]["SessionEnd"]
    [entry] = group["hooks"]
    assert entry["type"] == "command"
    assert entry["timeout"] == 3
    assert entry["command"].endswith("hook codex session-end")
    assert "features" in run.stderr  # how to switch Codex's hooks on
    assert install(home, tmp_path, "--uninstall", harness="codex").returncode == 0
    assert json.loads((tmp_path / ".codex" / "hooks.json").read_text()) == {}


def test_user_settings_live_in_the_home_folder(home: Path, tmp_path: Path) -> None:
    fake_home = tmp_path / "u"
    fake_home.mkdir()
    run = tether(
        home, "hook", "install", "--harness", "claude-code", "--user", env={"HOME": str(fake_home)}
    )
    assert run.returncode == 0, run.stderr
    assert (fake_home / ".claude" / "settings.json").exists()
    both = tether(home, "hook", "install", "--harness", "claude-code", "--user", "--project", ".")
    assert both.returncode == 2
