"""The extractive path (``core.learning.statements``): the owner's plain first-person statements
as facts, and nothing from questions, hypotheticals, negations, reported speech, code,
tool output or anyone but the owner. Also the short form's pure half
(``core.learning.fact_list``) and the salvage of a reply cut at its token limit."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.core.learning.extraction import ExtractionError, salvage
from tether.core.learning.fact_list import list_schema, parse_list, runs
from tether.core.learning.statements import statements
from tether.records import ExtractionRequest, SourceTurn


def owner(text: str, turn: int = 1, session: str = "s1") -> SourceTurn:
    return SourceTurn(session=session, turn=turn, role="owner", text=text)


def said(text: str) -> list[tuple[str, str]]:
    return [(f.text, f.entity) for f in statements([owner(text)])]


@pytest.mark.parametrize(
    ("text", "fact", "entity"),
    [
        ("I'm allergic to peanuts.", "The owner is allergic to peanuts.", "allergy-peanuts"),
        (
            "We use pyarrow, not fastparquet.",
            "The owner and others use pyarrow, not fastparquet.",
            "uses-pyarrow",
        ),
        (
            "My sister's wedding is on 12 June.",
            "The owner's sister's wedding is on 12 June.",
            "sister-wedding",
        ),
        ("I prefer short replies.", "The owner prefers short replies.", "preference-short-replies"),
        (
            "Always answer in metric.",
            "The owner asks: Always answer in metric.",
            "instruction-answer-metric",
        ),
        ("My name is Ada Lovelace.", "The owner's name is Ada Lovelace.", "name"),
        ("I live in Berlin.", "The owner lives in Berlin.", "home"),
        ("I work at Acme Corp.", "The owner works at Acme Corp.", "employer"),
        (
            "I switched from vim to helix last month.",
            "The owner switched from vim to helix last month.",
            "switched-vim-helix",
        ),
        (
            "Last Monday, I taught vegan ice cream recipes on my cooking show!",
            "The owner taught vegan ice cream recipes on their cooking show.",
            "taught-vegan-ice",
        ),
    ],
)
def test_plain_statements_become_facts_with_a_slot(text: str, fact: str, entity: str) -> None:
    assert said(text) == [(fact, entity)]


@pytest.mark.parametrize(
    "text",
    [
        "Am I allergic to peanuts?",
        "Are you allergic to peanuts",  # a question without its mark
        "If I had a dog I would walk it every day.",
        "Maybe I should move to Berlin next year.",
        "I would love to live in Lisbon someday.",
        "I'm not allergic to peanuts.",
        "I don't use fastparquet anymore.",
        "I never drink coffee after noon.",
        'My boss said "we use pyarrow everywhere".',
        "She told me I work too much on weekends.",
        "> I live in Berlin and work at Acme.",  # quoted mail
        "```\nI live in Berlin with my cat\n```",
        "    I live in Berlin with my cat",  # an indented block
        "Traceback (most recent call last): I live in Berlin",
        "I ran `pip install pyarrow==15` on the box.",
        "We call foo(bar) in the main loop now.",
        "I think we use pyarrow for the exports.",
        "I appreciate your help with the migration.",  # about the listener
        "I can write the report tomorrow morning.",
        "If it rains tomorrow and I stay home all day with the kids.",
        "Thanks so much!",
        "My [private] is on 12 June.",
        "I live in [REDACTED:aws-key] these days.",
    ],
)
def test_what_must_not_become_a_fact(text: str) -> None:
    assert said(text) == []


def test_two_statements_in_one_sentence_are_two_facts() -> None:
    text = "Quick context: I'm allergic to peanuts, and we use pyarrow, not fastparquet."
    assert said(text) == [
        ("The owner is allergic to peanuts.", "allergy-peanuts"),
        ("The owner and others use pyarrow, not fastparquet.", "uses-pyarrow"),
    ]


def test_only_the_owners_turns_and_each_fact_cites_its_turn_and_quotes_it() -> None:
    turns = [
        SourceTurn(session="s1", turn=1, role="assistant", text="I live in Paris."),
        owner("Hi there. I live in Berlin. What's the weather like?", turn=2),
        SourceTurn(session="s1", turn=3, role="assistant", text="I'm allergic to cats."),
    ]
    [fact] = statements(turns, cap="agent_reusable_conclusion", segment="seg")
    assert fact.text == "The owner lives in Berlin."
    assert fact.authority == "agent_reusable_conclusion"  # never above the cap
    p = fact.provenance
    assert (p.sessions, p.first_turn, p.last_turn, p.segment) == (("s1",), 2, 2, "seg")
    assert (p.quote, p.quote_session, p.quote_turn) == ("I live in Berlin.", "s1", 2)
    [direct] = statements(turns)
    assert direct.authority == "direct_user_statement"


_VOCABULARY = (
    "I I'm my we our you not never if maybe would peanuts Berlin live work use prefer "
    "always allergic said told the a to in at from switched pyarrow ? . , ! ` { } ( ) "
    '" > # = \n'
)
_WORDS = st.sampled_from(_VOCABULARY.split(" "))
_TEXT = st.lists(_WORDS, max_size=40).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(_TEXT, min_size=1, max_size=4), roles=st.lists(st.booleans(), min_size=4))
def test_every_fact_is_an_owner_sentence_quoted_verbatim(
    texts: list[str], roles: list[bool]
) -> None:
    turns = [
        SourceTurn(session="s", turn=i, role="owner" if roles[i] else "assistant", text=t)
        for i, t in enumerate(texts)
    ]
    by_turn = {t.turn: t for t in turns}
    for fact in statements(turns):
        source = by_turn[fact.provenance.quote_turn or 0]
        assert source.role == "owner"
        assert fact.provenance.quote is not None
        assert fact.provenance.quote in source.text
        assert "?" not in fact.provenance.quote
        assert "`" not in fact.provenance.quote
        assert '"' not in fact.provenance.quote
        assert fact.entity
        assert len(fact.entity) <= 64


@settings(max_examples=200, deadline=None)
@given(text=_TEXT)
def test_a_sentence_in_a_code_fence_or_a_question_never_gives_a_fact(text: str) -> None:
    assert statements([owner(f"```\n{text}\n```")]) == ()
    one_sentence = " ".join(w for w in text.split() if w not in {".", "!", "?", "\n"})
    assert statements([owner(f"{one_sentence}?")]) == ()


# -- the short form ----------------------------------------------------------------------


def request(*turns: SourceTurn) -> ExtractionRequest:
    return ExtractionRequest(instructions="", source="", sessions=("s1",), turns=turns)


def test_a_listed_fact_is_grounded_and_re_anchored_to_the_turn_that_says_it() -> None:
    turns = (
        owner("Hello!", turn=1),
        owner("We moved the book club to Tuesdays at the library.", turn=2),
        SourceTurn(session="s1", turn=3, role="assistant", text="Tuesdays at the library."),
    )
    reply = json.dumps(
        {
            "facts": [
                {"turn": 1, "fact": "We moved the book club to Tuesdays."},  # miscounted
                {"turn": 2, "fact": "The owner owns three horses in Texas."},  # invented
                {"turn": 2, "fact": "Mel"},  # says nothing
            ]
        }
    )
    draft = parse_list(reply, request(*turns))
    [m] = draft.memories
    assert (m.first_turn, m.last_turn, m.sessions) == (2, 2, ("s1",))
    assert m.quote == "We moved the book club to Tuesdays."
    assert draft.dropped_invalid == 2
    schema = list_schema([t.turn for t in turns if t.role == "owner"])
    assert schema["properties"]["facts"]["items"]["properties"]["turn"]["enum"] == [1, 2]


def test_a_reply_that_is_no_list_at_all_is_malformed() -> None:
    with pytest.raises(ExtractionError) as err:
        parse_list("Sure! The club is on Tuesdays.", request(owner("x")))
    assert err.value.reason == "malformed_output"


def test_runs_keep_order_and_leave_out_runs_without_an_owner_turn() -> None:
    turns = [
        SourceTurn(session="s", turn=1, role="assistant", text="a" * 100),
        owner("b" * 100, turn=2),
        owner("c" * 100, turn=3),
    ]
    assert [[t.turn for t in r] for r in runs(turns, 130)] == [[2], [3]]
    assert [[t.turn for t in r] for r in runs(turns, 10_000)] == [[1, 2, 3]]


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(
        st.fixed_dictionaries({"turn": st.integers(0, 99), "fact": st.text(max_size=30)}),
        max_size=6,
    ),
    data=st.data(),
)
def test_a_reply_cut_anywhere_salvages_a_prefix_of_its_items(
    items: list[dict[str, object]], data: st.DataObject
) -> None:
    whole = json.dumps({"facts": items})
    cut = data.draw(st.integers(0, len(whole)))
    fixed = salvage(whole[:cut])
    if fixed is None:
        return
    value = json.loads(fixed)
    if cut == len(whole):
        assert value == {"facts": items}
    else:
        assert value["facts"] == items[: len(value["facts"])]
