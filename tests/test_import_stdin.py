"""``tether sessions import -`` reads standard input, for every format; the same input again
is the same import; nothing of the input is left in the home but the sessions."""

from __future__ import annotations

import json
from pathlib import Path

from daemon_helpers import tether
from test_claude_code import SID, user

LINE = {
    "session": "pipe",
    "role": "user",
    "text": "piped in about the canal",
    "time": "2026-11-01T09:00:00Z",
}


def _imports(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "imports").iterdir())


def test_a_piped_file_is_imported_once(home: Path) -> None:
    data = json.dumps(LINE) + "\n"
    out = tether(home, "sessions", "import", "-", input=data)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("imported 1 record (1 turn): 1 session created")
    again = tether(home, "sessions", "import", "-", input=data)
    assert again.stdout.startswith("already imported at ")
    assert not any(name.startswith("stdin-") for name in _imports(home))
    assert "pipe#1" in tether(home, "memory", "recall", "canal").stdout


def test_a_piped_transcript_is_imported(home: Path) -> None:
    out = tether(
        home, "sessions", "import", "--format", "claude-code", "-", input=user("hi").decode() + "\n"
    )
    assert out.returncode == 0, out.stderr
    assert f"into {SID}" in out.stdout
    assert not any(name.startswith("stdin-") for name in _imports(home))


def test_a_bad_piped_line_is_named_and_nothing_is_left(home: Path) -> None:
    out = tether(home, "sessions", "import", "-", input='{"session": "x"}\n')
    assert out.returncode == 2
    assert out.stderr.startswith("tether: error: <stdin>:1:")
    assert not (home / "sessions" / "x").exists()
    assert not any(name.startswith("stdin-") for name in _imports(home))
