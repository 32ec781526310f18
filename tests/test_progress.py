"""Long commands show how far they got on a terminal and say nothing extra when piped
(issue 17, item 7). A real child process with its stderr on a pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest

from daemon_helpers import child_env, tether, tether_argv


def _on_a_terminal(home: Path, *args: str) -> tuple[int, str, str]:
    """Run ``tether ARGS`` with stderr on a pseudo-terminal: exit code, stdout, what the
    terminal showed."""
    master, slave = pty.openpty()
    env = child_env({"TERM": "xterm", "COLUMNS": "100"})
    with subprocess.Popen(
        tether_argv(home, *args), stdout=subprocess.PIPE, stderr=slave, env=env
    ) as child:
        os.close(slave)
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        out = child.stdout.read() if child.stdout else b""
        code = child.wait(timeout=120)
    os.close(master)
    return code, out.decode(), shown.decode(errors="replace")


@pytest.fixture
def history(tmp_path: Path) -> Path:
    src = tmp_path / "history.jsonl"
    with src.open("w") as out:
        for i in range(3000):
            line = {
                "session": f"s{i % 30}",
                "role": "user" if i % 2 == 0 else "assistant",
                "text": f"message {i} about the canal",
                "time": f"2026-11-01T09:{i // 60 % 60:02d}:{i % 60:02d}Z",
            }
            out.write(json.dumps(line) + "\n")
    return src


@pytest.mark.slow
def test_a_long_import_shows_its_progress_on_a_terminal(home: Path, history: Path) -> None:
    code, out, shown = _on_a_terminal(home, "sessions", "import", str(history))
    assert code == 0
    assert "importing records" in shown
    assert "indexing sessions" in shown
    assert out.startswith("imported 3000 records (1500 turns): 30 sessions created")
    code, out, shown = _on_a_terminal(home, "memory", "reindex")
    assert code == 0
    assert "indexing sessions" in shown
    assert out.startswith("reindexed 30 sessions (30 logs)")
    code, out, shown = _on_a_terminal(home, "memory", "scan")
    assert code == 0
    assert "scanning memory" in shown
    assert out.startswith("no secret in durable memory")


@pytest.mark.slow
def test_piped_it_says_nothing_more(home: Path, history: Path) -> None:
    done = tether(home, "sessions", "import", str(history))
    assert done.returncode == 0
    assert done.stderr == ""
    assert done.stdout.startswith("imported 3000 records")
    again = tether(home, "memory", "reindex")
    assert (again.returncode, again.stderr) == (0, "")
