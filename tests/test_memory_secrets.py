"""No secret enters durable memory in clear: identity entries, notes and pages are
screened (``tether.scan.screen``). The owner's commands refuse a secret unless told
``--redact``; the agent's tools redact and say so; an allowed fingerprint passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon_helpers import tether
from tether.daemon.compose import Runtime
from tether.errors import SecretInInputError
from tether.scan import fingerprint, scan
from tether.scan.screen import screen
from tether.testing.fake_llama import FakeLlama, Reply

# Built from pieces so no scanner flags this file; the same shapes as tests/test_scan.py.
OPENAI = "sk-" + "AbCdEfGhIjKlMnOpQrSt" + "T3BlbkFJ" + "UvWxYz0123456789AbCd"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"


def under_home(home: Path, secret: str) -> list[str]:
    """Every file under ``home`` whose bytes hold ``secret`` (the store, its WAL, files)."""
    needle = secret.encode()
    return sorted(
        str(p.relative_to(home))
        for p in home.rglob("*")
        if p.is_file() and needle in p.read_bytes()
    )


def memory_files(home: Path, secret: str) -> list[str]:
    """``under_home`` without the session logs, which keep what was said as it was said."""
    return [p for p in under_home(home, secret) if not p.startswith("sessions/")]


# -- screen, pure ------------------------------------------------------------------------


def test_clean_text_passes_unchanged() -> None:
    out = screen("likes tea\nworks nights", what="note", allow=frozenset(), on_secret="refuse")
    assert (out.text, dict(out.redacted), out.note()) == ("likes tea\nworks nights", {}, "")


def test_a_refusal_names_the_line_rule_and_fingerprint_but_not_the_secret() -> None:
    text = f"# Keys\n\nwork laptop\nopenai: {OPENAI}\nand {GITHUB}\n"
    with pytest.raises(SecretInInputError) as err:
        screen(text, what="page work (keys.md)", allow=frozenset(), on_secret="refuse")
    e = err.value
    assert (e.what, e.line, e.rule, e.found) == ("page work (keys.md)", 4, "openai-key", 2)
    assert e.fingerprint == fingerprint(OPENAI)
    assert e.exit_code == 2
    message = str(e)
    assert message.startswith("page work (keys.md), line 4: holds a secret (and 1 more)")
    assert OPENAI not in message
    assert GITHUB not in message
    assert "--redact" in message
    assert ".tether-scan-allow" in message


def test_redaction_replaces_every_secret_and_counts_them() -> None:
    out = screen(
        f"a {OPENAI} b {GITHUB} c {OPENAI}", what="note", allow=frozenset(), on_secret="redact"
    )
    assert out.text == "a [REDACTED:openai-key] b [REDACTED:github-token] c [REDACTED:openai-key]"
    assert dict(out.redacted) == {"github-token": 1, "openai-key": 2}
    assert out.note() == "3 secrets redacted (github-token, openai-key)"


def test_an_allowed_fingerprint_passes_in_clear() -> None:
    allow = frozenset({fingerprint(OPENAI)})
    out = screen(f"key {OPENAI}", what="note", allow=allow, on_secret="refuse")
    assert out.text == f"key {OPENAI}"


_TEXT = st.lists(
    st.one_of(st.text(max_size=40), st.sampled_from([OPENAI, GITHUB, "password = 'hunter22'"])),
    max_size=6,
).map(" ".join)


@given(_TEXT)
def test_redacted_text_holds_nothing_the_scanner_finds(text: str) -> None:
    out = screen(text, what="note", allow=frozenset(), on_secret="redact")
    assert scan(out.text) == []
    assert (out.text == text) == (not out.redacted)


@given(_TEXT)
def test_refuse_either_keeps_the_text_whole_or_writes_nothing(text: str) -> None:
    found = scan(text)
    if not found:
        assert screen(text, what="note", allow=frozenset(), on_secret="refuse").text == text
        return
    with pytest.raises(SecretInInputError) as err:
        screen(text, what="note", allow=frozenset(), on_secret="refuse")
    assert err.value.line == text.count("\n", 0, found[0].start) + 1
    assert err.value.found == len(found)


# -- the owner's commands ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "what"),
    [
        (["memory", "add", f"my OpenAI key is {OPENAI}"], "identity entry"),
        (["memory", "note", f"my OpenAI key is {OPENAI}"], "note"),
    ],
)
def test_the_owner_is_refused_then_redacts_or_allows(
    home: Path, command: list[str], what: str
) -> None:
    refused = tether(home, *command)
    assert refused.returncode == 2
    assert refused.stderr.startswith(
        f"tether: error: {what}, line 1: holds a secret (rule openai-key"
    )
    assert fingerprint(OPENAI) in refused.stderr
    assert OPENAI not in refused.stderr
    assert "runbook: secret-refused" in refused.stderr
    assert under_home(home, OPENAI) == []
    assert json.loads(tether(home, "memory", "journal", "--json").stdout) == []

    redacted = tether(home, *command, "--redact")
    assert redacted.returncode == 0, redacted.stderr
    assert redacted.stderr == f"{what}: 1 secret redacted (openai-key)\n"
    assert under_home(home, OPENAI) == []
    shown = tether(home, "memory", "show").stdout
    assert "my OpenAI key is [REDACTED:openai-key]" in shown
    journal = json.loads(tether(home, "memory", "journal", "--json").stdout)
    assert [e["after"] for e in journal] == ["my OpenAI key is [REDACTED:openai-key]"]

    # Reviewed as no secret: its fingerprint goes in the allow file, and it passes.
    (home / ".tether-scan-allow").write_text(f"# test key\n{fingerprint(OPENAI)}\n")
    allowed = tether(home, *command)
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stderr == ""
    assert f"my OpenAI key is {OPENAI}" in tether(home, "memory", "show").stdout


@pytest.mark.slow
def test_a_page_with_a_secret_is_refused_naming_its_file_and_line(
    home: Path, tmp_path: Path
) -> None:
    body = tmp_path / "deploy.md"
    body.write_text(f"# Deploy\n\nThe bot pushes with\n{GITHUB}\nevery night.\n")
    refused = tether(home, "page", "write", "work/deploy", "--file", str(body))
    assert refused.returncode == 2
    assert refused.stderr.startswith(
        f"tether: error: page work/deploy ({body}), line 4: holds a secret (rule github-token"
    )
    assert tether(home, "page", "show", "work/deploy").returncode == 2
    assert under_home(home, GITHUB) == []
    assert body.read_text().count(GITHUB) == 1  # the owner's file is untouched

    title = tether(home, "page", "write", "work/deploy", "--title", GITHUB, input="ok\n")
    assert title.returncode == 2
    assert "--title, line 1" in title.stderr

    redacted = tether(home, "page", "write", "work/deploy", "--file", str(body), "--redact")
    assert redacted.returncode == 0, redacted.stderr
    page = json.loads(tether(home, "page", "show", "work/deploy", "--json").stdout)
    assert (
        page["body"] == "# Deploy\n\nThe bot pushes with\n[REDACTED:github-token]\nevery night.\n"
    )
    assert under_home(home, GITHUB) == []
    found = json.loads(tether(home, "memory", "recall", "bot pushes every night", "--json").stdout)
    assert found
    assert GITHUB not in json.dumps(found)


def test_a_broken_allow_file_is_named_and_nothing_is_written(home: Path) -> None:
    (home / ".tether-scan-allow").write_text("not-a-fingerprint\n")
    out = tether(home, "memory", "note", "plain words")
    assert out.returncode == 2
    assert f"{home / '.tether-scan-allow'}:1: expected a 64-hex-digit" in out.stderr
    assert json.loads(tether(home, "memory", "journal", "--json").stdout) == []


# -- the agent's tools -------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_agent_writes_redacted_memory_and_is_told(
    home: Path, rt: Runtime, fake: FakeLlama
) -> None:
    fake.script(
        Reply(
            tool_calls=[
                ("note", {"text": f"deploy token: {GITHUB}"}),
                ("add", {"text": f"The owner's OpenAI key is {OPENAI}"}),
            ]
        ),
        slot=0,
    )
    fake.script(Reply(content="Noted."), slot=0)
    await rt.agent.run_turn("chat", f"remember my deploy token {GITHUB} and key {OPENAI}")

    told = [m["content"] for m in fake.requests[-1].messages if m["role"] == "tool"]
    assert told[0].endswith("; 1 secret redacted (github-token)")
    assert told[1].endswith("; 1 secret redacted (openai-key)")
    assert [n.text for n in rt.store.notes()] == ["deploy token: [REDACTED:github-token]"]
    assert (
        "The owner's OpenAI key is [REDACTED:openai-key]"
        in (home / "memory" / "memory.md").read_text()
    )
    rt.store.close()  # flush the WAL so the check below reads every byte on disk
    assert memory_files(home, GITHUB) == []
    assert memory_files(home, OPENAI) == []


# -- the recall index --------------------------------------------------------------------


def _import(home: Path, tmp_path: Path, text: str) -> None:
    lines = [
        {"session": "ops", "role": "user", "text": text, "time": "2026-03-02T10:00:00Z"},
        {"session": "ops", "role": "assistant", "text": "Saved.", "time": "2026-03-02T10:00:01Z"},
    ]
    src = tmp_path / "ops.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tether(home, "sessions", "import", str(src))
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
def test_recall_finds_the_turn_but_never_shows_the_secret_it_held(
    home: Path, tmp_path: Path
) -> None:
    _import(home, tmp_path, f"the staging deploy token is {GITHUB} keep it safe")
    found = tether(home, "memory", "recall", "staging deploy token", "--json")
    hits = json.loads(found.stdout)
    assert [h["text"] for h in hits] == [
        "the staging deploy token is [REDACTED:github-token] keep it safe"
    ]
    # The session log keeps what was said; the store that recall reads does not.
    assert memory_files(home, GITHUB) == []
    assert under_home(home, GITHUB) == ["sessions/ops/0.jsonl"]

    # An allowed fingerprint is indexed in clear from the next re-index.
    (home / ".tether-scan-allow").write_text(fingerprint(GITHUB) + "\n")
    assert tether(home, "memory", "reindex").returncode == 0
    again = json.loads(tether(home, "memory", "recall", "staging deploy token", "--json").stdout)
    assert [h["text"] for h in again] == [f"the staging deploy token is {GITHUB} keep it safe"]
