"""Documented limits on what memory takes, the same for the owner's commands and the
agent's tools, and no silent rewrite of what the owner typed (issue 17, item 8)."""

from __future__ import annotations

from pathlib import Path

from daemon_helpers import tether
from tether.memory.identity import MAX_ENTRY_CHARS, MEMORY_FILE
from tether.memory.notes import MAX_NOTE_CHARS
from tether.memory.pages import MAX_PAGE_CHARS, MAX_TITLE_CHARS
from tether.testing import FakeLlama, Reply


def test_a_multi_line_entry_is_refused_not_joined(home: Path) -> None:
    before = (home / MEMORY_FILE).read_text()
    out = tether(home, "memory", "add", "likes oolong\nhates coffee")
    assert out.returncode == 2
    assert "an identity entry is one line (this text has 2)" in out.stderr
    assert (home / MEMORY_FILE).read_text() == before
    # Blank lines around one line of text are not lines of text.
    assert tether(home, "memory", "add", "\nlikes oolong\n\n").returncode == 0
    assert "- likes oolong\n" in (home / MEMORY_FILE).read_text()


def test_an_entry_past_the_limit_is_refused(home: Path) -> None:
    before = (home / MEMORY_FILE).read_text()
    assert tether(home, "memory", "add", "x" * MAX_ENTRY_CHARS).returncode == 0
    out = tether(home, "memory", "add", "y" * (MAX_ENTRY_CHARS + 1))
    assert out.returncode == 2
    assert (
        f"at most {MAX_ENTRY_CHARS} characters (this one has {MAX_ENTRY_CHARS + 1})" in out.stderr
    )
    assert "y" * 100 not in (home / MEMORY_FILE).read_text()
    assert before in (home / MEMORY_FILE).read_text()


def test_a_note_past_the_limit_is_refused(home: Path) -> None:
    out = tether(home, "memory", "note", "n" * (MAX_NOTE_CHARS + 1))
    assert out.returncode == 2
    assert f"a note is at most {MAX_NOTE_CHARS} characters" in out.stderr
    assert "notes: 0" in tether(home, "memory", "show").stdout


def test_a_page_past_the_limit_is_refused(home: Path) -> None:
    big = "# Big\n\n" + "p" * MAX_PAGE_CHARS
    out = tether(home, "page", "write", "notes/big", input=big)
    assert out.returncode == 2
    assert f"a page is at most {MAX_PAGE_CHARS} characters" in out.stderr
    long_title = tether(home, "page", "write", "notes/t", "--title", "t" * 201, input="body\n")
    assert long_title.returncode == 2
    assert f"a title is at most {MAX_TITLE_CHARS} characters" in long_title.stderr
    assert "notes/" not in tether(home, "page", "list").stdout


def test_the_agent_meets_the_same_limit(home: Path, fake: FakeLlama) -> None:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n')
    before = (home / MEMORY_FILE).read_text()
    fake.script(Reply(tool_calls=[("add", {"text": "z" * (MAX_ENTRY_CHARS + 5)})]))
    fake.script(Reply(content="Could not."))
    out = tether(home, "chat", "remember this long thing")
    assert out.returncode == 0, out.stderr
    assert (home / MEMORY_FILE).read_text() == before
    result = fake.requests[-1].messages[-1]
    assert f"length <= {MAX_ENTRY_CHARS}" in str(result)  # the tool schema holds the same limit
