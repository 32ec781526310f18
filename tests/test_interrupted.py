"""Issue 17 item 4: a turn killed mid-way is closed as interrupted at the next open.

Real child processes killed with SIGKILL at named fault points (``TETHER_CRASH_AT``): an
in-process ``tether chat`` and a ``tether serve``. The next open (a new chat turn, or the
daemon's start) appends ``TurnError{kind: "interrupted"}`` exactly once, under the log's
lock; replay stays valid and turn counts and recall say what happened.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon_helpers import Daemon, child_env, spawn, tether
from tether.records import Assistant, TurnError, User
from tether.sessions import Session
from tether.testing.fake_llama import FakeLlama, Reply

pytestmark = pytest.mark.slow
NOW = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
CRASH = {"TETHER_CRASH_AT": "turn-after-user"}


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=8192) as f:
        yield f


def kinds(home: Path, sid: str) -> list[str]:
    return [type(r).__name__ for r in Session.open(home, sid).records]


def interrupted(home: Path, sid: str) -> int:
    s = Session.open(home, sid)
    return sum(isinstance(r, TurnError) and r.kind == "interrupted" for r in s.records)


def show_turns(home: Path, sid: str) -> object:
    out = tether(home, "session", "show", sid, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["turns"]


def test_an_in_process_chat_killed_mid_turn_is_closed_by_the_next_one(
    short_home: Path, fake: FakeLlama
) -> None:
    killed = tether(short_home, "chat", "--session", "s1", "the pelican plan", env=CRASH)
    assert killed.returncode == -signal.SIGKILL
    assert kinds(short_home, "s1") == ["SessionStart", "User"]  # the bare User
    assert show_turns(short_home, "s1") == 1  # reading never writes

    fake.script(Reply(content="back again"))
    out = tether(short_home, "chat", "--session", "s1", "are you there?")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "back again"
    assert kinds(short_home, "s1") == [
        "SessionStart",
        "User",
        "TurnError",
        "User",
        "Assistant",
        "Usage",
    ]
    assert interrupted(short_home, "s1") == 1
    # The interrupted message stays in the conversation; the error never reaches the model.
    sent = fake.requests[-1].messages
    assert [m["content"] for m in sent if m["role"] == "user"] == [
        "the pelican plan",
        "are you there?",
    ]
    assert show_turns(short_home, "s1") == 2

    fake.script(Reply(content="still here"))
    again = tether(short_home, "chat", "--session", "s1", "once more")
    assert again.returncode == 0, again.stderr
    assert interrupted(short_home, "s1") == 1  # a second open adds nothing
    # The request after the recovered turn extends the one before it: the prefix holds.
    before, after = fake.requests[-2], fake.requests[-1]
    assert after.messages[: len(before.messages)] == before.messages
    assert after.cache_n >= before.n_tokens

    hits = tether(short_home, "memory", "recall", "pelican", "--json")
    assert hits.returncode == 0, hits.stderr
    found = [h for h in json.loads(hits.stdout) if "pelican" in h["text"]]
    # the turn once (the session's digest, a summary unit, quotes it as its topic)
    assert [(h["session"], h["turn"]) for h in found if h["kind"] == "turn"] == [("s1", 1)]


def test_the_daemon_killed_mid_turn_closes_it_at_its_next_start(
    short_home: Path, fake: FakeLlama
) -> None:
    daemon = Daemon(short_home, env=CRASH)
    out = tether(short_home, "chat", "--session", "d1", "the heron question")
    assert out.returncode == 1
    assert "stopped answering" in out.stderr
    assert "Traceback" not in out.stderr
    daemon.proc.wait(timeout=20)
    assert daemon.proc.returncode == -signal.SIGKILL
    daemon.proc.communicate()
    assert kinds(short_home, "d1") == ["SessionStart", "User"]

    restarted = Daemon(short_home)  # answers only once the start-up closed it
    try:
        assert kinds(short_home, "d1") == ["SessionStart", "User", "TurnError"]
        assert interrupted(short_home, "d1") == 1
    finally:
        code, err = restarted.stop()
    assert code == 0, err
    assert "turn session=d1 closed as interrupted" in err

    third = Daemon(short_home)  # a second start adds nothing
    try:
        assert interrupted(short_home, "d1") == 1
        fake.script(Reply(content="heron answered"))
        out = tether(short_home, "chat", "--session", "d1", "and now?")
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "heron answered"
    finally:
        code, err = third.stop()
    assert code == 0, err
    assert "closed as interrupted" not in err
    s = Session.open(short_home, "d1")
    assert [r.text for r in s.records if isinstance(r, User)] == ["the heron question", "and now?"]
    assert [r.text for r in s.records if isinstance(r, Assistant)] == ["heron answered"]
    assert interrupted(short_home, "d1") == 1
    assert show_turns(short_home, "d1") == 2


def test_two_processes_opening_at_once_close_it_once(short_home: Path, fake: FakeLlama) -> None:
    for sid in ("r1", "r2", "r3"):
        killed = tether(short_home, "chat", "--session", sid, "left bare", env=CRASH)
        assert killed.returncode == -signal.SIGKILL
    # Two processes that both read the session while its turn was open, then close it.
    script = (
        "import sys; from datetime import datetime, UTC; from pathlib import Path;"
        "from tether.sessions import Session;"
        "ss = [Session.open(Path(sys.argv[1]), s) for s in ('r1', 'r2', 'r3')];"
        "assert all(s.open_turn() for s in ss);"
        "print('ready', flush=True);"
        "sys.stdin.readline();"
        "print(sum(s.close_interrupted(datetime.now(UTC)) for s in ss))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(short_home)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for _ in range(2)
    ]
    for p in procs:  # both have read the open turns before either closes them
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    closed = [int(p.communicate(timeout=30)[0]) for p in procs]
    assert sum(closed) == 3
    for sid in ("r1", "r2", "r3"):
        assert interrupted(short_home, sid) == 1
        assert kinds(short_home, sid) == ["SessionStart", "User", "TurnError"]


def test_two_stale_views_in_one_process_close_it_once(short_home: Path) -> None:
    killed = tether(short_home, "chat", "--session", "v1", "left bare", env=CRASH)
    assert killed.returncode == -signal.SIGKILL
    first, second = Session.open(short_home, "v1"), Session.open(short_home, "v1")
    assert first.close_interrupted(NOW)
    assert not second.close_interrupted(NOW)  # re-read under the lock: already closed
    assert not Session.open(short_home, "v1").close_interrupted(NOW)
    assert interrupted(short_home, "v1") == 1


def test_a_chat_started_while_the_daemon_restarts_is_not_closed(
    short_home: Path, fake: FakeLlama
) -> None:
    """A turn an in-process chat is running holds the session busy: the daemon's start
    leaves it alone, and the turn ends with its own answer."""
    fake.script(Reply(content="slow but fine", delay_s=1.5))
    chat = spawn(short_home, "chat", "--session", "live", "take your time")
    deadline = time.monotonic() + 20
    while not fake.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake.requests, "the chat never reached the model"
    daemon = Daemon(short_home)
    try:
        out, err = chat.communicate(timeout=30)
        assert chat.returncode == 0, err
        assert out.strip() == "slow but fine"
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert interrupted(short_home, "live") == 0
    assert kinds(short_home, "live") == ["SessionStart", "User", "Assistant", "Usage"]


def test_an_imported_history_that_ends_with_the_owner_is_not_closed(
    short_home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    """``sessions import`` of a history whose last line is the owner's: that is the
    history, not a turn a killed process left open; the daemon's start leaves it."""
    src = tmp_path / "history.jsonl"
    lines = [
        ("user", "we sail at dawn", "2026-10-01T06:00:00Z"),
        ("assistant", "Fair winds.", "2026-10-01T06:00:05Z"),
        ("user", "and the harbour fee?", "2026-10-01T06:01:00Z"),
    ]
    src.write_text(
        "".join(
            json.dumps({"session": "log", "role": r, "text": t, "time": at}) + "\n"
            for r, t, at in lines
        )
    )
    assert tether(short_home, "sessions", "import", str(src)).returncode == 0
    daemon = Daemon(short_home)
    try:
        assert kinds(short_home, "log") == ["SessionStart", "User", "Assistant", "User"]
        fake.script(Reply(content="It is 12 euros."))
        out = tether(short_home, "chat", "--session", "log", "so?")
        assert out.returncode == 0, out.stderr
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert "closed as interrupted" not in err
    assert interrupted(short_home, "log") == 0
    assert show_turns(short_home, "log") == 3


def test_a_killed_writers_temporary_is_removed_when_stale(tmp_path: Path) -> None:
    """A process killed between an atomic write's temporary and its rename leaves
    ``.<name>.<random>.tmp``; the daemon's start removes such files once stale, and never
    a fresh one (another process may be mid-write)."""
    import os

    from tether.files import STALE_TEMP_S, remove_stale_temps

    (tmp_path / "sessions" / "s").mkdir(parents=True)
    old = tmp_path / "sessions" / "s" / ".1.baseline.json.abc123.tmp"
    fresh = tmp_path / ".memory.md.def456.tmp"
    keep = tmp_path / "notes.tmp"  # not a write_atomic temporary
    for p in (old, fresh, keep):
        p.write_text("partial")
    now = 1_800_000_000.0
    os.utime(old, (now - STALE_TEMP_S - 1, now - STALE_TEMP_S - 1))
    os.utime(fresh, (now - 1, now - 1))
    os.utime(keep, (now - 10 * STALE_TEMP_S, now - 10 * STALE_TEMP_S))
    assert remove_stale_temps(tmp_path, now) == [old]
    assert not old.exists()
    assert fresh.exists()
    assert keep.exists()
