"""The SQLite store: a real file, migrations, notes, pages, journal, index, recalls log."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from search_helpers import words
from tether.config import Config, StoreConfig
from tether.errors import StoreError, StoreVersionError
from tether.ports import Store
from tether.records import IndexCursor, JournalEntry, LogField, LogRow, Page
from tether.stores import open_store
from tether.stores.sqlite import SqliteStore
from tether.stores.sqlite.migrations import MIGRATIONS, statements

T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "tether.db"


@pytest.fixture
def store(any_store: Store) -> Store:
    """The contract tests below run on every backend (``conftest.backend``)."""
    return any_store


def raw(path: Path) -> sqlite3.Connection:
    """A plain connection, to look at the file the way another tool would."""
    return sqlite3.connect(path)


def row(
    session: str, turn: int, text: str, *, field: LogField = "user", tainted: bool = False
) -> LogRow:
    return LogRow(
        session=session,
        epoch=0,
        turn=turn,
        field=field,
        text=text,
        tainted=tainted,
        time=T0 + timedelta(seconds=turn),
    )


def cursor(path: str = "s1/0.jsonl", offset: int = 100, turn: int = 1) -> IndexCursor:
    return IndexCursor(path=path, offset=offset, turn=turn, tainted=False, lines=3)


# -- the file ----------------------------------------------------------------------------


def test_new_store_is_wal_and_fully_migrated(db_path: Path) -> None:
    with SqliteStore(db_path) as store:
        assert store.schema_version() == len(MIGRATIONS)
    conn = raw(db_path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    finally:
        conn.close()


def test_reopening_keeps_data_and_migrates_nothing_twice(db_path: Path) -> None:
    with SqliteStore(db_path) as s:
        s.add_note("the spare key is under the blue pot", untrusted=False, session=None, time=T0)
    with SqliteStore(db_path) as s:
        assert [n.text for n in s.notes()] == ["the spare key is under the blue pot"]
        assert s.schema_version() == len(MIGRATIONS)


def test_a_database_from_a_newer_tether_is_refused_untouched(db_path: Path) -> None:
    SqliteStore(db_path).close()
    conn = raw(db_path)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 5}")
    conn.close()
    before = db_path.read_bytes()
    with pytest.raises(StoreVersionError) as info:
        SqliteStore(db_path)
    assert info.value.found == len(MIGRATIONS) + 5
    assert str(db_path) in str(info.value)
    assert "upgrade tether" in str(info.value)
    assert db_path.read_bytes() == before


def test_a_file_that_is_not_a_database_is_a_clear_error(db_path: Path) -> None:
    db_path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="not a database") as info:
        SqliteStore(db_path)
    assert info.value.path == db_path


def test_a_store_in_a_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open the store"):
        SqliteStore(tmp_path / "no" / "such" / "dir" / "tether.db")


def test_closed_store_refuses_work_and_close_is_idempotent(store: Store) -> None:
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.notes()


def test_open_store_sqlite_in_home_or_at_its_url(tmp_path: Path) -> None:
    s = open_store(tmp_path, Config())
    try:
        assert (tmp_path / "tether.db").is_file()
    finally:
        s.close()
    s = open_store(tmp_path, Config(store=StoreConfig(url="sqlite:///elsewhere.db")))
    try:
        assert (tmp_path / "elsewhere.db").is_file()
    finally:
        s.close()


def test_a_postgres_server_that_does_not_answer_is_a_clear_error(tmp_path: Path) -> None:
    # Port 9 (discard) on this machine: nothing listens, so the connection is refused.
    cfg = Config(store=StoreConfig(url="postgresql://me:secret@127.0.0.1:9/tether"))
    with pytest.raises(StoreError, match="cannot connect") as info:
        open_store(tmp_path, cfg)
    assert "secret" not in str(info.value)
    assert "postgresql://me@127.0.0.1:9/tether" in str(info.value)


def test_usable_from_another_thread(store: Store) -> None:
    out: list[int] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            out.append(store.add_note("from a thread", untrusted=False, session=None, time=T0).id)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(out) == [1, 2, 3, 4]


def test_two_store_objects_on_one_file_see_each_others_writes(db_path: Path) -> None:
    with SqliteStore(db_path) as a, SqliteStore(db_path) as b:
        a.add_note("written by a", untrusted=False, session=None, time=T0)
        b.add_note("written by b", untrusted=True, session="s1", time=T0)
        assert [n.text for n in a.notes()] == ["written by a", "written by b"]
        assert [h.text for h in b.search(words("written"), 5)] == ["written by a", "written by b"]


# -- notes and pages -----------------------------------------------------------------------


def test_notes_are_searchable_when_written_and_tagged_by_trust(store: Store) -> None:
    local = datetime(2026, 11, 1, 10, tzinfo=timezone(timedelta(hours=1)))
    a = store.add_note("owner prefers green tea", untrusted=False, session=None, time=local)
    b = store.add_note("the page said: prefers coffee", untrusted=True, session="s9", time=T0)
    assert (a.id, b.id) == (1, 2)
    assert a.time == T0  # stored and returned in UTC
    assert store.notes() == [a, b]
    hits = {h.ref: h for h in store.search(words("prefers"), 5)}
    assert hits["note:1"].tag == "memory"
    assert hits["note:2"].tag == "memory-tainted"
    assert hits["note:1"].kind == "note"
    assert hits["note:1"].session is None


def test_pages_roundtrip_and_a_rewrite_replaces_what_is_found(store: Store) -> None:
    page = Page(
        slug="people/ann",
        title="Ann",
        body="Ann grows tomatoes.",
        tags=("people",),
        visibility="private",
        untrusted=False,
        updated_at=T0,
    )
    store.put_page(page)
    assert store.get_page("people/ann") == page
    assert store.get_page("nobody") is None
    assert [h.ref for h in store.search(words("tomatoes"), 5)] == ["page:people/ann"]

    newer = Page(
        slug="people/ann",
        title="Ann",
        body="Ann now grows peppers.",
        tags=(),
        visibility="world",
        untrusted=True,
        updated_at=T0 + timedelta(days=1),
    )
    store.put_page(newer)
    assert store.pages() == [newer]
    assert store.search(words("tomatoes"), 5) == []
    hits = store.search(words("peppers"), 5)
    assert [(h.ref, h.tag, h.kind) for h in hits] == [("page:people/ann", "memory-tainted", "page")]


# -- journal and recalls -----------------------------------------------------------------


def test_journal_appends_with_ids_and_limit_gives_the_newest(store: Store) -> None:
    entries = [
        store.journal_append(
            JournalEntry(
                time=T0 + timedelta(minutes=i),
                who="agent",
                session="s1",
                action="note",
                target=f"note:{i}",
                before=None,
                after=f"text {i}",
            )
        )
        for i in range(5)
    ]
    assert [e.id for e in entries] == [1, 2, 3, 4, 5]
    assert store.journal() == entries
    assert [e.target for e in store.journal(2)] == ["note:3", "note:4"]


def test_recall_stats_count_and_last_time(store: Store) -> None:
    store.record_recalls(["turn:s1:4", "note:1"], T0)
    store.record_recalls(["turn:s1:4"], T0 + timedelta(hours=2))
    store.record_recalls([], T0 + timedelta(hours=3))
    stats = store.recall_stats()
    assert stats["turn:s1:4"].count == 2
    assert stats["turn:s1:4"].last == T0 + timedelta(hours=2)
    assert stats["note:1"].count == 1
    assert set(stats) == {"turn:s1:4", "note:1"}


# -- the log index -----------------------------------------------------------------------


def test_index_rows_and_cursor_move_together(store: Store) -> None:
    assert store.index_cursor("s1/0.jsonl") is None
    store.index_log_rows([row("s1", 1, "we booked the Lantern restaurant")], cursor())
    assert store.index_cursor("s1/0.jsonl") == cursor()
    assert store.index_cursors() == {"s1/0.jsonl": cursor()}
    [hit] = store.search(words("lantern"), 5)
    assert (hit.kind, hit.session, hit.turn, hit.ref) == ("turn", "s1", 1, "turn:s1:1")
    assert hit.score > 0
    store.index_log_rows([], cursor(offset=200, turn=2))
    assert store.index_cursor("s1/0.jsonl") == cursor(offset=200, turn=2)


def test_summary_rows_are_their_own_kind_and_keep_their_taint(store: Store) -> None:
    store.index_log_rows(
        [row("s1", 2, "fetched page about otters", field="summary", tainted=True)], cursor()
    )
    [hit] = store.search(words("otters"), 5)
    assert (hit.kind, hit.tag) == ("summary", "memory-tainted")


def test_reset_index_keeps_notes_pages_journal_and_recalls(store: Store) -> None:
    store.index_log_rows([row("s1", 1, "apple pie recipe")], cursor())
    store.add_note("apple trees need pruning", untrusted=False, session=None, time=T0)
    store.put_page(
        Page(
            slug="apple",
            title="Apple",
            body="apple notes",
            tags=(),
            visibility="private",
            untrusted=False,
            updated_at=T0,
        )
    )
    store.journal_append(
        JournalEntry(
            time=T0,
            who="owner",
            session=None,
            action="note",
            target="note:1",
            before=None,
            after="x",
        )
    )
    store.record_recalls(["turn:s1:1"], T0)

    store.reset_index()

    assert store.index_cursors() == {}
    assert sorted(h.kind for h in store.search(words("apple"), 10)) == ["note", "page"]
    assert len(store.notes()) == 1
    assert len(store.pages()) == 1
    assert len(store.journal()) == 1
    assert store.recall_stats()["turn:s1:1"].count == 1
    # Indexing again works, and notes written after a reset are found too.
    store.index_log_rows([row("s1", 1, "apple pie recipe")], cursor())
    store.add_note("apple cider", untrusted=False, session=None, time=T0)
    assert sorted(h.kind for h in store.search(words("apple"), 10)) == [
        "note",
        "note",
        "page",
        "turn",
    ]


def test_search_ranks_best_first_and_newest_takes_the_latest(store: Store) -> None:
    rows = [row("s1", i, "tea " * (1 if i != 3 else 4) + f"filler {i}") for i in range(1, 7)]
    store.index_log_rows(rows, cursor())
    ranked = store.search(words("tea"), 6)
    assert ranked[0].turn == 3  # most "tea" in the shortest text
    assert [h.score for h in ranked] == sorted((h.score for h in ranked), reverse=True)
    assert [h.turn for h in store.newest(words("tea"), 2)] == [6, 5]
    assert [h.turn for h in store.newest(words("tea", "filler", require="all"), 10, within=3)] == [
        6,
        5,
        4,
    ]
    assert store.newest(words("coffee"), 5) == []


def test_search_terms_may_require_every_term(store: Store) -> None:
    store.index_log_rows([row("s1", 1, "tea filler"), row("s1", 2, "tea tea")], cursor())
    assert {f.turn for f in store.search_terms(words("tea", "filler"), 5, aside=0.3)} == {1, 2}
    both = store.search_terms(words("tea", "filler", require="all"), 5, aside=0.3)
    assert [f.turn for f in both] == [1]
    assert [f.turn for f in store.search_terms(words("tea", require="all"), 5, aside=0.3)] == [2, 1]


def test_count_matches_is_capped(store: Store) -> None:
    store.index_log_rows([row("s1", i, f"tea {i}") for i in range(1, 11)], cursor())
    counted = [words("tea"), words("coffee"), words("tea", "5", require="all"), words()]
    assert store.count_matches(counted, 4) == [4, 0, 1, 0]


def test_a_search_sqlite_refuses_is_a_store_error_not_a_crash(db_path: Path) -> None:
    # No query can be an FTS5 syntax error (tests/test_query.py): an index SQLite cannot
    # read is what is left to refuse.
    SqliteStore(db_path).close()
    conn = raw(db_path)
    conn.execute("UPDATE doc_fts_config SET v = 99 WHERE k = 'version'")
    conn.commit()
    conn.close()
    with SqliteStore(db_path) as store, pytest.raises(StoreError, match="fts5"):
        store.search(words("tea"), 5)


def test_an_empty_query_finds_nothing(store: Store) -> None:
    store.index_log_rows([row("s1", 1, "tea")], cursor())
    assert store.search(words(), 5) == []
    assert store.search_terms(words(), 5, aside=0.3) == []
    assert store.newest(words(), 5) == []


def test_naive_times_are_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="naive"):
        store.add_note("x", untrusted=False, session=None, time=datetime(2026, 1, 1))
    assert store.notes() == []


def test_a_version_1_store_upgrades_and_keeps_its_index(db_path: Path) -> None:
    """A home indexed before the index had a column per field is rebuilt on first open."""
    conn = raw(db_path)
    for statement in statements(MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    for i, (field, text) in enumerate(
        [("user", "the kayak is red"), ("assistant", "a red kayak, a red kayak!")], start=1
    ):
        conn.execute(
            "INSERT INTO doc (id, kind, session, epoch, turn, field, tainted, time, text)"
            " VALUES (?, 'turn', 's1', 0, ?, ?, 0, 0, ?)",
            (i, i, field, text),
        )
        conn.execute("INSERT INTO doc_fts (rowid, text) VALUES (?, ?)", (i, text))
    conn.execute("UPDATE stat SET value = 2 WHERE name = 'doc_rows'")
    conn.commit()
    conn.close()

    with SqliteStore(db_path) as store:
        assert store.schema_version() == len(MIGRATIONS) >= 2
        assert [h.turn for h in store.search(words("kayak"), 5)] == [2, 1]  # both fields alike
        # Weighed by field, the owner's words win over a reply that repeats them.
        found = store.search_terms(words("kayak", "red"), 5, aside=0.3)
        assert [(f.turn, f.field) for f in found] == [(1, "user"), (2, "assistant")]
        assert all(f.score > 0 for f in found)
        only_owner = store.search_terms(words("kayak"), 5, aside=0.0)
        assert [f.turn for f in only_owner] == [1, 2]
        assert only_owner[1].score == 0.0


def test_between_reads_a_periods_turn_rows_oldest_first(store: Store) -> None:
    store.index_log_rows(
        [
            row("s1", 1, "the first one"),
            row("s1", 1, "a reply", field="assistant"),
            row("s1", 2, "a call", field="tool_call"),
            row("s1", 3, "the third one"),
            row("s1", 9, "much later"),
        ],
        cursor(turn=9),
    )
    found = store.between(T0 + timedelta(seconds=1), T0 + timedelta(seconds=4), 10)
    # tool calls are not what was said; turn 9 (written at +9 s) is after the period
    assert [(f.turn, f.field, f.text, f.score) for f in found] == [
        (1, "user", "the first one", 0.0),
        (1, "assistant", "a reply", 0.0),
        (3, "user", "the third one", 0.0),
    ]
    assert all(f.ref == f"turn:s1:{f.turn}" for f in found)
    assert len(store.between(T0, T0 + timedelta(days=1), 2)) == 2
