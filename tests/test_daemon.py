"""`tether serve` and `tether chat` as a user runs them: real child processes, a real
Unix socket, the fake llama server over HTTP, crash points that SIGKILL the daemon."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon_helpers import Daemon, spawn, tether
from tether.records import Assistant, ToolCall, ToolResult, User
from tether.sessions import Session
from tether.testing.fake_llama import FakeLlama, Reply

pytestmark = pytest.mark.slow


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=8192) as f:
        yield f


def test_chat_through_the_daemon_and_clean_stop(short_home: Path, fake: FakeLlama) -> None:
    daemon = Daemon(short_home)
    try:
        assert oct((short_home / "run").stat().st_mode & 0o777) == "0o700"
        fake.script(Reply(content="Hello from the daemon."))
        out = tether(short_home, "chat", "--session", "s1", "hello")
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "Hello from the daemon."
        again = tether(short_home, "serve")
        # Issue 33: a second daemon on the home exits 2 (it was 1) naming the holder.
        assert again.returncode == 2
        assert "already serving" in again.stderr
        assert f"pid {daemon.proc.pid}" in again.stderr
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert "turn session=s1 turn=1 epoch=0 slot=0" in err
    assert not (short_home / "run" / "tether.sock").exists()
    s = Session.open(short_home, "s1")
    assert [type(r).__name__ for r in s.records] == ["SessionStart", "User", "Assistant", "Usage"]


def test_sigterm_lets_the_turn_in_flight_finish(short_home: Path, fake: FakeLlama) -> None:
    daemon = Daemon(short_home)
    fake.script(Reply(content="made it", delay_s=1.0))
    chat = spawn(short_home, "chat", "--session", "s2", "slow question")
    deadline = time.monotonic() + 20
    while not fake.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake.requests, "the turn never reached the model"
    code, err = daemon.stop()
    out, _ = chat.communicate(timeout=30)
    assert code == 0, err
    assert out.strip() == "made it"
    s = Session.open(short_home, "s2")
    assert [type(r).__name__ for r in s.records] == ["SessionStart", "User", "Assistant", "Usage"]


def test_killed_between_two_appends_loses_nothing(short_home: Path, fake: FakeLlama) -> None:
    # The model asks for a note; the daemon dies after logging the call, before the result.
    daemon = Daemon(short_home, env={"TETHER_CRASH_AT": "turn-after-tool-calls"})
    fake.script(Reply(tool_calls=[("note", {"text": "water the ferns"})]))
    out = tether(short_home, "chat", "--session", "s3", "note: ferns")
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    daemon.proc.wait(timeout=20)
    assert daemon.proc.returncode == -signal.SIGKILL
    daemon.proc.communicate()

    s = Session.open(short_home, "s3")
    assert [type(r).__name__ for r in s.records] == ["SessionStart", "User", "ToolCall", "Usage"]

    restarted = Daemon(short_home)  # the stale socket is cleared, not an error
    try:
        fake.script(Reply(content="ferns noted"))
        out = tether(short_home, "chat", "--session", "s3", "did you note it?")
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "ferns noted"
    finally:
        code, err = restarted.stop()
    assert code == 0, err
    s = Session.open(short_home, "s3")
    users = [r.text for r in s.records if isinstance(r, User)]
    assert users == ["note: ferns", "did you note it?"]
    assert sum(isinstance(r, ToolCall) for r in s.records) == 1
    assert not any(isinstance(r, ToolResult) for r in s.records)
    assert [r.text for r in s.records if isinstance(r, Assistant)] == ["ferns noted"]
    # The request after the crash carried the dangling call with no invented result.
    last = fake.requests[-1].messages
    assert last[-1] == {"role": "user", "content": "did you note it?"}


def test_chat_in_process_without_a_daemon(short_home: Path, fake: FakeLlama) -> None:
    fake.script(Reply(content="no daemon needed"))
    out = tether(short_home, "chat", "hello")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "no daemon needed"
    assert Session.open(short_home, "chat").turns() == 1


def test_chat_repl_reads_lines_until_eof(short_home: Path, fake: FakeLlama) -> None:
    fake.script(Reply(content="one"))
    fake.script(Reply(content="two"))
    proc = tether(short_home, "chat", "--session", "repl", input="first\n\nsecond\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["one", "two"]
    assert Session.open(short_home, "repl").turns() == 2


def test_chat_errors_are_one_line(short_home: Path) -> None:
    (short_home / "tether.toml").write_text('[llm]\nurl = "http://127.0.0.1:9"\ntimeout_s = 2\n')
    out = tether(short_home, "chat", "hello")
    assert out.returncode == 1
    assert "llm_unreachable" in out.stderr
    assert "Traceback" not in out.stderr
    bad = tether(short_home, "chat", "--session", "Not Valid", "hello")
    assert bad.returncode == 2
    assert "invalid session id" in bad.stderr
