"""``tether session show ID --messages``: a session's conversation, every epoch in order,
read from its files (the owner's words, the agent's, tool calls, what tools returned,
failed turns, compactions), secrets redacted. Real CLI, real fake server."""

from __future__ import annotations

import json
from pathlib import Path

from daemon_helpers import tether
from tether.testing import FakeLlama, Reply

GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"


def test_the_conversation_reads_across_epochs(home: Path, fake: FakeLlama) -> None:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n')
    fake.script(Reply(tool_calls=[("note", {"text": "the boat is in Kiel"})]))
    fake.script(Reply(content="Noted."))
    assert tether(home, "chat", "remember the boat is in Kiel").returncode == 0
    assert tether(home, "session", "compact", "chat").returncode == 0
    fake.script(Reply(content="It is in Kiel."))
    assert tether(home, "chat", f"where is the boat? my token is {GITHUB}").returncode == 0

    out = tether(home, "session", "show", "chat", "--messages", "--json")
    assert out.returncode == 0, out.stderr
    said = json.loads(out.stdout)
    assert [(m["epoch"], m["role"]) for m in said] == [
        (0, "owner"),
        (0, "tool_call"),
        (0, "tool_result"),
        (0, "agent"),
        (0, "compaction"),
        (1, "owner"),
        (1, "agent"),
    ]
    assert said[1]["text"] == 'note {"text":"the boat is in Kiel"}'
    assert said[2]["text"].startswith("note, trusted, ")  # the class of the result
    assert said[4]["text"] == "compacted into epoch 1"
    assert said[5]["text"] == "where is the boat? my token is [REDACTED:github-token]"
    assert said[6]["text"] == "It is in Kiel."

    human = tether(home, "session", "show", "chat", "--messages", "--last", "2")
    assert human.returncode == 0
    lines = human.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("you: where is the boat? my token is [REDACTED:github-token]")
    assert lines[1].endswith("agent: It is in Kiel.")
    assert GITHUB not in human.stdout + out.stdout


def test_last_without_messages_is_a_usage_error(home: Path, fake: FakeLlama) -> None:
    (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\ntimeout_s = 5\n')
    assert tether(home, "chat", "hi").returncode == 0
    out = tether(home, "session", "show", "chat", "--last", "2")
    assert out.returncode == 2
    assert "--last goes with --messages" in out.stderr
