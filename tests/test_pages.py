"""``tether page write|show|list|rm``: the owner's pages, as a user runs the commands, found
by recall and read by the agent with page_read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon_helpers import tether
from tether.daemon.compose import Runtime
from tether.testing.fake_llama import FakeLlama, Reply

ADA = "# Ada Lovelace\n\nMy sister-in-law. She sails the Marigold Seven on Sundays.\n"


def journal(home: Path) -> list[dict[str, object]]:
    out = tether(home, "memory", "journal", "--json")
    assert out.returncode == 0, out.stderr
    entries: list[dict[str, object]] = json.loads(out.stdout)
    return [e for e in entries if str(e["target"]).startswith("page:")]


@pytest.mark.slow
def test_write_show_list_replace_and_remove_a_page(home: Path, tmp_path: Path) -> None:
    body = tmp_path / "ada.md"
    body.write_text(ADA)
    wrote = tether(home, "page", "write", "people/ada", "--file", str(body), "--tag", "family")
    assert wrote.returncode == 0, wrote.stderr
    assert wrote.stdout == "wrote page people/ada: Ada Lovelace\n"

    shown = tether(home, "page", "show", "tether://people/ada", "--json")
    page = json.loads(shown.stdout)
    assert {k: page[k] for k in ("slug", "title", "body", "tags", "visibility", "untrusted")} == {
        "slug": "people/ada",
        "title": "Ada Lovelace",
        "body": ADA,
        "tags": ["family"],
        "visibility": "private",
        "untrusted": False,
    }
    human = tether(home, "page", "show", "people/ada").stdout
    assert human.count("# Ada Lovelace") == 1  # the body's own heading, not twice
    listed = json.loads(tether(home, "page", "list", "--json").stdout)
    assert [(p["slug"], "body" in p) for p in listed] == [("people/ada", False)]

    found = tether(home, "memory", "recall", "who sails the Marigold?", "--json")
    assert [h["kind"] for h in json.loads(found.stdout)][:1] == ["page"]

    again = tether(home, "page", "write", "people/ada", "--title", "Ada", input="Moved to Lyon.\n")
    assert again.stdout == "replaced page people/ada: Ada\n"
    gone = tether(home, "page", "rm", "people/ada")
    assert gone.stdout == "removed page people/ada: Ada\n"
    assert json.loads(tether(home, "page", "list", "--json").stdout) == []
    after = tether(home, "memory", "recall", "Marigold Lyon", "--json")
    assert json.loads(after.stdout) == []

    writes = journal(home)
    assert [e["action"] for e in writes] == ["page_write", "page_write", "page_remove"]
    assert writes[0]["before"] is None
    assert writes[1]["before"] == ADA
    assert writes[1]["after"] == "# Ada\n\nMoved to Lyon.\n"
    assert writes[2]["after"] is None


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "stdin", "needle"),
    [
        (["write", "People/Ada"], "x", "invalid page slug 'People/Ada'"),
        (["write", "corpus/chat.seg-1"], "x", "not starting with 'corpus/'"),
        (["write", "people/ada"], "  \n", "page 'people/ada' needs a body"),
        (["write", "people/ada", "--file", "/nonexistent/ada.md"], None, "no file"),
        (["show", "people/nobody"], None, "no page 'people/nobody'"),
        (["rm", "people/nobody"], None, "no page 'people/nobody'"),
        (["write", "people/ada", "--visibility", "public"], "x", "'public' is not one of"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    home: Path, args: list[str], stdin: str | None, needle: str
) -> None:
    out = tether(home, "page", *args, input=stdin)
    assert out.returncode == 2
    assert out.stderr.startswith("tether: error: ")
    assert needle in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert json.loads(tether(home, "page", "list", "--json").stdout) == []


@pytest.mark.anyio
async def test_the_agent_reads_a_page_the_owner_wrote(
    home: Path, rt: Runtime, fake: FakeLlama
) -> None:
    assert tether(home, "page", "write", "people/ada", input=ADA).returncode == 0
    fake.script(Reply(tool_calls=[("page_read", {"ref": "tether://people/ada"})]), slot=0)
    fake.script(Reply(content="Sundays"), slot=0)
    await rt.agent.run_turn("chat", "when does Ada sail?")
    tool_msg = fake.requests[-1].messages[-1]
    assert tool_msg["role"] == "tool"
    assert tool_msg["content"].count("# Ada Lovelace") == 1
    assert "Marigold Seven on Sundays" in tool_msg["content"]
