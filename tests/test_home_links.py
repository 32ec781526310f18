"""Links inside the home are never followed (issue 34, item 7): a memory.md linked to
another file is refused, not read into identity; an egress log or a session log linked
elsewhere is never appended through; a FIFO in the home does not hang a read. Real
files, the fake llama server over HTTP, tether in child processes."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path

import httpx

from daemon_helpers import tether
from tether.config import load_config
from tether.testing.fake_llama import FakeLlama, Reply
from tether.tools.egress import Egress

ELSEWHERE = "- the private notes of another program, not the agent's identity\n"


def _llm(home: Path, fake: FakeLlama) -> None:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n')


def test_a_linked_memory_md_is_refused_and_never_reaches_the_model(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    _llm(home, fake)
    other = tmp_path / "other.md"
    other.write_text(ELSEWHERE)
    memory = home / "memory" / "memory.md"
    memory.unlink()
    memory.symlink_to(other)
    shown = tether(home, "memory", "show")
    assert shown.returncode == 2
    assert "Traceback" not in shown.stderr
    assert f"{memory}: a symbolic link" in shown.stderr
    assert "another program" not in shown.stdout
    fake.script(Reply(content="hi"))
    chat = tether(home, "chat", "who are you?")
    assert chat.returncode == 2, chat.stderr
    assert f"{memory}: a symbolic link" in chat.stderr
    assert not any("another program" in str(r.body) for r in fake.requests)
    added = tether(home, "memory", "add", "the owner likes tea")
    assert added.returncode == 2
    assert other.read_text() == ELSEWHERE


def test_a_linked_session_log_is_never_appended_through(
    home: Path, fake: FakeLlama, tmp_path: Path
) -> None:
    _llm(home, fake)
    fake.script(Reply(content="first"))
    assert tether(home, "chat", "hello").returncode == 0
    log = home / "sessions" / "chat" / "0.jsonl"
    other = tmp_path / "elsewhere.jsonl"
    other.write_bytes(log.read_bytes())
    log.unlink()
    log.symlink_to(other)
    before = other.read_bytes()
    fake.script(Reply(content="second"))
    again = tether(home, "chat", "hello again")
    assert again.returncode == 2, again.stderr
    assert f"{log}: a symbolic link" in again.stderr
    assert other.read_bytes() == before


def test_a_linked_egress_log_is_never_appended_through(home: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.txt"
    other.write_text("someone else's file\n")
    log = home / "telemetry" / "egress.jsonl"
    log.parent.mkdir()
    log.symlink_to(other)

    async def refused() -> object:
        async with httpx.AsyncClient() as http:
            egress = Egress(http, load_config(home).tools, home=home)
            return await egress.fetch(
                "http://10.0.0.1/",
                session="chat",
                tainted=False,
                owner_urls=frozenset(),
                time=datetime(2026, 11, 1, tzinfo=UTC),
            )

    got = asyncio.run(refused())
    assert getattr(got, "reason", None) == "private"  # the refusal itself stands
    assert other.read_text() == "someone else's file\n"
    assert log.is_symlink()


def test_a_fifo_in_the_home_is_refused_without_blocking(home: Path) -> None:
    memory = home / "memory" / "memory.md"
    memory.unlink()
    os.mkfifo(memory)
    shown = tether(home, "memory", "show", timeout=20)
    assert shown.returncode == 2
    assert f"{memory}: not a regular file" in shown.stderr
    allow = home / ".tether-scan-allow"
    memory.unlink()
    memory.write_text("- ok\n")
    os.mkfifo(allow)
    added = tether(home, "memory", "add", "hello", timeout=20)
    assert added.returncode == 2
    assert f"{allow}: not a regular file" in added.stderr
