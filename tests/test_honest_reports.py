"""Reports that say what happened: a file in which nothing could be read is an error, a
reindex that left a session out says so, a resumed import says what it wrote (issue 17,
item 6). Real commands in child processes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from daemon_helpers import tether
from test_claude_code import SID, user

NOT_TRANSCRIPTS = {
    "pretty.json": json.dumps({"a": 1, "b": [1, 2]}, indent=2).encode(),
    "random.bin": os.urandom(4096).replace(b"\n", b" ")[:2000] + b"\n" + os.urandom(100),
    "empty.jsonl": b"",
    "tether-format.jsonl": json.dumps(
        {"session": "s", "role": "user", "text": "hi", "time": "2026-11-01T09:00:00Z"}
    ).encode()
    + b"\n",
}


@pytest.mark.parametrize("name", sorted(NOT_TRANSCRIPTS))
@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_a_file_that_is_not_a_transcript_is_refused(
    home: Path, tmp_path: Path, name: str, fmt: str
) -> None:
    path = tmp_path / name
    path.write_bytes(NOT_TRANSCRIPTS[name])
    out = tether(home, "sessions", "import", "--format", fmt, str(path))
    assert out.returncode == 2, out.stdout
    assert out.stderr.startswith(f"tether: error: {path}: no {fmt} message in it (")
    assert "nothing was imported" in out.stderr
    assert not any((home / "sessions").iterdir())
    assert sorted(p.name for p in (home / "imports").iterdir()) == [".transcripts.lock"]


def test_a_folder_with_one_real_transcript_imports_it(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(NOT_TRANSCRIPTS["pretty.json"])
    (folder / "b.jsonl").write_bytes(user("we fly to Lisbon") + b"\n")
    out = tether(home, "sessions", "import", "--format", "claude-code", str(folder))
    assert out.returncode == 0, out.stderr
    assert "imported 1 of 2 transcripts' 1 message" in out.stdout
    assert (home / "sessions" / SID).is_dir()


def test_a_folder_of_no_transcript_is_refused(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (folder / name).write_bytes(NOT_TRANSCRIPTS["pretty.json"])
    out = tether(home, "sessions", "import", "--format", "claude-code", str(folder))
    assert out.returncode == 2
    assert f"{folder}: 2 transcripts: no claude-code message in it" in out.stderr


def test_a_reindex_that_left_a_session_out_says_so(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    lines = [
        {"session": s, "role": "user", "text": f"about {s}", "time": "2026-11-01T09:00:00Z"}
        for s in ("trip", "cat")
    ]
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert tether(home, "sessions", "import", str(src)).returncode == 0
    # A session that cannot be read: epoch 2's files with no epoch 1 (a malformed line
    # no longer leaves a session out since issue 33: it is read past and named).
    folder = home / "sessions" / "cat"
    for name in ("0.baseline.json", "0.jsonl"):
        (folder / name.replace("0", "2", 1)).write_bytes((folder / name).read_bytes())
    out = tether(home, "memory", "reindex")
    assert out.returncode == 1
    assert out.stdout.startswith("reindexed 1 of 2 sessions (1 log): ")
    assert out.stdout.rstrip().endswith("; 1 could not be read")
    assert "session cat not indexed" in out.stderr
