"""Session and epoch summaries as recall units (``core.recall.summaries``): a session's digest and
each compaction's summary are hits that carry the turns they cover; they are kept up to
date as a session grows (never duplicated, also through a re-index), a caller opens them
(``session show --turns``, the MCP ``read`` of their link), and they leave the top k to
turns for a question about one fact."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import Ticker
from daemon_helpers import tether
from tether.core.mcp import link_of
from tether.core.recall import summaries
from tether.daemon.compose import Runtime
from tether.memory import recall as recall_module
from tether.memory.indexer import index_home, reindex
from tether.memory.recall import recall
from tether.ports import Store
from tether.records import Assistant, Baseline, LogRow, ToolResult, User
from tether.sessions import Session
from tether.testing.fake_llama import FakeLlama, Reply

NOW = datetime(2026, 12, 1, tzinfo=UTC)
BASE = Baseline(system="You are tether.", memory="")
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)

TRIP = (
    "I want to plan a trip to Lisbon in May",
    "Let's compare flights from Berlin to Lisbon",
    "We decided to go with the night train instead of flying",
    "TODO: book the hotel near Alfama before Friday",
)


def _lines(sid: str, said: tuple[str, ...], start: datetime) -> str:
    out = []
    for n, text in enumerate(said):
        at = start + timedelta(minutes=2 * n)
        out.append({"session": sid, "role": "user", "text": text, "time": at.isoformat()})
        reply = {"session": sid, "role": "assistant", "text": "Noted.", "time": ""}
        reply["time"] = (at + timedelta(minutes=1)).isoformat()
        out.append(reply)
    return "".join(json.dumps(x) + "\n" for x in out)


def _import(home: Path, text: str, name: str) -> None:
    src = home.parent / name
    src.write_text(text, encoding="utf-8")
    out = tether(home, "sessions", "import", str(src))
    assert out.returncode == 0, out.stderr


def _units(home: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(home / "tether.db") as db:
        rows = db.execute(
            "SELECT ref, text FROM doc WHERE kind = 'summary' AND ref IS NOT NULL ORDER BY ref"
        ).fetchall()
    return [(str(r), str(t)) for r, t in rows]


def _recall_json(home: Path, query: str, *more: str) -> list[dict[str, object]]:
    out = tether(home, "memory", "recall", query, "--json", *more)
    assert out.returncode == 0, out.stderr
    hits: list[dict[str, object]] = json.loads(out.stdout)
    return hits


def test_a_sessions_digest_is_a_hit_that_names_its_turns_and_opens_them(home: Path) -> None:
    _import(home, _lines("trip", TRIP, T0), "trip.jsonl")
    hits = _recall_json(home, "Lisbon trip train hotel", "-k", "8")
    [unit] = [h for h in hits if h["kind"] == "session-summary"]
    assert unit["session"] == "trip"
    assert unit["turn"] is None
    assert (unit["first_turn"], unit["last_turn"], unit["epoch"]) == (1, 4, None)
    assert unit["first_time"] == "2026-03-02T10:00:00Z"
    assert unit["time"] == "2026-03-02T10:07:00Z"  # its last turn's reply
    assert unit["first_date"] == unit["date"] == "2026-03-02"
    text = str(unit["text"])
    assert text.startswith("about: I want to plan a trip to Lisbon in May")
    # the newest requests (core.checkpoints.digest: a line is taken once, as asked before decided)
    assert text.splitlines()[1:] == [f"asked: {said}" for said in TRIP[1:]]
    # every other hit keeps the shape it had: no range keys on a turn
    assert all("first_turn" not in h for h in hits if h["kind"] == "turn")

    listing = tether(home, "memory", "recall", "Lisbon trip train hotel", "-k", "8").stdout
    assert any("trip#1-4" in line for line in listing.splitlines())
    shown = tether(home, "session", "show", "trip", "--turns", "3-4")
    assert shown.returncode == 0, shown.stderr
    said = [line.split(": ", 1)[1] for line in shown.stdout.splitlines()]
    assert said == [TRIP[2], "Noted.", TRIP[3], "Noted."]
    as_json = json.loads(tether(home, "session", "show", "trip", "--turns", "2", "--json").stdout)
    assert [(m["turn"], m["role"]) for m in as_json] == [(2, "owner"), (2, "agent")]


def test_a_bad_turn_range_is_refused_with_exit_2(home: Path) -> None:
    _import(home, _lines("trip", TRIP, T0), "trip.jsonl")
    out = tether(home, "session", "show", "trip", "--turns", "4-2")
    assert out.returncode == 2
    assert "--turns: '4-2'" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_growing_session_keeps_one_digest_up_to_date_through_a_reindex(home: Path) -> None:
    _import(home, _lines("trip", TRIP, T0), "trip.jsonl")
    assert [ref for ref, _ in _units(home)] == ["summary:trip:1-4"]
    more = ("Also book a fado show in the Alfama on Saturday",)
    _import(home, _lines("trip", more, T0 + timedelta(days=1)), "more.jsonl")
    [(ref, text)] = _units(home)
    assert ref == "summary:trip:1-5"
    assert "asked: Also book a fado show in the Alfama on Saturday" in text
    hits = _recall_json(home, "fado show Alfama")
    assert [(h["first_turn"], h["last_turn"]) for h in hits if h["turn"] is None] == [(1, 5)]
    assert tether(home, "memory", "reindex").returncode == 0
    assert _units(home) == [(ref, text)]
    assert tether(home, "memory", "recall", "fado").returncode == 0  # an idle catch-up pass
    assert _units(home) == [(ref, text)]


def test_short_sessions_get_no_digest(home: Path) -> None:
    _import(home, _lines("short", TRIP[:2], T0), "short.jsonl")
    assert _units(home) == []


def _turn(s: Session, tick: Ticker, user: str, reply: str) -> None:
    s.append(User(time=tick(), text=user), Assistant(time=tick(), text=reply))


def test_each_compaction_summary_is_a_unit_of_its_epochs_turns(
    home: Path, tick: Ticker, any_store: Store
) -> None:
    s = Session.create(home, "s1", baseline=BASE, slot=0, time=tick())
    _turn(s, tick, "I adopted a cat named Milo in March", "Congratulations on Milo!")
    _turn(s, tick, "What should I cook tonight?", "Try a mushroom risotto.")
    index_home(home, any_store)  # the epoch indexed before it ends
    s.end_epoch(summary="The owner adopted Milo, a cat; dinner ideas.", baseline=BASE, time=tick())
    _turn(s, tick, "Book the dentist for Tuesday", "Booked for Tuesday at 9.")
    s.end_epoch(summary="A dentist appointment on Tuesday.", baseline=BASE, time=tick())
    _turn(s, tick, "any news about the garden?", "none yet")
    index_home(home, any_store)

    hits = recall(any_store, "Milo the cat", 5, time=NOW)
    assert (hits[0].session, hits[0].turn) == ("s1", 1)
    epoch = next(h for h in hits if h.kind == "epoch-summary")
    assert (epoch.epoch, epoch.first_turn, epoch.last_turn) == (0, 1, 2)
    assert epoch.text == "The owner adopted Milo, a cat; dinner ideas."
    assert epoch.first_time is not None
    assert epoch.time is not None
    assert epoch.first_time < epoch.time
    assert link_of(epoch.ref) == "tether://turn:s1:1-2"
    dentist = [h for h in recall(any_store, "dentist", 5, time=NOW) if h.kind == "epoch-summary"]
    assert [(h.epoch, h.first_turn, h.last_turn) for h in dentist] == [(1, 3, 3)]

    index_home(home, any_store)  # nothing new: the units stay as they are
    reindex(home, any_store)
    units = [
        h.ref
        for h in recall(any_store, "Milo dinner dentist garden cat", 10, time=NOW)
        if h.turn is None
    ]
    assert sorted(units) == ["summary:s1:1-4", "summary:s1:e0:1-2", "summary:s1:e1:3-3"]


def test_the_mcp_hit_of_a_unit_links_its_turns_and_reads_them(home: Path) -> None:
    from tether.mcp.service import Caller, Memory
    from tether.stores.sqlite import SqliteStore

    _import(home, _lines("trip", TRIP, T0), "trip.jsonl")
    with SqliteStore(home / "tether.db") as store:
        memory = Memory(home, store, None, result_tokens=4000, now=lambda: NOW)
        local = Caller("local", trusted=True)
        found = json.loads(memory.recall(local, "Lisbon trip train hotel", 8, "turns"))["hits"]
        [unit] = [h for h in found if h["kind"] == "session-summary"]
        assert unit["link"] == "tether://turn:trip:1-4"
        assert (unit["turns"], unit["since"]) == ("1-4", "2026-03-02T10:00:00Z")
        read = memory.read(local, unit["link"])
    assert "night train" in read
    assert "Alfama" in read


def test_units_leave_the_top_k_to_turns_for_a_single_fact(
    home: Path, tick: Ticker, any_store: Store
) -> None:
    for n in range(4):  # four sessions that all talk about the garden
        s = Session.create(home, f"g{n}", baseline=BASE, slot=0, time=tick())
        for said in ("the garden tomatoes", "garden beds and garden soil", "garden hose"):
            _turn(s, tick, f"{said} in week {n}", "ok, garden noted")
    index_home(home, any_store)
    hits = recall(any_store, "garden", 6, time=NOW)
    assert sum(h.turn is None for h in hits) <= recall_module.SUMMARY_SLOTS
    assert hits[0].turn is not None
    for n, unit in enumerate(hits):  # no unit below a turn it covers: that turn leads there
        if unit.first_turn is not None and unit.last_turn is not None:
            assert not any(
                h.session == unit.session and unit.first_turn <= (h.turn or 0) <= unit.last_turn
                for h in hits[:n]
            )
    old = recall_module.SUMMARY_WEIGHT
    recall_module.SUMMARY_WEIGHT = 0.0
    try:
        assert all(h.turn is not None for h in recall(any_store, "garden", 20, time=NOW))
    finally:
        recall_module.SUMMARY_WEIGHT = old


def _row(turn: int, field: str, text: str) -> LogRow:
    return LogRow(
        session="s",
        epoch=0,
        turn=turn,
        field="user" if field == "user" else "assistant",
        text=text,
        tainted=False,
        time=T0 + timedelta(minutes=turn),
    )


@given(
    session=st.from_regex(r"[a-z0-9-]{1,64}", fullmatch=True),
    epoch=st.none() | st.integers(0, 10**6),
    first=st.integers(1, 10**9),
    length=st.integers(0, 10**6),
)
def test_a_units_ref_names_its_span_and_nothing_else_parses(
    session: str, epoch: int | None, first: int, length: int
) -> None:
    span = summaries.Span(session, epoch, first, first + length)
    assert summaries.span_of(span.ref) == span
    assert summaries.span_of(f"turn:{session}:{first}") is None
    assert summaries.span_of(f"note:{first}") is None


def test_the_digest_reads_its_first_turn_and_the_newest_only() -> None:
    first = [_row(1, "user", "Let us plan the kitchen renovation together")]
    recent = [_row(t, "user", f"Step {t}: we chose oak cabinets instead of pine") for t in (8, 9)]
    unit = summaries.session_unit("s", first, recent, 9)
    assert unit is not None
    assert unit.span == summaries.Span("s", None, 1, 9)
    assert unit.text.splitlines()[0] == "about: Let us plan the kitchen renovation together"
    assert unit.time == T0 + timedelta(minutes=9)
    assert summaries.session_unit("s", [], [_row(1, "assistant", "hello there you")], 5) is None


@pytest.mark.anyio
async def test_the_agents_recall_tool_names_a_units_turns(
    rt: Runtime, fake: FakeLlama, tick: Ticker
) -> None:
    s = Session.create(rt.home, "trip", baseline=BASE, slot=0, time=tick())
    _turn(s, tick, "Flights from Berlin to Lisbon on May 3", "Booked.")
    _turn(s, tick, "A hotel near Alfama for four nights", "Booked too.")
    s.end_epoch(
        summary="The owner's Portugal itinerary: flights, hotel.", baseline=BASE, time=tick()
    )
    index_home(rt.home, rt.store)  # as the daemon does after a session's turns
    fake.script(Reply(tool_calls=[("recall", {"query": "itinerary"})]))
    fake.script(Reply(content="Found it."))
    await rt.agent.run_turn("chat", "what was my itinerary?")
    result = next(r for r in Session.open(rt.home, "chat").records if isinstance(r, ToolResult))
    assert (
        "epoch-summary (session trip turns 1-2): The owner's Portugal itinerary" in result.content
    )
