"""Banked means recallable: what the Claude Code hooks bank is in ``tether memory recall``
at once (no daemon, no model), once, with its segment's link; the hook's session is a
session like any other; tool results (where errors live) are kept, secret-redacted; and
``<private>`` text is shown nowhere. Every hook runs as Claude Code runs it: a child
process, the payload on stdin, the real transcript format."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkpoint_helpers import (
    SECRET,
    TETHER_SESSION,
    Transcript,
    heartbeat,
    hook,
    payload,
    segments,
)
from daemon_helpers import tether
from tether.checkpoint.bank import redact_text
from tether.checkpoint.hooks import PAUSE_BEFORE_RECALL
from tether.checkpoint.recallable import clean_texts
from tether.core.checkpoints.window import Turn, parse_rendered, render

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "claude-code"
EDGES = FIXTURES / "daaain__claude-code-log__edge_cases.jsonl"
needs_fixtures = pytest.mark.skipif(
    not EDGES.exists(), reason=f"the shared Claude Code fixtures are not at {FIXTURES}"
)
PRIVATE_WORD = "quokkadiary"
ERROR = "ModuleNotFoundError: No module named 'fastparquet'"


def recall(home: Path, query: str, k: int = 10) -> list[dict[str, Any]]:
    out = tether(home, "memory", "recall", query, "-k", str(k), "--json")
    assert out.returncode == 0, out.stderr
    hits: list[dict[str, Any]] = json.loads(out.stdout)
    return hits


def held(home: Path, sid: str = TETHER_SESSION) -> list[tuple[str, str]]:
    """The messages of a session's logs (every epoch), as written on disk."""
    out = []
    for log in sorted((home / "sessions" / sid).glob("*.jsonl")):
        for line in log.read_text().splitlines():
            r = json.loads(line)
            if r["type"] in ("User", "Assistant"):
                out.append((r["type"], r["text"]))
    return out


def tool_error(t: Transcript, text: str) -> str:
    block = {"type": "tool_result", "tool_use_id": "toolu_9", "content": text, "is_error": True}
    return t._add({"type": "user", "message": {"role": "user", "content": [block]}})


def first_window(t: Transcript) -> None:
    t.user("We settled on PostgreSQL 16 for the ledger service.")
    t.assistant("Noted: PostgreSQL 16 for the ledger.")
    t.user(f"Run the parquet export. <private>{PRIVATE_WORD} is my diary</private>")
    t.assistant("Running it.")
    tool_error(t, f"Traceback (most recent call last):\n{ERROR}\nAPI key was {SECRET}")
    t.assistant("The export needs pyarrow instead.")


def test_each_hook_makes_its_window_recallable_once(home: Path, tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    first_window(t)
    run = hook(home, "pre-compact", payload("PreCompact", t.path, trigger="auto"))
    assert run.returncode == 0, run.stderr
    assert heartbeat(home)[-1]["recall"] == "recall_indexed"
    [seg] = segments(home)
    link = "tether://corpus/" + seg.name.removesuffix(".txt")
    hits = recall(home, "which database did we pick for the ledger")
    assert hits[0]["session"] == TETHER_SESSION
    assert "PostgreSQL 16" in hits[0]["text"]
    assert hits[0]["link"] == link
    text = tether(home, "memory", "recall", "ledger database").stdout
    assert link in text.splitlines()[0]
    # The failed tool's error is found; the key in it is not there to find.
    errors = [h for h in recall(home, "fastparquet module missing") if "fastparquet" in h["text"]]
    assert errors
    assert errors[0]["text"].startswith("[tool error]")
    keyed = [h["text"] for h in recall(home, "API key was") if "API key" in h["text"]]
    assert keyed
    assert "[REDACTED:" in keyed[0]
    assert SECRET not in keyed[0]
    assert recall(home, PRIVATE_WORD) == []

    # Claude Code compacts, the session goes on; SessionStart(compact) finds the window
    # banked (the backstop banks nothing) and the new words are not in recall yet.
    t.boundary()
    t.user("Deploy goes to Frankfurt, eu-central-1.")
    t.assistant("Frankfurt it is.")
    start = hook(home, "session-start", payload("SessionStart", t.path, source="compact"))
    assert start.returncode == 0, start.stderr
    assert heartbeat(home)[-1]["backstop"] == "backstop_covered"
    assert recall(home, "Frankfurt") == []
    # SessionEnd banks the rest (--wait: in this process, not a detached child).
    end = hook(home, "session-end", payload("SessionEnd", t.path, reason="exit"), "--wait")
    assert end.returncode == 0, end.stderr
    assert heartbeat(home)[-1]["recall"] == "recall_indexed"
    found = recall(home, "where do we deploy")
    assert found[0]["session"] == TETHER_SESSION
    assert "Frankfurt" in found[0]["text"]
    assert found[0]["link"] != link  # the second window's own segment
    assert len(segments(home)) == 2
    # Eight messages, each once (the private one as [private]; the secret redacted).
    said = held(home)
    assert len(said) == len(set(said)) == 8
    assert not any(PRIVATE_WORD in text or SECRET in text for _, text in said)

    # Importing the same transcript adds nothing, by either command.
    again = tether(home, "sessions", "import", "--format", "claude-code", str(t.path))
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("nothing new: the transcript's 8 messages are in")
    ingest = tether(home, "transcripts", "ingest", str(t.path))
    assert ingest.returncode == 0, ingest.stderr
    assert held(home) == said
    # A hook banking an overlapping window (the whole transcript: the ledger and its
    # segments are gone, so session end falls back to all of it) adds nothing either.
    (home / "corpus" / f"{TETHER_SESSION}.ledger.json").unlink()
    for segment in segments(home):
        segment.unlink()
    hook(home, "session-end", payload("SessionEnd", t.path, reason="exit"), "--wait")
    assert heartbeat(home)[-1]["mode"] == "full_fallback"
    assert held(home) == said
    found = recall(home, "Frankfurt eu-central-1")
    assert [h["kind"] for h in found if h["turn"] is not None] == ["turn"]
    assert [h["kind"] for h in found if h["turn"] is None] == ["session-summary"]  # one digest


def test_an_import_first_then_the_hooks_add_nothing_twice(home: Path, tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    first_window(t)
    imported = tether(home, "sessions", "import", "--format", "claude-code", str(t.path))
    assert imported.returncode == 0, imported.stderr
    before = held(home)
    assert len(before) == 6
    hook(home, "pre-compact", payload("PreCompact", t.path, trigger="manual"))
    assert heartbeat(home)[-1]["recall"] == "recall_indexed"
    assert held(home) == before
    # The import stored the text as the segment holds it: private out, secret redacted.
    assert not any(PRIVATE_WORD in text or SECRET in text for _, text in before)


def test_a_session_imported_raw_by_an_older_tether_still_matches(
    home: Path, tmp_path: Path
) -> None:
    """Before this, imports stored the raw text; the hooks compare it cleaned."""
    raw = tmp_path / "raw.jsonl"
    t = Transcript(tmp_path / "t.jsonl")
    first_window(t)
    lines = []
    for line in t.path.read_text().splitlines():
        r = json.loads(line)
        content = r["message"]["content"]
        if isinstance(content, str):  # the owner's lines, as an older import kept them
            role = "user"
        elif content[0]["type"] == "tool_result":
            continue
        else:
            role, content = "assistant", content[0]["text"]
        lines.append(
            {"session": TETHER_SESSION, "role": role, "text": content, "time": r["timestamp"]}
        )
    raw.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert tether(home, "sessions", "import", str(raw)).returncode == 0
    assert any(PRIVATE_WORD in text for _, text in held(home))  # the old, raw form
    hook(home, "pre-compact", payload("PreCompact", t.path, trigger="manual"))
    assert len(held(home)) == 6  # five already held, only the tool's error is new
    assert recall(home, PRIVATE_WORD) == []  # never indexed, old form or new


@pytest.mark.parametrize("point", ["recall-before-append", "recall-after-append"])
def test_a_hook_killed_before_its_window_is_recorded_loses_and_doubles_nothing(
    home: Path, tmp_path: Path, point: str
) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    first_window(t)
    run = hook(home, "pre-compact", payload("PreCompact", t.path), env={"TETHER_CRASH_AT": point})
    assert run.returncode != 0  # killed
    assert len(segments(home)) == 1  # the bytes were banked first
    # The next recall's own pass puts the window in its session, once.
    hits = recall(home, "ledger database")
    assert "PostgreSQL 16" in hits[0]["text"]
    assert hits[0]["link"].startswith("tether://corpus/")
    said = held(home)
    assert len(said) == len(set(said)) == 6
    hook(home, "pre-compact", payload("PreCompact", t.path))
    assert held(home) == said


def test_a_hook_killed_before_its_ledger_entry_is_caught_up_by_the_next_hook(
    home: Path, tmp_path: Path
) -> None:
    """A segment with no ledger entry is unknown to recall's catch-up; the next hook of
    the session banks the same window again (``segment_dup``) and puts it in."""
    t = Transcript(tmp_path / "t.jsonl")
    first_window(t)
    env = {"TETHER_CRASH_AT": "hook-after-segment-write"}
    assert hook(home, "pre-compact", payload("PreCompact", t.path), env=env).returncode != 0
    assert recall(home, "ledger database") == []
    t.boundary()
    start = hook(home, "session-start", payload("SessionStart", t.path, source="compact"))
    assert start.returncode == 0, start.stderr
    line = heartbeat(home)[-1]
    assert (line["backstop"], line["segment"], line["recall"]) == (
        "backstop_banked",
        "segment_dup",
        "recall_indexed",
    )
    assert "PostgreSQL 16" in recall(home, "ledger database")[0]["text"]
    assert len(held(home)) == 6


def test_a_hook_out_of_time_leaves_its_window_to_the_next_recall(
    home: Path, tmp_path: Path
) -> None:
    # The hook banks its window, then is held past its 3 s deadline before the recall
    # step (a pause point that lets go by itself), so that step is deferred however fast
    # or loaded the machine is.
    t = Transcript(tmp_path / "t.jsonl")
    first_window(t)
    held_past = {
        "TETHER_PAUSE_AT": PAUSE_BEFORE_RECALL,
        "TETHER_PAUSE_DIR": str(tmp_path),
        "TETHER_PAUSE_S": "3.2",
    }
    run = hook(home, "pre-compact", payload("PreCompact", t.path), env=held_past)
    assert (tmp_path / f"{PAUSE_BEFORE_RECALL}.reached").exists()
    assert run.returncode == 0, run.stderr
    line = heartbeat(home)[-1]
    assert (line["segment"], line["recall"]) == ("segment_banked", "recall_deferred")
    assert not (home / "sessions" / TETHER_SESSION).exists()
    assert "PostgreSQL 16" in recall(home, "ledger database")[0]["text"]
    assert len(held(home)) == 6
    # Session end runs detached, with nobody waiting: its window goes in whatever the
    # deadline says.
    t.boundary()
    t.user("Deploy goes to Frankfurt, eu-central-1.")
    hook(home, "session-end", payload("SessionEnd", t.path, reason="exit"), "--wait")
    assert heartbeat(home)[-1]["recall"] == "recall_indexed"
    assert len(held(home)) == 7


@pytest.fixture
def hooked(home: Path, tmp_path: Path) -> Path:
    """A home whose only session came from the hooks: one banked window."""
    t = Transcript(tmp_path / "t.jsonl")
    first_window(t)
    run = hook(home, "pre-compact", payload("PreCompact", t.path))
    assert run.returncode == 0, run.stderr
    return home


def test_the_hook_session_is_listed_and_shown_without_its_private_words(hooked: Path) -> None:
    listed = json.loads(tether(hooked, "session", "list", "--json").stdout)
    assert [s["id"] for s in listed] == [TETHER_SESSION]
    shown = tether(hooked, "session", "show", TETHER_SESSION, "--messages")
    assert shown.returncode == 0, shown.stderr
    assert "PostgreSQL 16 for the ledger service" in shown.stdout
    assert ERROR in shown.stdout
    assert "[private]" in shown.stdout
    for out in (shown.stdout, tether(hooked, "session", "show", TETHER_SESSION, "--json").stdout):
        assert PRIVATE_WORD not in out
        assert SECRET not in out
    pack = tether(hooked, "context-pack", "--session", TETHER_SESSION.removeprefix("cc-"))
    assert pack.returncode == 0, pack.stderr
    assert "tether://corpus/" in pack.stdout
    assert PRIVATE_WORD not in pack.stdout


def test_private_words_in_a_session_tether_holds_raw_are_shown_nowhere(
    home: Path, tmp_path: Path
) -> None:
    """A generic import keeps what it is given; every display path hides the span."""
    src = tmp_path / "in.jsonl"
    said = f"The deploy key rotates monthly <private>{PRIVATE_WORD} lives here</private>"
    src.write_text(
        json.dumps({"session": "raw", "role": "user", "text": said, "time": "2026-11-01T10:00:00Z"})
        + "\n"
    )
    assert tether(home, "sessions", "import", str(src)).returncode == 0
    assert PRIVATE_WORD in (home / "sessions" / "raw" / "0.jsonl").read_text()
    assert recall(home, PRIVATE_WORD) == []
    assert "rotates monthly" in recall(home, "deploy key rotation")[0]["text"]
    for args in (("--messages",), ("--messages", "--json")):
        out = tether(home, "session", "show", "raw", *args).stdout
        assert "rotates monthly" in out
        assert PRIVATE_WORD not in out


def test_the_ui_lists_shows_and_finds_the_hook_session_without_private_words(
    hooked: Path,
) -> None:
    from ui_helpers import logged_in, serve_ui

    with serve_ui(hooked) as served:
        client = logged_in(served, served.login)
        try:
            listing = client.get("/sessions").text
            assert TETHER_SESSION in listing
            page = client.get(f"/sessions/{TETHER_SESSION}").text
            assert "PostgreSQL 16 for the ledger service" in page
            assert "fastparquet" in page
            found = client.get("/recall", params={"q": "ledger database"}).text
            assert "tether://corpus/" in found
            for text in (page, found):
                assert PRIVATE_WORD not in text
                assert SECRET not in text
            assert "0 hits for" in client.get("/recall", params={"q": PRIVATE_WORD}).text
        finally:
            client.close()


@pytest.mark.anyio
async def test_mcp_recall_and_read_find_the_window_without_private_words(hooked: Path) -> None:
    from mcp_helpers import call, stdio_session

    async with stdio_session(hooked) as s:
        error, text = await call(s, "recall", query="which database for the ledger", k=5)
        assert not error, text
        first = json.loads(text)["hits"][0]
        assert first["session"] == TETHER_SESSION
        assert first["segment"].startswith("tether://corpus/")
        for link in (first["link"], first["segment"]):
            error, body = await call(s, "read", link=link)
            assert not error, body
            assert "PostgreSQL 16" in body
            assert PRIVATE_WORD not in body
            assert SECRET not in body
        _, nothing = await call(s, "recall", query=PRIVATE_WORD, k=5)
        assert json.loads(nothing)["hits"] == []


@needs_fixtures
def test_a_real_transcript_through_the_hook_is_recallable(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "edge.jsonl"
    shutil.copy(EDGES, path)
    run = hook(home, "pre-compact", payload("PreCompact", path, session="edge_cases"))
    assert run.returncode == 0, run.stderr
    hits = recall(home, "tool execution failed command not found")
    assert any(h["text"].startswith("[tool error] Error: Tool execution failed") for h in hits)
    assert all(h["link"].startswith("tether://corpus/cc-edge-cases") for h in hits if h["session"])
    again = tether(home, "sessions", "import", "--format", "claude-code", str(path))
    assert again.returncode == 0, again.stderr
    # The file holds a line of another session, which the hook (one session) never reads.
    assert "imported 1 of the transcript's 11 messages" in again.stdout


def test_a_codex_rollout_banked_at_session_end_is_recallable(home: Path, tmp_path: Path) -> None:
    from test_codex import ID, ROLLOUT, SID

    path = tmp_path / f"rollout-2026-10-29T00-59-38-{ID}.jsonl"
    path.write_bytes(b"\n".join(ROLLOUT) + b"\n")
    stdin = json.dumps({"session_id": ID, "transcript_path": str(path), "cwd": "/work"})
    run = tether(home, "hook", "codex", "session-end", "--wait", input=stdin)
    assert run.returncode == 0, run.stderr
    hits = recall(home, "why does the retry test hang")
    assert hits[0]["session"] == SID
    assert hits[0]["link"].startswith(f"tether://corpus/{SID}.seg-")
    assert any("[tool result] 12: backoff(0)" in h["text"] for h in recall(home, "backoff"))
    again = tether(home, "sessions", "import", "--format", "codex", str(path))
    assert again.stdout.startswith(f"nothing new: the transcript's 4 messages are in ({SID})")


@pytest.mark.anyio
async def test_mcp_recall_catches_up_a_window_its_hook_never_put_in(
    home: Path, tmp_path: Path
) -> None:
    from mcp_helpers import call, stdio_session

    t = Transcript(tmp_path / "t.jsonl")
    first_window(t)
    env = {"TETHER_CRASH_AT": "recall-before-append"}
    assert hook(home, "pre-compact", payload("PreCompact", t.path), env=env).returncode != 0
    assert not (home / "sessions" / TETHER_SESSION).exists()
    async with stdio_session(home) as s:
        error, text = await call(s, "recall", query="which database for the ledger", k=5)
        assert not error, text
        assert "PostgreSQL 16" in json.loads(text)["hits"][0]["text"]
    assert len(held(home)) == 6


pieces = st.lists(
    st.sampled_from(
        ["we ", "use ", "<private>", "</private>", "diary ", "\n", "  ", SECRET, " = ", "x", "["]
    ),
    max_size=12,
).map("".join)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), pieces), max_size=5))
def test_the_import_stores_each_message_as_the_hooks_bank_it(said: list[tuple[str, str]]) -> None:
    """The two paths agree on a message's text (or a message would land twice): what the
    import stores (``clean_texts``) is what a banked window, read back, holds."""
    turns = [
        Turn("user" if r == "user" else "assistant", t, f"2026-11-01T10:00:0{i}Z")
        for i, (r, t) in enumerate(said)
    ]
    banked = parse_rendered(redact_text(render(turns)).body.decode())
    cleaned = [c for c in clean_texts(said, frozenset()) if c]
    assert [t.text for t in banked] == cleaned
    assert all(SECRET not in c for c in cleaned)
    assert clean_texts([("user", c) for c in cleaned], frozenset()) == cleaned  # idempotent


def test_memory_reindex_catches_up_a_window_no_hook_put_in(home: Path, tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    first_window(t)
    env = {"TETHER_CRASH_AT": "recall-before-append"}
    assert hook(home, "pre-compact", payload("PreCompact", t.path), env=env).returncode != 0
    out = tether(home, "memory", "reindex")
    assert out.returncode == 0, out.stderr
    assert len(held(home)) == 6
    assert "PostgreSQL 16" in recall(home, "ledger database")[0]["text"]
