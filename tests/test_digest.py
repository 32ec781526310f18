"""A checkpoint's digest (``core.checkpoints.digest``) and the pack that carries it
(``core.checkpoints.window.build_pack``): extractive, bounded, private spans never in it, and a
pack that stays under Claude Code's 10,000-character cut whatever its token budget."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tether.core.checkpoints.digest import ITEM_CHARS, PER_KIND, digest
from tether.core.checkpoints.window import (
    MAX_PACK_CHARS,
    READ_GUIDE,
    Checkpoint,
    build_pack,
    render,
)
from tether.core.checkpoints.window import Turn as T
from tether.core.context import tokens

SEGMENT = render(
    [
        T("user", "Let's build the CSV export for the billing service, please.", "t1"),
        T(
            "assistant",
            "I'll start with the writer. We settled on pyarrow instead of pandas.\n"
            "TODO: a test for the empty ledger.\n"
            '[tool Bash] {"command": "decided to rm -rf TODO"}',
            "t2",
        ),
        T("user", "ok", "t3"),
        T("user", "<command-name>/compact</command-name>", "t4"),
        T(
            "user",
            "Run it nightly at 2am and mail me <private>at my home</private> on failure.",
            "t5",
        ),
        T("assistant", "Done. Next steps: the cron entry and the mail template.", "t6"),
    ]
)


def test_a_window_gives_its_requests_decisions_and_open_tasks() -> None:
    d = digest("# tether segment abc: session s, a window (secrets redacted)\n\n" + SEGMENT)
    assert d.asked == (
        "Let's build the CSV export for the billing service, please.",
        "Run it nightly at 2am and mail me [private] on failure.",
    )
    assert d.decided == ("We settled on pyarrow instead of pandas.",)
    assert d.open == (
        "Next steps: the cron entry and the mail template.",
        "TODO: a test for the empty ledger.",
    )
    assert not any("rm -rf" in line for line in d.lines())  # a tool call is no conversation


def test_tethers_own_segments_are_read_too() -> None:
    text = (
        "[2026-11-01T10:00:00Z] USER (ada): We decided to move the standup to 9:30 from now on.\n\n"
        '[2026-11-01T10:00:01Z] TOOL CALL calendar({"q": "TODO"}) id=c1\n\n'
        "[2026-11-01T10:00:02Z] TOOL RESULT id=c1 (web, untrusted): we decided nothing\n"
    )
    d = digest(text)
    assert d.asked == ("We decided to move the standup to 9:30 from now on.",)
    assert d.decided == ()  # a line is used once; tool output is never taken
    assert d.open == ()


words = st.text(alphabet=st.sampled_from("ab TODOdecided.\n[]:<>/privte-USER"), max_size=80)


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), words), max_size=12), words)
def test_a_digest_is_bounded_extractive_and_keeps_private_spans_out(
    turns: list[tuple[str, str]], private: str
) -> None:
    secret = "ZZSECRETZZ"
    ts = [
        T(
            "user" if role == "user" else "assistant",
            f"{text} <private>{secret}{private}</private>",
            "t",
        )
        for role, text in turns
    ]
    text = render(ts)
    d = digest(text)
    assert len(d.asked) <= PER_KIND
    assert len(d.decided) <= PER_KIND
    assert len(d.open) <= PER_KIND
    squashed = " ".join(text.split())
    for line in [*d.asked, *d.decided, *d.open]:
        assert len(line) <= ITEM_CHARS
        assert secret not in line
        assert line.removesuffix("…") in squashed
    assert digest(text) == d


notes = st.lists(st.text(max_size=ITEM_CHARS), max_size=PER_KIND * 3).map(tuple)
points = st.builds(Checkpoint, st.text(min_size=1, max_size=40), notes)


@given(
    st.lists(st.text(max_size=200), max_size=30),
    st.lists(st.text(max_size=200), max_size=30),
    st.lists(st.one_of(st.text(max_size=40), points), max_size=12),
    st.integers(min_value=0, max_value=4000),
    st.integers(min_value=0, max_value=MAX_PACK_CHARS),
)
def test_the_pack_never_exceeds_its_tokens_or_its_characters(
    identity: list[str],
    facts: list[str],
    links: list[str | Checkpoint],
    budget: int,
    max_chars: int,
) -> None:
    pack = build_pack(identity, facts, links, budget, max_chars=max_chars)
    assert tokens.count(pack) <= budget
    assert len(pack) <= max_chars


def test_a_huge_budget_still_gives_a_pack_under_claude_codes_cut() -> None:
    long = "x" * 150 + " the owner's words"
    asked = tuple(f"asked: {long} {j}" for j in range(9))
    points = [  # as checkpoint.pack gives them: the newest eight with a digest
        Checkpoint(f"tether://corpus/cc-s.seg-{i:024x}", asked if i < 8 else ()) for i in range(200)
    ]
    pack = build_pack([long] * 1000, [long] * 1000, points, 10**7)
    assert len(pack) <= MAX_PACK_CHARS < 10_000
    assert READ_GUIDE in pack
    assert "mcp__tether__read" in pack
    assert pack.index("- tether://corpus/cc-s.seg-" + "0" * 24) < pack.index("  - asked:")
    assert pack.count("- tether://corpus/") >= 8  # every digested link, the newest first
    assert "more lines not shown" in pack
    assert "## Identity" not in pack  # the checkpoints took the room


def test_links_go_first_and_the_guide_only_when_there_is_a_link() -> None:
    assert "`read`" not in build_pack(["one"], ["a fact"], [], 1500)
    tight = build_pack(
        ["entry"] * 50, [], [Checkpoint("tether://corpus/s.seg-1", ("asked: hello there",))], 60
    )
    assert "- tether://corpus/s.seg-1\n" in tight


phrases = st.sampled_from(
    [
        "We decided to ship it.",
        "DECISION: oak.",
        "settled on pyarrow",
        "Let's go with\ntea",
        "we chose Rust",
        "We'll use SQLite.",
        "instead of pandas",
        "Switched to uv.",
        "From now on, metric.",
        "Sticking with it.",
        "I opted out.",
        "TODO: tests",
        "fixme later",
        "Next steps: cron.",
        "We still need to mail.",
        "the remaining work",
        "left to do: docs",
        "a Follow-up call",
        "an open question",
        "not finished yet",
        "- [ ] write it",
        "done. - [ ] the rest",
        "nothing here at all",
        "going without",
    ]
)


@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), st.lists(phrases, max_size=4))))
def test_skipping_blocks_without_a_keyword_never_changes_a_digest(
    turns: list[tuple[str, list[str]]],
) -> None:
    from tether.core.checkpoints import digest as module

    text = render([T(role, " ".join(said), "t") for role, said in turns])  # type: ignore[arg-type]
    fast = digest(text)
    words = (module._DECIDED_WORDS, module._OPEN_WORDS)
    module._DECIDED_WORDS, module._OPEN_WORDS = ("",), ("",)  # every block read
    try:
        assert digest(text) == fast
    finally:
        module._DECIDED_WORDS, module._OPEN_WORDS = words
