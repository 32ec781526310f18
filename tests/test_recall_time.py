"""Time in recall: hits carry their date, ``--timeline`` orders them, ``--as-of`` recalls as
memory stood then, a question naming only a day gets that day's turns; and the pure parts
(``core.recall.timeline``, the days ``core.recall.periods`` reads) property-tested."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon_helpers import tether
from tether.core.recall import standing, timeline
from tether.core.recall.periods import find_period
from tether.errors import BadInputError
from tether.imports.jsonl import import_jsonl
from tether.memory.recall import recall
from tether.stores.sqlite import SqliteStore

NOW = datetime(2026, 12, 1, tzinfo=UTC)
#: (session, owner's words, when); each gets a one-line reply a few seconds later.
HISTORY = (
    ("a1", "I bought a red bicycle at the market", "2026-03-02T10:00:00Z"),
    ("b2", "The bicycle chain broke on my morning ride", "2026-05-10T09:00:00Z"),
    ("c3", "I sold the bicycle to my neighbour Ana", "2026-08-20T18:00:00Z"),
    ("d4", "We planned the garden and the tomato beds", "2026-05-10T15:00:00Z"),
    ("e5", "Booked the dentist for a checkup", "2026-05-11T08:00:00Z"),
)


def _lines() -> str:
    out = []
    for sid, said, when in HISTORY:
        reply = (datetime.fromisoformat(when) + timedelta(seconds=5)).isoformat()
        out.append({"session": sid, "role": "user", "text": said, "time": when})
        out.append({"session": sid, "role": "assistant", "text": "Noted.", "time": reply})
    return "".join(json.dumps(x) + "\n" for x in out)


@pytest.fixture
def dated(home: Path) -> Path:
    """A home holding ``HISTORY``, brought in the way ``tether sessions import`` does."""
    src = home.parent / "history.jsonl"
    src.write_text(_lines(), encoding="utf-8")
    import_jsonl(home, src, now=NOW, store=lambda: closing(SqliteStore(home / "tether.db")))
    return home


@pytest.fixture
def store(dated: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(dated / "tether.db")
    yield s
    s.close()


def test_every_hit_carries_its_date_in_text_and_json(dated: Path) -> None:
    out = tether(dated, "memory", "recall", "bicycle", "--json")
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)
    by_session = {h["session"]: h for h in hits}
    assert by_session["b2"]["date"] == "2026-05-10"
    assert by_session["b2"]["time"] == "2026-05-10T09:00:00Z"
    assert set(by_session) == {"a1", "b2", "c3"}
    text = tether(dated, "memory", "recall", "bicycle").stdout.splitlines()
    assert any("c3#1" in line and "2026-08-20" in line for line in text)


def test_timeline_returns_the_hits_oldest_first(dated: Path) -> None:
    ranked = json.loads(tether(dated, "memory", "recall", "bicycle neighbour", "--json").stdout)
    out = tether(dated, "memory", "recall", "bicycle neighbour", "--json", "--timeline")
    assert out.returncode == 0, out.stderr
    ordered = json.loads(out.stdout)
    assert [h["session"] for h in ordered] == ["a1", "b2", "c3"]
    assert ranked[0]["session"] == "c3"  # by rank, the turn naming the neighbour leads
    assert sorted(map(json.dumps, ranked)) == sorted(map(json.dumps, ordered))


def test_as_of_leaves_out_what_was_written_later(dated: Path) -> None:
    out = tether(dated, "memory", "recall", "bicycle", "--json", "--as-of", "2026-05-10")
    assert out.returncode == 0, out.stderr
    assert {h["session"] for h in json.loads(out.stdout)} == {"a1", "b2"}
    # the day given is whole: the evening of the same day is in too
    evening = tether(dated, "memory", "recall", "garden", "--json", "--as-of", "2026-05-10")
    assert [h["session"] for h in json.loads(evening.stdout)] == ["d4"]
    before = tether(dated, "memory", "recall", "garden", "--as-of", "2026-05-10T12:00:00Z")
    assert before.stdout.strip() == "no matches"


def test_as_of_is_the_now_of_the_periods_a_question_names(dated: Path) -> None:
    out = tether(
        dated, "memory", "recall", "what did we talk about yesterday", "--json",
        "--as-of", "2026-05-11",
    )  # fmt: skip
    assert {h["session"] for h in json.loads(out.stdout)} == {"b2", "d4"}


@pytest.mark.parametrize("bad", ["nope", "2026-13-01", "yesterday"])
def test_a_bad_as_of_is_refused_with_exit_2(dated: Path, bad: str) -> None:
    out = tether(dated, "memory", "recall", "bicycle", "--as-of", bad)
    assert out.returncode == 2
    assert f"--as-of: {bad!r}" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_question_naming_only_a_day_gets_that_days_turns_in_order(
    store: SqliteStore,
) -> None:
    hits = recall(store, "What did we talk about on May 10, 2026?", 5, time=NOW)
    assert [(h.session, h.turn) for h in hits] == [("b2", 1), ("d4", 1)]
    # a subject named with the day is ranked by its words, the day only lifting
    found = recall(store, "the tomato beds on May 10", 5, time=NOW)
    assert found[0].session == "d4"


def test_until_keeps_recall_to_what_was_written_before(store: SqliteStore) -> None:
    until = datetime(2026, 5, 1, tzinfo=UTC)
    hits = recall(store, "bicycle", 5, time=until, until=until)
    assert [h.session for h in hits] == ["a1"]
    # a day named after ``until`` lists nothing of it
    day = recall(store, "what did we talk about on May 10, 2026", 5, time=until, until=until)
    assert day == []


# -- the pure parts ---------------------------------------------------------------------

nows = st.datetimes(
    min_value=datetime(1990, 1, 1), max_value=datetime(2090, 12, 31), timezones=st.just(UTC)
)


@settings(max_examples=200, deadline=None)
@given(st.dates(min_value=date(1990, 1, 1), max_value=date(2090, 12, 31)), nows)
def test_a_day_named_with_its_year_is_that_day(day: date, now: datetime) -> None:
    for text in (
        f"what did we discuss on {day:%B} {day.day}, {day.year}?",
        f"on the {day.day}th of {day:%B} {day.year}",
        f"notes from {day.isoformat()}",
    ):
        p = find_period(text, now)
        assert p is not None, text
        assert (p.start.date(), p.end - p.start) == (day, timedelta(days=1)), text


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.integers(1, 28), nows)
def test_a_day_without_a_year_is_the_latest_not_after_today(
    month: int, number: int, now: datetime
) -> None:
    p = find_period(f"on {date(2001, month, number):%B} {number}", now)
    assert p is not None
    day = p.start.date()
    assert (day.month, day.day) == (month, number)
    assert day <= now.date() < date(day.year + 1, month, number)


@settings(max_examples=300, deadline=None)
@given(st.text(), nows)
def test_intent_takes_any_text(text: str, now: datetime) -> None:
    asked = timeline.intent(text, now)
    assert not asked.listing or asked.period is not None


@pytest.mark.parametrize(
    ("text", "listing", "order", "aggregate"),
    [
        ("What did we talk about on May 30?", True, False, False),
        ("what happened last week", True, False, False),
        ("what did I buy last week", False, False, False),
        ("Which device did I get first, the phone or the laptop?", False, True, False),
        ("How many days passed between the move and the party?", False, True, True),
        ("How many plants did I buy in March?", False, False, True),
        ("Which streaming service did I use most recently?", False, True, False),
        ("how has my running developed", False, False, True),
        ("where is my passport", False, False, False),
    ],
)
def test_what_a_question_asks_of_time(
    text: str, listing: bool, order: bool, aggregate: bool
) -> None:
    asked = timeline.intent(text, datetime(2023, 6, 7, tzinfo=UTC))
    assert (asked.listing, asked.order, asked.aggregate) == (listing, order, aggregate)


sessions = st.lists(st.sampled_from(["a", "b", "c", None]), max_size=30)


@given(sessions, st.integers(1, 4))
def test_spread_keeps_every_item_and_caps_each_session_first(
    of: list[str | None], cap: int
) -> None:
    ranked = list(enumerate(of))  # (rank, session)
    out = timeline.spread(ranked, lambda i: i[1], cap)
    assert sorted(out) == ranked
    held = sum(max(0, of.count(s) - cap) for s in "abc")
    first, later = out[: len(out) - held], out[len(out) - held :]
    for s in "abc":
        assert sum(1 for i in first if i[1] == s) == min(cap, of.count(s))
    assert first == sorted(first)
    assert later == sorted(later)


@given(st.lists(st.one_of(st.none(), nows), max_size=20))
def test_chronological_is_oldest_first_and_undated_last(times: list[datetime | None]) -> None:
    tagged = list(enumerate(times))
    out = timeline.chronological(tagged, lambda t: t[1], lambda t: f"{t[0]:03d}")
    assert sorted(out, key=lambda t: t[0]) == tagged
    dated = [t[1] for t in out if t[1] is not None]
    assert dated == sorted(dated)
    assert out[len(dated) :] == [t for t in tagged if t[1] is None]


# -- standing instructions ----------------------------------------------------------------


def _home_with(home: Path, lines: list[tuple[str, str, str]]) -> SqliteStore:
    src = home.parent / "said.jsonl"
    src.write_text(
        "".join(
            json.dumps({"session": sid, "role": "user", "text": said, "time": when}) + "\n"
            for sid, said, when in lines
        ),
        encoding="utf-8",
    )
    import_jsonl(home, src, now=NOW, store=lambda: closing(SqliteStore(home / "tether.db")))
    return SqliteStore(home / "tether.db")


def test_a_request_finds_the_instruction_it_depends_on(home: Path) -> None:
    said = [
        ("rule", "From now on, give me distances in metric units, never miles.", "2026-02-01"),
        *((f"trip{n}", f"The drive to Boston took {n} hours by car", f"2026-03-{n:02d}")
          for n in range(1, 13)),
        ("later", "I moved the rule to the fridge door", "2026-06-01"),
    ]  # fmt: skip
    with closing(_home_with(home, [(s, t, w + "T10:00:00Z") for s, t, w in said])) as store:
        asked = recall(store, "How far is Boston from New York by car?", 5, time=NOW)
        assert [h.session for h in asked][-1] == "rule"  # the last place, words first
        assert {h.session for h in asked[:4]} <= {f"trip{n}" for n in range(1, 13)}
        # a question that asks for nothing gets only what its words find
        told = recall(store, "When did I drive to Boston by car?", 5, time=NOW)
        assert "rule" not in {h.session for h in told}
        # nor does a request asked before the instruction was given
        early = datetime(2026, 1, 15, tzinfo=UTC)
        before = recall(store, "How far is Boston from New York by car?", 5, time=early)
        assert "rule" not in {h.session for h in before}


@pytest.mark.parametrize(
    ("text", "standing_"),
    [
        ("From now on, answer in French.", True),
        ("Please always show prices in euros.", True),
        ("I prefer short replies.", True),
        ("Keep in mind that my knee is injured.", True),
        ("I always forget my keys.", False),
        ("The ferry never came.", False),
    ],
)
def test_what_states_a_standing_instruction(text: str, standing_: bool) -> None:
    assert standing.is_standing(text) is standing_


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Can you suggest a hotel in Miami?", True),
        ("Write me a function that sorts lines.", True),
        ("How far is it to Lyon?", True),
        ("What should I cook tonight?", True),
        ("Where did I park the car?", False),
        ("How many plants did I buy?", False),
    ],
)
def test_what_is_a_request(text: str, asks: bool) -> None:
    assert standing.is_request(text) is asks


@given(st.text(), st.text())
def test_the_standing_checks_take_any_text(question: str, text: str) -> None:
    standing.is_standing(text)
    standing.is_request(question)
    assert standing.shared_stems(question, text) == standing.shared_stems(text, question)


def test_the_mcp_recall_tool_gives_times_and_lists_in_time_order(
    dated: Path, store: SqliteStore
) -> None:
    from tether.mcp.service import Caller, Memory

    memory = Memory(dated, store, None, result_tokens=4000, now=lambda: NOW)
    local = Caller("local", trusted=True)
    ranked = json.loads(memory.recall(local, "bicycle neighbour", 5, "turns"))["hits"]
    timed = json.loads(memory.recall(local, "bicycle neighbour", 5, "turns", order="time"))
    assert [h["id"] for h in timed["hits"]] == ["turn:a1:1", "turn:b2:1", "turn:c3:1"]
    assert timed["hits"][1]["time"] == "2026-05-10T09:00:00Z"
    assert ranked[0]["id"] == "turn:c3:1"
    with pytest.raises(BadInputError, match="level turns"):
        memory.recall(local, "bicycle", 5, "sessions", order="time")
