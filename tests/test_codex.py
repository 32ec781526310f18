"""Codex rollouts: the reader over the shared fixture and a rollout in the stored format
(session_meta, response_item messages and tool calls, event_msg copies), arbitrary
lines, and `tether sessions import --format codex` as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon_helpers import tether
from tether.harnesses.codex import read_rollout

FIXTURE = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "fixtures"
    / "claude-code"
    / "codex"
    / "ryoppippi__ccusage__codex_session-alpha.jsonl"
)
ID = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"
SID = f"codex-{ID}"


def rec(t: str, kind: str, payload: object) -> bytes:
    return json.dumps({"timestamp": t, "type": kind, "payload": payload}).encode()


def message(t: str, role: str, text: str) -> bytes:
    block = "input_text" if role == "user" else "output_text"
    return rec(
        t,
        "response_item",
        {"type": "message", "role": role, "content": [{"type": block, "text": text}]},
    )


ROLLOUT = [
    rec("2026-10-29T00:59:38.317Z", "session_meta", {"id": ID, "cwd": "/srv/api"}),
    message("2026-10-29T00:59:38.317Z", "user", "<environment_context>cwd</environment_context>"),
    message("2026-10-29T00:59:38.320Z", "user", "why does the retry test hang?"),
    rec(
        "2026-10-29T00:59:38.321Z",
        "event_msg",
        {"type": "user_message", "message": "why does the retry test hang?"},
    ),
    rec("2026-10-29T00:59:38.330Z", "turn_context", {"model": "gpt-5-codex"}),
    rec("2026-10-29T00:59:39.522Z", "response_item", {"type": "reasoning", "summary": []}),
    rec(
        "2026-10-29T00:59:40.000Z",
        "response_item",
        {
            "type": "function_call",
            "name": "shell",
            "arguments": '{"command":["rg","-n","backoff","tests/test_retry.py"]}',
            "call_id": "c1",
        },
    ),
    rec(
        "2026-10-29T00:59:41.000Z",
        "response_item",
        {"type": "function_call_output", "call_id": "c1", "output": "12: backoff(0)"},
    ),
    message("2026-10-29T00:59:45.000Z", "assistant", "backoff(0) sleeps forever: use 0.1."),
    rec(
        "2026-10-29T00:59:45.100Z",
        "event_msg",
        {"type": "agent_message", "message": "backoff(0) sleeps forever: use 0.1."},
    ),
    rec("2026-10-29T01:30:00.000Z", "compacted", {"message": "summary of the session"}),
    b'{"timestamp": "2026-10-29T01:31:00Z", "type": "response_it',
]


def test_a_rollout_reads_as_the_conversation_it_holds() -> None:
    t = read_rollout(ROLLOUT)
    assert list(t.sessions) == [SID]
    assert [(m.role, m.text) for m in t.sessions[SID]] == [
        ("user", "why does the retry test hang?"),
        ("assistant", '[tool shell] {"command":["rg","-n","backoff","tests/test_retry.py"]}'),
        ("assistant", "[tool result] 12: backoff(0)"),
        ("assistant", "backoff(0) sleeps forever: use 0.1."),
    ]
    assert dict(t.skipped) == {
        "not_a_message": 4,  # session_meta, turn_context, two event_msg copies
        "boilerplate": 1,
        "reasoning": 1,
        "compact_summary": 1,
        "not_json": 1,
    }


@pytest.mark.skipif(not FIXTURE.exists(), reason=f"the shared Codex fixture is not at {FIXTURE}")
def test_the_shared_fixture_holds_no_conversation_and_says_so() -> None:
    t = read_rollout(FIXTURE.read_bytes().split(b"\n"))
    assert t.messages == 0
    assert dict(t.skipped) == {"not_a_message": 3}


def test_messages_before_any_session_meta_have_no_session() -> None:
    t = read_rollout([message("2026-10-29T00:00:00Z", "user", "hello")])
    assert t.messages == 0
    assert dict(t.skipped) == {"no_session": 1}


@given(st.lists(st.binary(max_size=200), max_size=5))
def test_any_lines_give_messages_or_reasons(lines: list[bytes]) -> None:
    t = read_rollout([ROLLOUT[0], *lines])
    assert t.messages + sum(t.skipped.values()) <= len(lines) + 1


def test_import_a_rollout_and_again(home: Path, tmp_path: Path) -> None:
    path = tmp_path / f"rollout-2026-10-29T00-59-38-{ID}.jsonl"
    path.write_bytes(b"\n".join(ROLLOUT) + b"\n")
    out = tether(home, "sessions", "import", "--format", "codex", str(path))
    assert out.returncode == 0, out.stderr
    assert f"imported 4 of the transcript's 4 messages (1 turn) into {SID}" in out.stdout
    again = tether(home, "sessions", "import", "--format", "codex", str(path))
    assert again.stdout.startswith(f"nothing new: the transcript's 4 messages are in ({SID})")
    hits = json.loads(tether(home, "memory", "recall", "retry test backoff", "--json").stdout)
    assert hits[0]["session"] == SID
