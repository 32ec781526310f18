"""The pure half of the fact extractor: schema, parsing, clamping, provenance, earned
authority (``tether.core.learning.extraction``)."""

from __future__ import annotations

import json
import typing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.core.learning import extraction as ex
from tether.core.learning.extraction import ExtractionError
from tether.core.sweep.packet import AUTHORITIES, KEY_PATTERN, Authority
from tether.records import ExtractionRequest, FactAuthority, SourceTurn

REQ = ExtractionRequest(instructions="x", source="y", sessions=("s1", "s2"))
TURNS = (
    SourceTurn(session="s1", turn=3, role="owner", text="Let's move the book club to  Tuesdays."),
    SourceTurn(
        session="s1", turn=4, role="assistant", text="Noted: the club meets on Tuesdays now."
    ),
    SourceTurn(session="s2", turn=1, role="owner", text="I like green tea."),
)


def page(*memories: object, folders: object = None) -> str:
    body: dict[str, object] = {"memories": list(memories)}
    if folders is not None:
        body["folders"] = folders
    return json.dumps(body)


def mem(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "text": "Book club is on Tuesdays",
        "subject": "owner",
        "entity": "book-club",
        "sessions": ["s1"],
    }
    base.update(kw)
    return base


def test_the_authority_literals_match_the_sweep_packet() -> None:
    assert typing.get_args(FactAuthority) == typing.get_args(Authority)
    assert set(typing.get_args(FactAuthority)) == set(AUTHORITIES)


def test_a_memory_citing_no_session_of_the_source_is_dropped_and_counted() -> None:
    draft = ex.parse_page(page(mem(sessions=["elsewhere"]), mem(sessions=[]), mem()), REQ)
    assert draft.dropped_provenance == 2
    assert [m.sessions for m in draft.memories] == [("s1",)]


def test_foreign_sessions_are_removed_from_a_memory_that_cites_one_of_ours() -> None:
    draft = ex.parse_page(page(mem(sessions=["x", "s2", "s2", "s1"])), REQ)
    assert draft.memories[0].sessions == ("s2", "s1")


def test_not_a_page_raises_with_a_reason() -> None:
    for bad in ("", "not json", "[1, 2]", '{"memories": 3}'):
        with pytest.raises(ExtractionError) as info:
            ex.parse_page(bad, REQ)
        assert info.value.reason == "malformed_output"


def test_bad_memories_are_dropped_one_by_one_and_the_bound_holds() -> None:
    req = ExtractionRequest(instructions="x", source="y", sessions=("s1",), max_memories=2)
    draft = ex.parse_page(
        page(mem(text="  "), mem(subject="!!!"), 7, mem(), mem(entity="b"), mem(entity="c")), req
    )
    assert len(draft.memories) == 2
    assert draft.dropped_invalid == 4


def test_slots_are_folded_to_keys_and_text_clamped() -> None:
    draft = ex.parse_page(
        page(mem(subject="The Owner", entity="Book Club!", text="a\x00b" * 900)), REQ
    )
    m = draft.memories[0]
    assert (m.subject, m.entity) == ("the-owner", "book-club")
    assert len(m.text) <= ex.MAX_TEXT
    assert "\x00" not in m.text


def test_an_owner_quote_found_verbatim_earns_direct_user_statement() -> None:
    quote = "move the book club to Tuesdays"
    draft = ex.parse_page(page(mem(quote=quote, first_turn=3, last_turn=4)), REQ)
    assert draft.ranges() == (("s1", 3, 4),)
    out = ex.finish(draft, REQ, TURNS)
    fact = out.facts[0]
    assert fact.authority == "direct_user_statement"
    assert (fact.provenance.quote_session, fact.provenance.quote_turn) == ("s1", 3)


def test_an_assistant_quote_earns_agent_reusable_conclusion() -> None:
    draft = ex.parse_page(page(mem(quote="the club meets on Tuesdays now")), REQ)
    assert ex.finish(draft, REQ, TURNS).facts[0].authority == "agent_reusable_conclusion"


def test_a_quote_not_in_a_cited_turn_earns_nothing_and_is_not_kept() -> None:
    for m in (
        mem(quote="I like green tea."),  # in s2, not cited
        mem(quote="move the book club to Mondays"),  # never said
        mem(quote="book club", first_turn=3, last_turn=3),  # too short: one word pair < 8? no
        mem(quote="Tuesdays"),  # one word
        mem(quote="move the book club to Tuesdays", first_turn=5, last_turn=9),  # outside range
        mem(),
    ):
        fact = ex.finish(ex.parse_page(page(m), REQ), REQ, TURNS).facts[0]
        if m.get("quote") == "book club":
            assert fact.authority == "direct_user_statement"  # 9 chars, two words: enough
            continue
        assert fact.authority == "sweep_inference", m
        assert fact.provenance.quote is None


def test_the_cap_bounds_what_a_quote_earns() -> None:
    req = ExtractionRequest(
        instructions="x",
        source="y",
        sessions=("s1",),
        cap="agent_reusable_conclusion",
        turns=TURNS,
        segment="seg-1",
    )
    fact = ex.finish(ex.parse_page(page(mem(quote="book club to Tuesdays")), req), req).facts[0]
    assert fact.authority == "agent_reusable_conclusion"
    assert fact.provenance.segment == "seg-1"


def test_folders_only_for_offered_sessions_first_wins() -> None:
    req = ExtractionRequest(
        instructions="x", source="y", sessions=("s1", "s2"), folder_sessions=("s1",)
    )
    draft = ex.parse_page(
        page(
            folders=[
                {"session": "s1", "folder": " Book / club "},
                {"session": "s1", "folder": "Other"},
                {"session": "s2", "folder": "Tea"},
                {"session": "s1"},
            ]
        ),
        req,
    )
    assert [(f.session, f.folder) for f in draft.folders] == [("s1", "Book club")]
    assert draft.folders_dropped == 3


def test_the_schema_names_the_sessions_and_asks_folders_only_when_offered() -> None:
    plain = ex.page_schema(sessions=["b", "a"])
    item = plain["properties"]["memories"]["items"]["properties"]["sessions"]["items"]
    assert item["enum"] == ["a", "b"]
    assert "folders" not in plain["properties"]
    with_folders = ex.page_schema(sessions=["a"], folder_sessions=["a"], max_memories=99)
    assert with_folders["required"] == ["memories", "folders"]
    assert with_folders["properties"]["memories"]["maxItems"] == ex.MAX_MEMORIES


def test_render_turns_heads_each_turn_with_what_a_memory_cites() -> None:
    text = ex.render_turns(TURNS, cap=80)
    assert text.startswith("[session s1 turn 3] owner: Let's move")
    assert len(text) <= 80


# -- properties --------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_memory = st.fixed_dictionaries(
    {
        "text": st.text(max_size=1200),
        "subject": st.text(max_size=80),
        "entity": st.text(max_size=80),
        "sessions": st.lists(st.sampled_from(["s1", "s2", "zz", ""]), max_size=10),
    },
    optional={"first_turn": _json, "last_turn": _json, "quote": st.text(max_size=50) | _json},
)


@given(st.lists(_memory | _json, max_size=40), st.integers(0, 40))
def test_any_page_parses_into_bounded_valid_records(memories: list[object], limit: int) -> None:
    req = ExtractionRequest(
        instructions="x",
        source="y",
        sessions=("s1", "s2"),
        max_memories=min(limit, 32),
        turns=TURNS,
    )
    draft = ex.parse_page(json.dumps({"memories": memories}), req)
    out = ex.finish(draft, req)
    assert len(out.facts) <= req.max_memories
    assert len(out.facts) + out.dropped_provenance + out.dropped_invalid == len(memories)
    import re

    for f in out.facts:
        assert re.fullmatch(KEY_PATTERN, f.subject)
        assert re.fullmatch(KEY_PATTERN, f.entity)
        assert f.text
        assert len(f.text) <= ex.MAX_TEXT
        assert f.provenance.sessions
        assert set(f.provenance.sessions) <= {"s1", "s2"}
        assert len(f.provenance.sessions) <= ex.MAX_SESSIONS
        if f.provenance.first_turn is not None:
            assert f.provenance.last_turn is not None
            assert 0 <= f.provenance.last_turn - f.provenance.first_turn < ex.MAX_TURN_SPAN
        if f.authority != "sweep_inference":
            assert f.provenance.quote is not None


@given(
    st.text(max_size=60),
    st.sampled_from(["owner", "assistant"]),
    st.sampled_from(list(AUTHORITIES)),
)
def test_authority_never_exceeds_what_the_quote_and_the_cap_allow(
    text: str, role: typing.Literal["owner", "assistant"], cap: FactAuthority
) -> None:
    turns = [SourceTurn(session="s1", turn=0, role=role, text=text)]
    quote = text.strip()
    authority, where = ex.earn(quote, ["s1"], first=None, last=None, turns=turns, cap=cap)
    assert ex.RANK[authority] <= ex.RANK[cap]
    if authority != "sweep_inference":
        assert where is not None
        assert ex.normalise(quote) in ex.normalise(where.text)
    if role == "assistant":
        assert authority != "direct_user_statement"
