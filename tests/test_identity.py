"""Identity edits: atomic, journalled, owner-editable file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Ticker, clean
from tether.config import Config
from tether.memory.identity import Identity, IdentityError
from tether.ports import Store
from tether.stores import open_store


@pytest.fixture
def store(home: Path) -> Iterator[Store]:
    s = open_store(home, Config())
    yield s
    s.close()


def test_add_remove_consolidate_are_journalled(home: Path, store: Store, tick: Ticker) -> None:
    ident = Identity(home, store)
    a = ident.add(clean("likes tea"), who="owner", session=None, time=tick())
    b = ident.add(clean("drinks tea every morning"), who="agent", session="chat", time=tick())
    c = ident.add(clean("works nights"), who="agent", session="chat", time=tick())
    merged = ident.consolidate(
        [a.id, b.id],
        clean("drinks tea, mornings especially"),
        who="agent",
        session="chat",
        time=tick(),
    )
    ident.remove([c.id], who="owner", session=None, time=tick())
    assert [e.text for e in ident.entries()] == ["drinks tea, mornings especially"]
    assert ident.entries()[0].id == merged.id
    journal = store.journal()
    assert [(j.action, j.who, j.session) for j in journal] == [
        ("add", "owner", None),
        ("add", "agent", "chat"),
        ("add", "agent", "chat"),
        ("consolidate", "agent", "chat"),
        ("remove", "owner", None),
    ]
    assert journal[3].before == "likes tea\ndrinks tea every morning"
    assert journal[3].after == "drinks tea, mornings especially"
    assert journal[4].before == "works nights"


def test_owner_prose_survives_tool_edits(home: Path, store: Store, tick: Ticker) -> None:
    path = home / "memory" / "memory.md"
    path.write_text("# Who\n\nMy own words here.\n\n- likes tea\n\n## Work\n- works nights\n")
    ident = Identity(home, store)
    tea = next(e for e in ident.entries() if e.text == "likes tea")
    ident.remove([tea.id], who="agent", session="s", time=tick())
    ident.add(clean("plays cello"), who="agent", session="s", time=tick())
    text = path.read_text()
    assert "My own words here." in text
    assert "## Work\n- works nights" in text
    assert "likes tea" not in text
    assert text.endswith("- plays cello\n")


def test_adding_the_same_entry_twice_is_a_no_op(home: Path, store: Store, tick: Ticker) -> None:
    ident = Identity(home, store)
    ident.add(clean("likes tea"), who="owner", session=None, time=tick())
    ident.add(clean("  likes   tea "), who="owner", session=None, time=tick())
    assert [e.text for e in ident.entries()] == ["likes tea"]
    assert len(store.journal()) == 1


def test_unknown_ids_are_refused_and_nothing_changes(
    home: Path, store: Store, tick: Ticker
) -> None:
    ident = Identity(home, store)
    ident.add(clean("likes tea"), who="owner", session=None, time=tick())
    before = ident.path.read_bytes()
    with pytest.raises(IdentityError, match="m-000000"):
        ident.remove(["m-000000"], who="owner", session=None, time=tick())
    with pytest.raises(IdentityError, match="needs some text"):
        ident.add(clean("   "), who="owner", session=None, time=tick())
    assert ident.path.read_bytes() == before
    assert len(store.journal()) == 1


def test_no_temporary_files_left_behind(home: Path, store: Store, tick: Ticker) -> None:
    ident = Identity(home, store)
    for i in range(5):
        ident.add(clean(f"entry {i}"), who="owner", session=None, time=tick())
    leftovers = [p.name for p in (home / "memory").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
