"""Indexing session logs and recalling from them: epochs, taint, summaries, increments."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import Ticker
from tether.core.recall import query
from tether.errors import BadInputError
from tether.files import encode_records
from tether.home import init_home
from tether.memory.indexer import index_home, reindex
from tether.memory.recall import recall, recall_sessions
from tether.records import (
    Assistant,
    Baseline,
    Hit,
    LogRecord,
    Page,
    ToolCall,
    ToolResult,
    ToolSummary,
    User,
)
from tether.sessions import Session
from tether.stores.sqlite import SqliteStore

BASE = Baseline(system="You are tether.", memory="")
NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def store(home: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(home / "tether.db")
    yield s
    s.close()


def new(home: Path, tick: Ticker, sid: str = "s1") -> Session:
    return Session.create(home, sid, baseline=BASE, slot=0, time=tick())


def turn(s: Session, tick: Ticker, user: str, reply: str) -> None:
    s.append(User(time=tick(), text=user), Assistant(time=tick(), text=reply))


def where(hits: Sequence[Hit]) -> list[tuple[str | None, int | None, str]]:
    return [(h.session, h.turn, h.tag) for h in hits]


def test_recall_finds_an_earlier_epoch_with_session_turn_numbers(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    s = new(home, tick)
    turn(s, tick, "I adopted a cat named Milo in March", "Congratulations on Milo!")
    turn(s, tick, "What should I cook tonight?", "Try a mushroom risotto.")
    s.end_epoch(summary="cat and dinner", baseline=BASE, time=tick())
    turn(s, tick, "Book the dentist for Tuesday", "Booked for Tuesday at 9.")
    s.end_epoch(summary="dentist", baseline=BASE, time=tick())
    turn(s, tick, "any news?", "none")

    report = index_home(home, store)
    assert report.errors == ()
    assert report.files == 3

    hits = recall(store, "When did I adopt my cat?", 3, time=NOW)
    assert where(hits)[0] == ("s1", 1, "memory")
    assert hits[0].text == "I adopted a cat named Milo in March"
    dentist = recall(store, "dentist appointment", 3, time=NOW)
    assert [where([h])[0] for h in dentist if h.turn is not None] == [("s1", 3, "memory")]
    # the others are summary units: epoch 1's compaction summary ("dentist") covers turn 3
    # alone, the session's digest all four
    assert {(h.kind, h.epoch, h.first_turn, h.last_turn) for h in dentist if h.turn is None} == {
        ("epoch-summary", 1, 3, 3),
        ("session-summary", None, 1, 4),
    }
    assert where(recall(store, "risotto", 3, time=NOW)) == [("s1", 2, "memory")]


def test_a_question_finds_the_turn_that_answers_it(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    a = new(home, tick, "garden")
    turn(a, tick, "The tomatoes need watering every morning", "I'll remind you at 7.")
    turn(a, tick, "Plant the basil next to the tomatoes", "Good companions.")
    b = new(home, tick, "travel")
    turn(b, tick, "We booked the Lantern restaurant in Lisbon for Friday", "Enjoy Lisbon!")
    turn(b, tick, "My flight to Lisbon leaves from gate 12", "Noted.")
    c = new(home, tick, "work")
    turn(c, tick, "The database migration is scheduled for the 14th", "I'll track it.")
    index_home(home, store)

    top = recall(store, "What's the name of the restaurant we booked in Lisbon?", 3, time=NOW)
    assert (top[0].session, top[0].turn) == ("travel", 1)
    assert "Lantern" in top[0].text
    top = recall(store, "when is the database migrating?", 3, time=NOW)
    assert (top[0].session, top[0].turn) == ("work", 1)
    top = recall(store, "how often do the tomatoes get water?", 3, time=NOW)
    assert (top[0].session, top[0].turn) == ("garden", 1)


def test_tainted_rows_are_tagged_and_taint_spans_epochs(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    s = new(home, tick)
    turn(s, tick, "otters before the fetch", "otters are fine")
    s.append(
        User(time=tick(), text="fetch that page"),
        ToolCall(time=tick(), id="c1", name="http_fetch", args={"url": "http://example.org/p"}),
        ToolResult(time=tick(), tool_call_id="c1", content="<html>", class_="web", untrusted=True),
        Assistant(time=tick(), text="the page says otters hold hands"),
    )
    s.end_epoch(summary="otters", baseline=BASE, time=tick())
    turn(s, tick, "more otters later", "otters again")
    index_home(home, store)

    hits = recall(store, "otters", 10, time=NOW)
    tags = {h.turn: h.tag for h in hits if h.turn is not None}
    assert tags == {1: "memory", 2: "memory-tainted", 3: "memory-tainted"}
    # epoch 0's summary was written after the untrusted read, and the session's digest
    # holds what came after it: both units are tainted too
    assert {h.ref: h.tag for h in hits if h.turn is None} == {
        "summary:s1:e0:1-2": "memory-tainted",
        "summary:s1:1-3": "memory-tainted",
    }


def test_raw_tool_results_are_never_found_but_summaries_are(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    s = new(home, tick)
    s.append(
        User(time=tick(), text="look it up"),
        ToolCall(time=tick(), id="c1", name="lookup", args={"q": "weather"}),
        ToolResult(
            time=tick(),
            tool_call_id="c1",
            content="zanzibar raw payload",
            class_="tool",
            untrusted=False,
        ),
        ToolSummary(
            time=tick(),
            call="lookup",
            tool_call_id="c1",
            content="summary: sunny in quixotic valley",
            class_="tool",
            untrusted=False,
        ),
        ToolSummary(
            time=tick(),
            call="fetch",
            tool_call_id="c2",
            content="summary: gossip about xylophones",
            class_="web",
            untrusted=True,
        ),
    )
    index_home(home, store)

    assert recall(store, "zanzibar", 5, time=NOW) == []
    [trusted] = recall(store, "quixotic", 5, time=NOW)
    assert (trusted.kind, trusted.tag) == ("summary", "memory")
    [untrusted] = recall(store, "xylophones", 5, time=NOW)
    assert (untrusted.kind, untrusted.tag) == ("summary", "memory-tainted")
    # The tool call itself (name and arguments) is searchable.
    assert [h.turn for h in recall(store, "weather lookup", 5, time=NOW)] == [1]


def test_incremental_pass_reads_only_new_lines_and_keeps_numbering(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    s = new(home, tick)
    turn(s, tick, "alpha one", "reply one")
    turn(s, tick, "alpha two", "reply two")
    first = index_home(home, store)
    assert first.rows == 4

    assert index_home(home, store).rows == 0  # nothing new, nothing re-read
    s.end_epoch(summary="alphas", baseline=BASE, time=tick())
    turn(s, tick, "alpha three", "reply three")
    second = index_home(home, store)
    assert second.rows == 2
    turn(s, tick, "alpha four", "reply four")
    assert index_home(home, store).rows == 2

    hits = recall(store, "alpha", 10, time=NOW)
    assert sorted(h.turn for h in hits if h.turn is not None) == [1, 2, 3, 4]  # no duplicates
    assert {h.turn: h.text for h in hits}[4] == "alpha four"


def test_a_torn_tail_is_indexed_once_it_is_complete(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    s = new(home, tick)
    turn(s, tick, "first words", "ok")
    line = b'{"type":"User","time":"2026-11-01T09:30:00Z","text":"penguins waddle"}\n'
    with s.log_path.open("ab") as f:
        f.write(line[:30])  # a writer crashed, or is mid-append
    index_home(home, store)
    assert recall(store, "penguins", 5, time=NOW) == []
    with s.log_path.open("ab") as f:
        f.write(line[30:])
    assert index_home(home, store).rows == 1
    assert index_home(home, store).rows == 0
    [hit] = recall(store, "penguins", 5, time=NOW)
    assert (hit.turn, hit.text) == (2, "penguins waddle")


def test_reindex_keeps_recall_counts_and_turns(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    s = new(home, tick)
    turn(s, tick, "kiwi smoothie recipe", "blend it")
    s.end_epoch(summary="kiwi", baseline=BASE, time=tick())
    turn(s, tick, "mango lassi", "yogurt")
    store.add_note("kiwi allergy: none", untrusted=False, session=None, time=tick())
    index_home(home, store)
    before = recall(store, "kiwi", 5, time=NOW)
    assert {h.ref for h in before} == {"turn:s1:1", "note:1", "summary:s1:e0:1-1"}

    report = reindex(home, store)
    assert report.rows == 4
    after = recall(store, "kiwi", 5, time=NOW)
    assert [(h.ref, h.text) for h in after] == [(h.ref, h.text) for h in before]
    stats = store.recall_stats()
    assert stats["turn:s1:1"].count == 2
    assert stats["note:1"].count == 2
    assert stats["turn:s1:1"].last == NOW
    assert [h.turn for h in recall(store, "mango", 5, time=NOW)] == [2]


def test_one_hit_per_turn_best_row_wins(home: Path, tick: Ticker, store: SqliteStore) -> None:
    s = new(home, tick)
    s.append(
        User(time=tick(), text="llama llama llama"),
        Assistant(time=tick(), text="a llama is a camelid, and this reply is much longer"),
        ToolCall(time=tick(), id="c", name="note", args={"text": "llama facts"}),
    )
    turn(s, tick, "one llama more", "sure")
    index_home(home, store)
    hits = recall(store, "llama", 5, time=NOW)
    assert [h.turn for h in hits] == [1, 2]
    assert hits[0].text == "llama llama llama"


def test_notes_and_pages_are_recalled_with_their_trust(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    store.add_note("the wifi password is on the fridge", untrusted=False, session=None, time=tick())
    store.put_page(
        Page(
            slug="house/wifi",
            title="Wifi",
            body="router in the hall cupboard",
            tags=("house",),
            visibility="private",
            untrusted=True,
            updated_at=tick(),
        )
    )
    hits = recall(store, "Where is the wifi router?", 5, time=NOW)
    assert {(h.kind, h.ref, h.tag) for h in hits} == {
        ("note", "note:1", "memory"),
        ("page", "page:house/wifi", "memory-tainted"),
    }


def test_a_malformed_line_is_read_past_and_reported(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    # Issue 33 (it was: the whole session skipped): a session with one bad line keeps
    # its intact lines in recall, before and after the bad one; the line is reported.
    good = new(home, tick, "good")
    turn(good, tick, "walrus facts", "tusks")
    bad = new(home, tick, "bad")
    turn(bad, tick, "walrus too", "yes")
    later: list[LogRecord] = [
        User(time=tick(), text="a walrus after the damage"),
        Assistant(time=tick(), text="ok"),
    ]
    with bad.log_path.open("ab") as f:
        f.write(b"not json\n" + encode_records(later))
    report = index_home(home, store)
    assert report.errors == ()
    [(sid, problem)] = report.damaged
    assert sid == "bad"
    assert problem.startswith(f"{bad.log_path}:4: malformed record")
    found = {(h.session, h.text) for h in recall(store, "walrus", 5, time=NOW)}
    assert found == {
        ("good", "walrus facts"),
        ("bad", "walrus too"),
        ("bad", "a walrus after the damage"),
    }


def test_an_indexed_log_that_goes_missing_is_reported(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    good = new(home, tick, "good")
    turn(good, tick, "walrus facts", "tusks")
    gone = new(home, tick, "gone")
    turn(gone, tick, "walrus too", "yes")
    gone.end_epoch(summary="walrus", baseline=BASE, time=tick())
    assert index_home(home, store).errors == ()
    (gone.dir / "0.jsonl").unlink()  # by hand, outside tether
    turn(good, tick, "more walrus", "ok")
    report = index_home(home, store)
    assert report.rows == 2  # the good session's new turn
    [(sid, problem)] = report.errors
    assert sid == "gone"
    assert problem == f"{gone.dir}: the log of epoch 0 is missing"


def test_common_words_do_not_drown_the_rare_one(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    s = new(home, tick)
    for i in range(12):
        turn(s, tick, f"tea time number {i}", "tea is good")
    turn(s, tick, "ginger tea with honey", "lovely")
    index_home(home, store)
    # With a budget of 5 rows, "tea" (25 rows) is too common to rank: "ginger" decides.
    [hit] = recall(store, "tea with ginger", 1, time=NOW, budget=5)
    assert hit.turn == 13
    # Every word too common: the newest turns holding all of them.
    hits = recall(store, "tea time", 3, time=NOW, budget=5)
    assert [h.turn for h in hits] == [12, 11, 10]
    assert all("tea time" in h.text for h in hits)
    # ... or, when no row holds them all, the newest holding any of them.
    hits = recall(store, "good number", 3, time=NOW, budget=5)
    assert [h.turn for h in hits] == [12, 11, 10]


@pytest.mark.parametrize("text", ["", "   ", "what did I do?", "?!(*", "the and or"])
def test_nothing_searchable_finds_nothing(
    home: Path, tick: Ticker, store: SqliteStore, text: str
) -> None:
    s = new(home, tick)
    turn(s, tick, "what did I do? the and or", "nothing much")
    index_home(home, store)
    assert recall(store, text, 5, time=NOW) == []
    assert store.recall_stats() == {}


def test_k_must_be_positive(store: SqliteStore) -> None:
    with pytest.raises(BadInputError, match="k must be at least 1"):
        recall(store, "anything", 0, time=NOW)


# -- ranking a natural-language question ------------------------------------------------


def test_the_owners_words_outrank_a_reply_that_repeats_them(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    s = new(home, tick)
    turn(s, tick, "My sister's wedding is in Porto in June", "Lovely!")
    turn(
        s,
        tick,
        "What should I pack?",
        "For a wedding in Porto pack light: Porto in June is warm, and a wedding there...",
    )
    index_home(home, store)
    hits = recall(store, "where is my sister's wedding?", 2, time=NOW)
    assert [h.turn for h in hits] == [1, 2]
    assert hits[0].text == "My sister's wedding is in Porto in June"


def test_scores_are_positive_even_when_every_row_holds_the_word(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    s = new(home, tick)
    turn(s, tick, "llama wool socks", "llama wool is warm")
    index_home(home, store)
    [hit] = recall(store, "llama", 5, time=NOW)
    assert hit.score > 0.01  # FTS5's own idf is 0 here: the score used to print as 0.00
    more = recall(store, "llama wool socks", 5, time=NOW)
    assert more[0].score > hit.score  # more of the question found, higher score


def test_a_question_in_another_tense_finds_the_turn(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    s = new(home, tick)
    turn(s, tick, "I bought a red kayak at the harbour shop", "Nice!")
    turn(s, tick, "The harbour is busy today", "Indeed.")
    index_home(home, store)
    top = recall(store, "What did I buy at the harbour?", 2, time=NOW)
    assert top[0].turn == 1
    assert recall(store, "how many fish did Milo catch", 1, time=NOW) == []


def test_a_question_finds_the_turn_that_says_it_with_another_verb(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    s = new(home, tick)
    turn(s, tick, "The smoker arrived, I got it at the hardware store", "Enjoy the BBQ!")
    turn(s, tick, "Is the hardware store open on Sunday?", "Usually, yes.")
    turn(s, tick, "I paid 80 dollars for the new kitchen tap", "Good.")
    turn(s, tick, "The old kitchen tap drips all night", "Check the washer.")
    index_home(home, store)
    assert recall(store, "what did I buy at the hardware store?", 1, time=NOW)[0].turn == 1
    assert recall(store, "how much did I spend on the kitchen tap?", 1, time=NOW)[0].turn == 3
    # "got" alone is not a question about buying: it is still a stop word.
    assert recall(store, "what have I got?", 1, time=NOW) == []


def test_a_single_quoted_title_ranks_the_turn_that_names_it(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    s = new(home, tick)
    turn(s, tick, "Power cut again", "Stay safe.")
    turn(s, tick, "I finished 'The Power' by Naomi Alderman on the train", "Great book.")
    turn(s, tick, "Power tools are loud", "True.")
    index_home(home, store)
    # The word alone ranks the short turns first; the quoted title ranks the book.
    assert recall(store, "power", 1, time=NOW)[0].turn != 2
    assert recall(store, "What did I make of 'The Power'?", 1, time=NOW)[0].turn == 2


def test_a_named_period_lifts_what_was_said_in_it(home: Path, store: SqliteStore) -> None:
    old = Session.create(home, "old", baseline=BASE, slot=0, time=NOW - timedelta(days=30))
    old.append(
        User(time=NOW - timedelta(days=30), text="I cooked a mushroom risotto"),
        Assistant(time=NOW - timedelta(days=30), text="Yum"),
    )
    recent = Session.create(home, "recent", baseline=BASE, slot=0, time=NOW - timedelta(days=8))
    recent.append(
        User(time=NOW - timedelta(days=8), text="I cooked a risotto"),
        Assistant(time=NOW - timedelta(days=8), text="Yum"),
    )
    index_home(home, store)
    assert recall(store, "what mushroom risotto did I cook?", 1, time=NOW)[0].session == "old"
    last_week = recall(store, "what mushroom risotto did I cook last week?", 2, time=NOW)
    assert [h.session for h in last_week] == ["recent", "old"]
    a_month_ago = recall(store, "the risotto I cooked a month ago", 2, time=NOW)
    assert a_month_ago[0].session == "old"


def test_sessions_rank_a_conversation_that_keeps_coming_back_to_it(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    once = new(home, tick, "once")
    turn(once, tick, "The garden shed roof leaks", "Patch it.")
    turn(once, tick, "Anything else?", "No.")
    often = new(home, tick, "often")
    turn(often, tick, "The shed needs a new roof", "Felt or tiles?")
    turn(often, tick, "Felt, for the shed", "Good choice.")
    turn(often, tick, "The shed roof is done", "Great.")
    index_home(home, store)
    sessions = recall_sessions(store, "shed roof", 5, time=NOW)
    assert [s.session for s in sessions] == ["often", "once"]
    assert [h.turn for h in sessions[0].turns][2:] == [2]  # the one with "shed" only is last
    assert all(h.session == "often" for h in sessions[0].turns)
    assert sessions[0].score > sessions[1].score > 0
    assert recall_sessions(store, "", 5, time=NOW) == []
    with pytest.raises(BadInputError, match="k must be at least 1"):
        recall_sessions(store, "shed", 0, time=NOW)


def test_a_session_whose_replies_are_about_it_is_found_by_what_they_say(
    home: Path, tick: Ticker, store: SqliteStore
) -> None:
    gear = new(home, tick, "gear")
    turn(gear, tick, "Which flash fits my Sony A7?", "For photography on the A7, a Godox flash.")
    turn(gear, tick, "How do I clean my 24-70 lens?", "Photography shops sell lens kits.")
    turn(gear, tick, "I want a comfier camera bag", "Photography accessories: try Peak Design.")
    club = new(home, tick, "club")
    turn(club, tick, "The accessories stall at the fair was busy", "Fairs are fun.")
    index_home(home, store)
    question = "Which accessories would complement my photography setup?"
    # Turn by turn, the owner's own word wins...
    assert recall(store, question, 1, time=NOW)[0].session == "club"
    # ...but the conversation that was about photography is the session to bring back.
    assert [s.session for s in recall_sessions(store, question, 2, time=NOW)] == ["gear", "club"]


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteStore]:
    """A real home with a few sessions, a note and a page, shared by the property test."""
    home = tmp_path_factory.mktemp("filled") / "home"
    init_home(home)
    tick = Ticker()
    s = Session.create(home, "s1", baseline=BASE, slot=0, time=tick())
    for user, reply in [
        ("I adopted a cat named Milo in March", "Congratulations on Milo!"),
        ('near the river AND the old mill, "quoted" (parens', "NEAR(it) OR NOT"),
        ("naïve café in Straße 5 with emoji 🐈", "😀 ok"),
        ("under_score words: and * stars ^ carets", "-minus +plus {braces}"),
    ]:
        turn(s, tick, user, reply)
    store = SqliteStore(home / "tether.db")
    store.add_note(
        "the spare key is under the blue pot", untrusted=False, session=None, time=tick()
    )
    index_home(home, store)
    yield store
    store.close()


FTS_SYNTAX = [*"\"*^:()-+{}.,;'", "AND", "OR", "NOT", "NEAR", "NEAR(", "text:", "body:", " ", "é"]


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(),
        st.lists(st.sampled_from([*FTS_SYNTAX, "cat", "milo", "river", "🐈", "日本語"])).map(
            "".join
        ),
        st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"])),
    ),
    st.integers(1, 20),
)
@example("", 5)
@example('"', 5)
@example("((( NEAR(a b, 3) AND OR NOT *", 5)
@example('body:cat aside:milo {body}: "milo" ^cat', 5)
@example("🐈🐈🐈 😀", 5)
@example("cat* m* * ** mil*", 5)
@example('"the old mill" "unbalanced', 5)
@example("what did I buy last week? two weeks ago in March 10 days ago", 5)
@example("river " * 2000, 5)  # 12 KB
@example(" ".join(f'w{i} NEAR( "x{i}" AND' for i in range(1200)), 5)
@example("I read 'Milo's 'river' AND 'the old mill' (NEAR 'x' ‘y’ it's", 5)
@example(" 'a" * 3400, 5)  # 10 KB of unclosed single quotes
def test_any_question_gets_hits_or_nothing_never_an_error(
    filled: SqliteStore, text: str, k: int
) -> None:
    hits = recall(filled, text, k, time=NOW)
    assert len(hits) <= k
    assert all(h.score > 0 for h in hits)
    assert len({h.ref for h in hits}) == len(hits)
    sessions = recall_sessions(filled, text, k, time=NOW)
    assert len(sessions) <= k
    if not query.terms(text):
        assert hits == []
        assert sessions == []
