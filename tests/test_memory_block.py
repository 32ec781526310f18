"""The memory block: deterministic, within budget, entries in file order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tether.core.context import tokens
from tether.core.context.memory_block import HEADER, Entry, build_block, entry_id, parse_entries

entry_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=80
).filter(lambda t: t.strip() != "")


@given(st.lists(entry_text, max_size=40), st.integers(1, 800))
def test_block_is_deterministic_and_within_budget(texts: list[str], budget: int) -> None:
    entries = [Entry(entry_id(t), t.strip()) for t in texts]
    block = build_block(entries, budget)
    assert block == build_block(list(entries), budget)
    assert tokens.count(block) <= budget


@given(st.lists(entry_text, min_size=1, max_size=30))
def test_shown_entries_are_a_prefix_in_file_order(texts: list[str]) -> None:
    entries = [Entry(entry_id(t), " ".join(t.split())) for t in texts]
    block = build_block(entries, 200)
    shown = [line for line in block.splitlines() if line.startswith("- [")]
    expected = [f"- [{e.id}] {e.text}" for e in entries[: len(shown)]]
    assert shown == expected
    if len(shown) < len(entries):
        assert f"({len(entries) - len(shown)} more entries not shown; use recall)" in block


def test_parse_entries_reads_list_items_only() -> None:
    md = (
        "# Identity\n\nSome prose.\n- likes tea\n* works nights\n"
        "  - nested counts too\n-not an item\n"
    )
    assert [e.text for e in parse_entries(md)] == ["likes tea", "works nights", "nested counts too"]


def test_entry_ids_are_stable_and_text_derived() -> None:
    assert entry_id("likes tea") == entry_id("  likes tea  ")
    assert entry_id("likes tea") != entry_id("likes coffee")


def test_empty_memory_block() -> None:
    block = build_block([], 3000)
    assert block.startswith(HEADER)
    assert "no identity entries" in block


def test_sweep_facts_follow_identity_highest_authority_first_within_budget() -> None:
    from tether.core.context import tokens
    from tether.core.context.memory_block import FACTS_HEADER, BlockFact, Entry, build_block

    entries = [Entry(id="m-1", text="Owner is Ada")]
    facts = [
        BlockFact("guess about tea", "sweep_inference"),
        BlockFact("club on Tuesdays", "direct_user_statement"),
        BlockFact("build uses make", "agent_reusable_conclusion"),
    ]
    block = build_block(entries, 400, facts)
    learned = block.split(FACTS_HEADER, 1)[1]
    assert learned.splitlines() == [
        "- club on Tuesdays",
        "- build uses make",
        "- guess about tea",
    ]
    for budget in range(0, 400, 7):
        small = build_block(entries, budget, facts)
        assert tokens.count(small) <= budget
        if FACTS_HEADER in small:
            assert small.split(FACTS_HEADER, 1)[1].startswith("- club on Tuesdays")
