"""The home is the owner's alone: every folder tether makes is 0700, every file 0600 (the
database holds notes, private pages and the journal; a log every word said), and a home
made before tether saw to it is fixed by ``tether init`` and ``tether doctor``. Real
commands in child processes, a real fake server."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from daemon_helpers import tether
from tether.testing import FakeLlama


def _loose(home: Path) -> list[str]:
    """Every path under ``home`` that its group or others may read, write or enter."""
    found = []
    for root, dirs, files in os.walk(home):
        for path in [Path(root), *(Path(root, n) for n in (*dirs, *files))]:
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                continue
            if stat.S_IMODE(info.st_mode) & 0o077:
                found.append(f"{path.relative_to(home)} {oct(stat.S_IMODE(info.st_mode))}")
    return sorted(set(found))


def test_what_every_command_writes_is_private(tmp_path: Path, fake: FakeLlama) -> None:
    home = tmp_path / "home"
    assert tether(home, "init").returncode == 0
    toml = home / "tether.toml"
    toml.write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n')
    src = tmp_path / "history.jsonl"
    src.write_text(
        json.dumps(
            {
                "session": "trip",
                "role": "user",
                "text": "we fly to Lisbon",
                "time": "2026-11-01T09:00:00Z",
            }
        )
        + "\n"
    )
    project = tmp_path / "project"
    project.mkdir()
    for args in (
        ("memory", "add", "the owner drinks oolong"),
        ("memory", "note", "the boat is in Kiel"),
        ("sessions", "import", str(src)),
        ("chat", "hello there"),
        ("session", "compact", "chat"),
        ("memory", "recall", "Lisbon"),
        ("sweep", "run"),
    ):
        out = tether(home, *args)
        assert out.returncode == 0, (args, out.stderr)
    page = tether(
        home, "page", "write", "people/ada", "--visibility", "world", input="# Ada\n\nAda sails.\n"
    )
    assert page.returncode == 0, page.stderr
    assert (home / "tether.db").exists()
    assert _loose(home) == []
    # A file compile-context writes in a project is meant to be read by others, as before.
    target = project / ".claude" / "tether-context.md"
    out = tether(home, "compile-context", "--target", "claude-code", "--out", str(target))
    assert out.returncode == 0, out.stderr
    assert stat.S_IMODE((project / ".claude").stat().st_mode) == 0o755
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert _loose(home) == []


def test_init_and_doctor_make_an_old_home_private(tmp_path: Path, fake: FakeLlama) -> None:
    home = tmp_path / "home"
    assert tether(home, "init").returncode == 0
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n')
    assert tether(home, "memory", "note", "a note").returncode == 0
    for root, dirs, files in os.walk(home):  # what an older tether left
        for d in dirs:
            os.chmod(Path(root, d), 0o755)
        for f in files:
            os.chmod(Path(root, f), 0o644)
    os.chmod(home, 0o755)
    outside = tmp_path / "shared.txt"
    outside.write_text("not tether's")
    outside.chmod(0o644)
    (home / "link").symlink_to(outside)
    loose = _loose(home)
    assert "tether.db 0o644" in loose
    out = tether(home, "init")
    assert out.returncode == 0
    assert f"made {len(loose)} paths private" in out.stdout
    assert _loose(home) == []
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644  # a link is not followed
    os.chmod(home / "tether.db", 0o640)
    out = tether(home, "doctor")
    assert "home: " in out.stdout
    assert "made 1 path private" in out.stdout
    assert _loose(home) == []
    assert "private (folders 0700" in tether(home, "doctor").stdout
