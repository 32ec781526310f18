"""The pure half of `tether mcp` (link grammar, fences, compact hits within the budget),
the token store, a search kept to a list of refs, and the client snippets of docs/mcp.md."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.core import mcp
from tether.core.mcp import CompactHit, FenceError, Link, cost, fence, link_of, pack, parse_link
from tether.core.recall.query import analyse
from tether.errors import BadInputError, InvalidIdError, NotFoundError
from tether.mcp.tokens import TokenCheck, create_token, list_tokens, revoke_token, tokens_path
from tether.stores.sqlite import SqliteStore

DOCS = Path(__file__).parent.parent / "docs" / "mcp.md"
NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "link"),
    [
        ("tether://people/ada", Link("page", "tether://people/ada", "people/ada")),
        ("tether://fact:7", Link("fact", "tether://fact:7", "7")),
        ("tether://note:012", Link("note", "tether://note:012", "12")),
        ("tether://identity:m-3fa2c1", Link("identity", "tether://identity:m-3fa2c1", "m-3fa2c1")),
        ("tether://turn:trip:4", Link("turns", "tether://turn:trip:4", "trip", 4, 4)),
        ("tether://turn:trip:4-9", Link("turns", "tether://turn:trip:4-9", "trip", 4, 9)),
        (
            "tether://corpus/s.seg-0123456789abcdef01234567",
            Link(
                "segment",
                "tether://corpus/s.seg-0123456789abcdef01234567",
                "s.seg-0123456789abcdef01234567",
            ),
        ),
    ],
)
def test_links_parse(text: str, link: Link) -> None:
    assert parse_link(text) == link


@pytest.mark.parametrize(
    "text",
    [
        "people/ada",
        "http://people/ada",
        "tether://",
        "tether://../x",
        "tether://People/Ada",
        "tether://fact:",
        "tether://fact:-1",
        "tether://identity:3fa2c1",
        "tether://turn:Trip:1",
        "tether://turn:trip",
        "tether://turn:trip:1:2",
        "tether://a:b",
        "tether://" + "a" * 300,
    ],
)
def test_anything_else_is_refused_with_the_grammar(text: str) -> None:
    with pytest.raises(InvalidIdError, match="tether://fact:<id>"):
        parse_link(text)


def test_a_turn_range_is_ordered_and_bounded() -> None:
    with pytest.raises(BadInputError, match="at most 50 turns"):
        parse_link("tether://turn:trip:9-4")
    with pytest.raises(BadInputError, match="at most 50 turns"):
        parse_link("tether://turn:trip:1-60")


@given(st.from_regex(r"[a-z0-9-]{1,20}(/[a-z0-9-]{1,20}){0,3}", fullmatch=True))
def test_a_page_ref_round_trips_through_its_link(slug: str) -> None:
    if slug.startswith("corpus/"):
        return
    assert parse_link(link_of(f"page:{slug}")) == Link("page", f"tether://{slug}", slug)


def test_the_remote_lane_reads_world_kinds_only() -> None:
    for text in ("tether://people/ada", "tether://fact:3"):
        fence(parse_link(text), "remote")
    for text in (
        "tether://turn:trip:1",
        "tether://note:1",
        "tether://identity:m-3fa2c1",
        "tether://corpus/s.seg-0123456789abcdef01234567",
    ):
        fence(parse_link(text), "local")
        with pytest.raises(FenceError, match="world-visibility pages and facts only"):
            fence(parse_link(text), "remote")


hits = st.lists(
    st.builds(
        CompactHit,
        id=st.from_regex(r"turn:[a-z]{1,8}:[0-9]{1,4}", fullmatch=True),
        kind=st.sampled_from(["turn", "page", "fact", "note"]),
        time=st.none() | st.just("2026-12-01T00:00:00Z"),
        link=st.just("tether://turn:a:1"),
        trust=st.sampled_from(["trusted", "untrusted"]),
        text=st.text(max_size=300),
        session=st.none() | st.just("trip"),
    ),
    max_size=30,
)


@given(hits, st.integers(min_value=20, max_value=3000))
def test_pack_keeps_a_prefix_within_the_budget(found: list[CompactHit], budget: int) -> None:
    kept, left_out = pack(found, budget)
    assert len(kept) + left_out == len(found)
    assert cost(kept, left_out) <= budget or not kept
    if kept:
        assert kept[1:] == found[1 : len(kept)]
        assert found[0].text.startswith(kept[0].text)
    if len(kept) < len(found) and kept:
        assert cost([*kept, found[len(kept)]], left_out - 1) > budget
    json.loads(mcp.render(kept, left_out))


def test_first_line_is_the_first_non_blank_line_cut() -> None:
    assert mcp.first_line("\n\n  hello   world \nmore") == "hello world"
    assert mcp.first_line("x" * 500, 10) == "x" * 9 + "…"


# -- the token store ---------------------------------------------------------------------


def test_tokens_are_stored_hashed_checked_and_revoked(tmp_path: Path) -> None:
    token, record = create_token(tmp_path, "laptop", time=NOW)
    assert token.startswith("tmcp_")
    stored = tokens_path(tmp_path).read_text()
    assert token not in stored
    assert record.sha256 in stored
    assert tokens_path(tmp_path).stat().st_mode & 0o777 == 0o600
    check = TokenCheck(tmp_path)
    assert check.verify(token) == record
    assert check.verify(token + "x") is None
    assert check.verify("Bearer " + token) is None
    other, _ = create_token(tmp_path, "", time=NOW)
    assert [r.name for r in list_tokens(tmp_path)] == ["laptop", ""]
    assert revoke_token(tmp_path, record.id) == record
    assert check.verify(token) is None
    assert check.verify(other) is not None
    with pytest.raises(NotFoundError, match="no MCP token"):
        revoke_token(tmp_path, record.id)
    with pytest.raises(BadInputError, match="token name"):
        create_token(tmp_path, "x" * 100, time=NOW)


def test_a_damaged_token_file_refuses_everything(tmp_path: Path) -> None:
    token, _ = create_token(tmp_path, "a", time=NOW)
    tokens_path(tmp_path).write_text('{"version": 1, "tokens": [{"id": 3}]}')
    with pytest.raises(BadInputError, match="not a token file"):
        TokenCheck(tmp_path).verify(token)


# -- a search kept to a list of refs -------------------------------------------------------


def test_search_terms_newest_and_counts_keep_to_only(tmp_path: Path) -> None:
    from conftest import clean
    from tether.memory.pages import write_page

    store = SqliteStore(tmp_path / "tether.db")
    for slug in ("a", "b", "c"):
        write_page(
            store,
            slug,
            clean(f"harbour notes {slug}"),
            title=None,
            tags=(),
            visibility="world",
            untrusted=False,
            who="owner",
            session=None,
            time=NOW,
        )
    q = analyse("harbour")
    assert store.count_matches([q], 10) == [3]
    found = store.search_terms(q, 10, aside=0.5, only=["page:b"])
    assert [f.ref for f in found] == ["page:b"]
    assert store.search_terms(q, 10, aside=0.5, only=[]) == []
    newest = store.newest(q, 10, only=["page:a", "page:c"])
    assert sorted(f.ref for f in newest) == ["page:a", "page:c"]
    store.close()


# -- the client snippets in docs/mcp.md --------------------------------------------------


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOCS.read_text(), flags=re.DOTALL)


def test_the_claude_desktop_snippet_is_its_config_format() -> None:
    (block,) = _blocks("json")
    server = json.loads(block)["mcpServers"]["tether"]
    assert set(server) == {"command", "args", "env"}
    assert Path(server["command"]).name == "tether"
    assert server["args"] == ["mcp"]
    assert set(server["env"]) == {"TETHER_HOME"}


def test_the_codex_snippet_is_its_config_format() -> None:
    (block,) = _blocks("toml")
    servers = tomllib.loads(block)["mcp_servers"]
    assert servers["tether"] == {
        "command": "tether",
        "args": ["mcp"],
        "env": {"TETHER_HOME": "/home/me/.tether"},
    }
    remote = servers["tether-remote"]
    assert set(remote) == {"url", "bearer_token_env_var"}
    assert remote["url"].endswith("/mcp")


def test_the_claude_code_lines_put_options_before_the_name_and_the_command_after() -> None:
    (block,) = _blocks("sh")
    lines = [ln for ln in block.replace("\\\n", " ").splitlines() if ln.strip() and ln[0] != "#"]
    local, remote = (shlex.split(ln) for ln in lines)
    assert local[:3] == ["claude", "mcp", "add"]
    assert local[local.index("--") + 1 :] == ["tether", "mcp"]
    assert local[local.index("--") - 1] == "tether"  # the name, after every option
    assert local[local.index("--transport") + 1] == "stdio"
    assert remote[remote.index("--transport") + 1] == "http"
    assert remote[remote.index("--header") + 1].startswith("Authorization: Bearer ")
    assert remote[5:7] == ["tether-remote", "https://tether.example/mcp"]
