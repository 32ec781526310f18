"""tether's block in someone else's TOML file (``core.views.toml_block``): added and cut out as
text, so the owner's comments, tables and order survive an install then an uninstall."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.core.views.toml_block import BlockError, add_block, remove_block, server_block

TABLE = "mcp_servers.tether"
names = st.sampled_from(["model", "args", "url", "enabled", "x-y", "a_b"])
values = st.one_of(
    st.integers(-5, 5).map(str),
    st.text(alphabet='abc "\\é#\t', max_size=8).map(
        lambda t: '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'
    ),
    st.sampled_from(["true", "[1, 2]", '["x", "y"]', "{ a = 1 }"]),
)
comments = st.sampled_from(["", "  # keep me", " # ünïcode"])
tables = st.sampled_from(
    ["", "[profiles.fast]", "[mcp_servers.docs]", "[features]", "[[notify]]", "[a.b.c]"]
)


@st.composite
def documents(draw: st.DrawFn) -> str:
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append("# the owner's own header comment")
    seen: set[str] = set()
    for _ in range(draw(st.integers(0, 4))):
        table = draw(tables)
        if table and table in seen and not table.startswith("[["):
            continue
        seen.add(table)
        if table:
            lines += ["", table]
        keys = draw(st.lists(names, unique=True, max_size=3))
        lines += [f"{k} = {draw(values)}{draw(comments)}" for k in keys]
    final: bool = draw(st.booleans())
    text = "\n".join(lines)
    return text + ("\n" if lines and final else "")


@given(documents(), st.text(alphabet="/ab c'\"\\\x7fé", min_size=1, max_size=20))
def test_install_then_uninstall_gives_back_the_text(text: str, home: str) -> None:
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError:  # a drawn document can repeat a key: not one we test
        return
    block = server_block(TABLE, "/opt/tether/bin/tether", ["--home", home, "mcp"])
    added = add_block(text, TABLE, block)
    doc = tomllib.loads(added)
    assert doc["mcp_servers"]["tether"] == {
        "command": "/opt/tether/bin/tether",
        "args": ["--home", home, "mcp"],
    }
    assert added.startswith(text)  # nothing of the owner's moved
    assert add_block(added, TABLE, block) == added  # twice changes nothing
    removed = remove_block(added, TABLE)
    assert tomllib.loads(removed) == before
    # a text without a final newline gains one; every other byte comes back
    assert removed == (text if text.endswith("\n") or not text.strip() else text + "\n")


def test_a_changed_home_replaces_the_block_in_place() -> None:
    text = '[mcp_servers.docs]\ncommand = "npx"\n'
    one = add_block(text, TABLE, server_block(TABLE, "/t", ["mcp"]))
    later = one + '\n[profiles.x]\nmodel = "m"\n'
    two = add_block(later, TABLE, server_block(TABLE, "/t", ["--home", "/h", "mcp"]))
    assert tomllib.loads(two)["mcp_servers"]["tether"]["args"] == ["--home", "/h", "mcp"]
    assert two.endswith('\n[profiles.x]\nmodel = "m"\n')
    assert remove_block(two, TABLE) == text + '\n[profiles.x]\nmodel = "m"\n'


def test_keys_the_owner_put_under_the_block_are_not_lost_by_an_uninstall() -> None:
    added = add_block("", TABLE, server_block(TABLE, "/t", ["mcp"]))
    with pytest.raises(BlockError, match="more than"):
        remove_block(added + "startup_timeout_sec = 20\n", TABLE)
