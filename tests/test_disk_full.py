"""A full disk, for real: the home on a small tmpfs that the test fills up, and tether run
as a user runs it (child processes, the fake llama server over HTTP).

- `sessions import` and `memory add` say "disk full: <path>" in one line, exit 1, and
  leave nothing half-written; run again with room, they finish.
- `memory recall` answers from what is indexed when it cannot index (or even open the
  store for writing), and says so on stderr.
- A turn whose log append succeeded is reported done even when indexing it fails right
  after (through `tether chat` and through the daemon's API): the reply is shown once,
  the turn is logged once, and recall finds it once the disk has room again.

Mounting needs root (or the right capability); where it is refused the tests skip and
say why. Every mount is undone in the fixture's teardown.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon_helpers import Daemon, spawn, tether
from tether.home import init_home
from tether.records import Assistant, User
from tether.sessions import Session
from tether.testing.fake_llama import FakeLlama
from tether.testing.pause import release, wait_reached

pytestmark = pytest.mark.slow

SIZE = "4m"


class SmallDisk:
    """A tmpfs of ``SIZE`` and a file that fills it (``fill``) or gives the room back."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.filler = root / "filler"

    def fill(self) -> None:
        block = b"\0" * 65536
        with self.filler.open("ab") as f:
            with contextlib.suppress(OSError):
                while True:
                    f.write(block)
                    f.flush()
            with contextlib.suppress(OSError):  # the last few bytes too
                while True:
                    os.write(f.fileno(), b"\0")
        # Nothing more fits: the next write anywhere on this disk fails with ENOSPC.
        with pytest.raises(OSError, match="No space left") as info:
            (self.root / "probe").write_bytes(b"x" * 4096)
        assert info.value.errno == errno.ENOSPC
        with contextlib.suppress(FileNotFoundError):
            (self.root / "probe").unlink()

    def free(self) -> None:
        self.filler.unlink()


@pytest.fixture
def disk() -> Iterator[SmallDisk]:
    root = Path(tempfile.mkdtemp(prefix="thfull", dir="/tmp"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        root.rmdir()
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield SmallDisk(root)
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)
        root.rmdir()


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=8192, parallel=2) as f:
        yield f


def _home(disk: SmallDisk, fake: FakeLlama | None = None) -> Path:
    home = disk.root / "h"
    init_home(home)
    if fake is not None:
        (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 10\n')
    # Recall stays lexical: the vectors' extra, where installed, is not what is tested.
    with (home / "tether.toml").open("a") as f:
        f.write("[recall]\nvectors = false\n")
    return home


def _lines(sessions: list[tuple[str, str]], second: int = 0) -> str:
    return "".join(
        json.dumps(
            {"session": sid, "role": "user", "text": text, "time": f"2026-01-01T00:00:{n:02d}Z"}
        )
        + "\n"
        for n, (sid, text) in enumerate(sessions, start=second)
    )


def _one_disk_full_line(out: subprocess.CompletedProcess[str], home: Path) -> None:
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"tether: error: disk full: {home}"), lines[0]


def _recall(home: Path, query: str) -> tuple[list[str], str]:
    out = tether(home, "memory", "recall", query, "--json")
    assert out.returncode == 0, out.stderr
    return [hit["text"] for hit in json.loads(out.stdout)], out.stderr


def test_import_and_memory_add_on_a_full_disk(disk: SmallDisk, tmp_path: Path) -> None:
    home = _home(disk)
    first = tmp_path / "first.jsonl"
    first.write_text(_lines([("herons", "the grey heron waits by the weir")]))
    assert tether(home, "sessions", "import", str(first)).returncode == 0
    identity = (home / "memory" / "memory.md").read_bytes()
    second = tmp_path / "second.jsonl"
    second.write_text(_lines([("otters", "an otter swam past the kingfisher")], second=10))

    disk.fill()
    _one_disk_full_line(tether(home, "sessions", "import", str(second)), home)
    _one_disk_full_line(tether(home, "memory", "add", "likes otters"), home)
    _one_disk_full_line(tether(home, "memory", "note", "otters hunt at dusk"), home)
    # Nothing half-written: no new session, identity as it was, no temporaries left.
    assert not Session.exists(home, "otters")
    assert (home / "memory" / "memory.md").read_bytes() == identity
    assert not list(home.rglob(".*.tmp"))

    disk.free()
    done = tether(home, "sessions", "import", str(second))
    assert done.returncode == 0, done.stderr
    assert tether(home, "memory", "add", "likes otters").returncode == 0
    hits, _ = _recall(home, "otter kingfisher")
    assert hits[0] == "an otter swam past the kingfisher"
    assert [r.text for r in Session.open(home, "otters").records if isinstance(r, User)] == [
        "an otter swam past the kingfisher"
    ]


def test_an_import_the_disk_fills_midway_is_finished_once_there_is_room(
    disk: SmallDisk, tmp_path: Path
) -> None:
    home = _home(disk)
    assert tether(home, "memory", "note", "the first note").returncode == 0
    # About 600 kB of turns in one session, on a disk left with 256 kB.
    texts = [f"turn {n} of the long walk by the estuary " + "x" * 1000 for n in range(600)]
    source = tmp_path / "long.jsonl"
    source.write_text(
        "".join(
            json.dumps(
                {
                    "session": "walk",
                    "role": "user",
                    "text": text,
                    "time": f"2026-01-01T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z",
                }
            )
            + "\n"
            for n, text in enumerate(texts)
        )
    )
    reserve = disk.root / "reserve"
    reserve.write_bytes(b"\0" * 256 * 1024)
    disk.fill()
    reserve.unlink()
    first = tether(home, "sessions", "import", str(source))
    _one_disk_full_line(first, home)
    log = home / "sessions" / "walk" / "0.jsonl"
    assert f"disk full: {log}" in first.stderr  # the append itself ran out of room
    assert log.read_bytes().endswith(b"\n")  # cut back to a whole line, nothing torn
    disk.free()
    again = tether(home, "sessions", "import", str(source))
    assert again.returncode == 0, again.stderr
    users = [r.text for r in Session.open(home, "walk").records if isinstance(r, User)]
    assert users == texts  # every line once, in order


def test_memory_add_when_the_disk_fills_between_the_file_and_its_journal(
    disk: SmallDisk,
) -> None:
    home = _home(disk)
    assert tether(home, "memory", "note", "the first note").returncode == 0
    identity = (home / "memory" / "memory.md").read_bytes()
    # Room for the store's WAL index and memory.md's new copy, not for the journal.
    reserve = disk.root / "reserve"
    reserve.write_bytes(b"\0" * 40 * 1024)
    disk.fill()
    reserve.unlink()
    out = tether(home, "memory", "add", "likes otters")
    _one_disk_full_line(out, home)
    assert "(indexing identity)" in out.stderr or "(writing the journal)" in out.stderr
    # The file was written, then put back: no entry without its journal line.
    assert (home / "memory" / "memory.md").read_bytes() == identity
    disk.free()
    assert tether(home, "memory", "add", "likes otters").returncode == 0
    journal = tether(home, "memory", "journal", "--json")
    adds = [e for e in json.loads(journal.stdout) if e.get("action") == "add"]
    assert [e["after"] for e in adds] == ["likes otters"]


def test_recall_answers_from_what_is_indexed(disk: SmallDisk, tmp_path: Path) -> None:
    home = _home(disk)
    first = tmp_path / "first.jsonl"
    first.write_text(_lines([("herons", "the grey heron waits by the weir")]))
    assert tether(home, "sessions", "import", str(first)).returncode == 0
    disk.fill()
    hits, err = _recall(home, "heron weir")
    assert hits == ["the grey heron waits by the weir"]
    assert "disk full" in err
    assert "Traceback" not in err


def _turns(home: Path, sid: str) -> tuple[list[str], list[str]]:
    records = Session.open(home, sid).records
    users = [r.text for r in records if isinstance(r, User)]
    replies = [r.text for r in records if isinstance(r, Assistant)]
    return users, replies


def test_a_logged_turn_is_done_though_indexing_it_fails(
    disk: SmallDisk, fake: FakeLlama, tmp_path: Path
) -> None:
    home = _home(disk, fake)
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    env = {"TETHER_PAUSE_AT": "turn-before-index", "TETHER_PAUSE_DIR": str(pauses)}
    chat = spawn(home, "chat", "--session", "birds", "the bittern booms at dawn", env=env)
    try:
        assert wait_reached(pauses, "turn-before-index"), chat.stderr
        disk.fill()  # between the log append and the index pass
        release(pauses, "turn-before-index")
        out, err = chat.communicate(timeout=60)
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.communicate()
    assert chat.returncode == 0, err
    assert "Traceback" not in err
    assert "disk full" in err  # the index pass's failure is a warning
    users, replies = _turns(home, "birds")
    assert users == ["the bittern booms at dawn"]
    assert len(replies) == 1
    assert out.count(replies[0]) == 1  # the reply shown once

    disk.free()
    hits, _ = _recall(home, "bittern booms")
    assert "the bittern booms at dawn" in hits


def test_a_logged_turn_is_done_through_the_daemon(
    disk: SmallDisk, fake: FakeLlama, tmp_path: Path
) -> None:
    home = _home(disk, fake)
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    env = {"TETHER_PAUSE_AT": "turn-before-index", "TETHER_PAUSE_DIR": str(pauses)}
    daemon = Daemon(home, env=env)
    try:
        chat = spawn(home, "chat", "--session", "owls", "the barn owl hunts the meadow")
        assert wait_reached(pauses, "turn-before-index")
        disk.fill()
        release(pauses, "turn-before-index")
        out, err = chat.communicate(timeout=60)
        assert chat.returncode == 0, err
        users, replies = _turns(home, "owls")
        assert users == ["the barn owl hunts the meadow"]
        assert out.count(replies[0]) == 1
        disk.free()
        # The daemon's next turn takes the one left behind in with it.
        (pauses / "turn-before-index.reached").unlink()
        again = tether(home, "chat", "--session", "wrens", "a wren sings loud")
        assert again.returncode == 0, again.stderr
    finally:
        code, log = daemon.stop()
    assert code == 0, log
    assert "index sessions=owls failed" in log
    assert "disk full" in log
    hits, _ = _recall(home, "barn owl meadow")
    assert "the barn owl hunts the meadow" in hits
