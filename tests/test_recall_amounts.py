"""Questions about money: the turns where the owner stated a sum come first among those
found (``core.recall.amounts``), through ``recall`` on a real store and property-tested."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.core.recall import amounts, ranking
from tether.imports.jsonl import import_jsonl
from tether.memory.recall import recall
from tether.records import Found, LogField
from tether.stores.sqlite import SqliteStore

NOW = datetime(2026, 12, 1, tzinfo=UTC)
#: (session, owner's words, the reply); a day apart.
HISTORY = (
    (
        "w1",
        "The writing workshop was great, the workshop instructor loved my workshop story",
        "Nice.",
    ),
    ("w2", "I went to a photography workshop in March, $200 for the day", "Sounds fun."),
    (
        "w3",
        "Can you suggest a workshop on marketing? The workshop should be online",
        "Try these: $49 each.",
    ),
)


@pytest.fixture
def store(home: Path) -> Iterator[SqliteStore]:
    lines = []
    for n, (sid, said, reply) in enumerate(HISTORY):
        when = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(days=n)
        lines.append({"session": sid, "role": "user", "text": said, "time": when.isoformat()})
        later = (when + timedelta(seconds=5)).isoformat()
        lines.append({"session": sid, "role": "assistant", "text": reply, "time": later})
    src = home.parent / "history.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    import_jsonl(home, src, now=NOW, store=lambda: closing(SqliteStore(home / "tether.db")))
    s = SqliteStore(home / "tether.db")
    yield s
    s.close()


def test_a_question_about_money_gets_the_turn_that_states_the_sum_first(
    store: SqliteStore,
) -> None:
    asked = recall(store, "How much money did I spend on workshops?", 3, time=NOW)
    assert asked[0].session == "w2"
    # the same words without asking for a sum rank by the words alone
    plain = recall(store, "workshops", 3, time=NOW)
    assert plain[0].session == "w1"


@pytest.mark.parametrize(
    ("question", "money"),
    [
        ("How much total money did I spend on attending workshops?", True),
        ("What is the total cost of the new food bowl I got for Max?", True),
        ("What is the total amount I spent on gifts for my brother?", True),
        ("How much did I earn at the Downtown Farmers Market?", True),
        ("How many days did I spend on my camping trip?", False),
        ("How many weeks in total did I spend reading?", False),
        ("How much weight have I lost?", False),
        ("What did I buy for my brother?", False),
    ],
)
def test_which_questions_ask_for_a_sum(question: str, money: bool) -> None:
    assert amounts.asks_amount(question) is money


def _turn(session: str, score: float, owner: str, reply: str = "ok") -> ranking.Scored:
    said: tuple[tuple[LogField, str], ...] = (("user", owner), ("assistant", reply))
    rows = tuple(
        Found(
            id=n,
            kind="turn",
            session=session,
            turn=1,
            field=field,
            tainted=False,
            ref=f"turn:{session}:1",
            time=NOW,
            text=text,
            score=score,
        )
        for n, (field, text) in enumerate(said)
    )
    return ranking.Scored(key=(session, 1), score=score, best=rows[0], rows=rows)


def test_only_the_owners_sum_lifts_a_turn() -> None:
    turns = [
        _turn("a", 3.0, "the workshop"),
        _turn("b", 2.0, "the workshop", reply="it costs $40"),
        _turn("c", 1.6, "I paid $20 for the workshop"),
    ]
    assert [t.key[0] for t in amounts.lift(turns, 1.0)] == ["c", "a", "b"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 100.0), st.sampled_from(["plain words", "I paid $5", "30 dollars"])
        ),
        max_size=12,
    ),
    st.floats(0.0, 3.0),
    st.text(max_size=80),
)
def test_the_lift_keeps_every_turn_and_lowers_none(
    specs: list[tuple[float, str]], by: float, question: str
) -> None:
    amounts.asks_amount(question)  # any text
    turns = [_turn(f"s{n}", score, owner) for n, (score, owner) in enumerate(specs)]
    out = amounts.lift(turns, by)
    assert sorted(t.key for t in out) == sorted(t.key for t in turns)
    before = {t.key: t.score for t in turns}
    assert all(t.score >= before[t.key] for t in out)
    assert [t.score for t in out] == sorted((t.score for t in out), reverse=True)
