"""Emoji and other symbols are searchable: recall finds "🍵" in "🍵 matcha", as a user asks."""

from __future__ import annotations

import json
import sqlite3
import unicodedata
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon_helpers import tether
from test_recall_mirror import old_store
from tether.core.recall import query, symbols
from tether.memory.recall import recall
from tether.records import IndexCursor, LogRow
from tether.stores.sqlite import SqliteStore
from tether.stores.sqlite.migrations import MIGRATIONS, SYMBOLS_VERSION

T0 = datetime(2026, 11, 1, tzinfo=UTC)
TEA, LAPTOP, WOMAN, THUMB, TONE = "🍵", "💻", "👩", "👍", "🏽"
CODER = WOMAN + "\u200d" + LAPTOP


def tokens(text: str) -> list[str]:
    return [t for t, _ in symbols.pieces(text)]


def test_symbols_become_tokens_the_index_keeps() -> None:
    assert tokens("🍵 matcha") == ["zsym127861"]
    assert tokens("© 2026, 5 €, → ∑ ♥") == [
        "zsym169",
        "zsym8364",
        "zsym8594",
        "zsym8721",
        "zsym9829",
    ]
    # ASCII symbols, letters, digits, CJK and punctuation have no symbol token.
    assert tokens("a + b = $5 <tag> 你好 … — «x»") == []
    # A variation selector is dropped: ❤️ is ❤.
    assert tokens("❤\ufe0f") == tokens("❤")


def test_sequences_are_indexed_whole_and_by_their_bases() -> None:
    assert symbols.pieces(CODER) == [
        ("zsym128105x128187", False),
        ("zsym128105", True),
        ("zsym128187", True),
    ]
    # A skin tone is part of the sequence, not a base: 👍🏽 is found by 👍.
    assert symbols.pieces(THUMB + TONE) == [("zsym128077x127997", False), ("zsym128077", True)]
    # A flag is its pair of regional indicators; two flags are two clusters.
    assert len(symbols.clusters("🇫🇷🇩🇪")) == 2
    # Two emoji side by side, not joined, are two clusters.
    assert symbols.clusters(TEA + LAPTOP) == [[ord(TEA)], [ord(LAPTOP)]]


SYMBOL = st.characters(
    min_codepoint=0x80, categories=["So", "Sm", "Sc", "Sk"], exclude_characters="\U0001f3fb"
)
TEXT = st.text(st.one_of(SYMBOL, st.characters(codec="utf-8", exclude_categories=["Cs"])))


@given(TEXT)
def test_every_symbol_of_a_text_is_indexed(text: str) -> None:
    indexed = set((symbols.segment(text) or "").split())
    for ch in text:
        cp = ord(ch)
        is_base = cp >= 0x80 and unicodedata.category(ch) in {"So", "Sm", "Sc", "Sk"}
        if is_base and not 0x1F3FB <= cp <= 0x1F3FF:
            assert f"zsym{cp}" in indexed, ch
    assert all(symbols.is_token(t) for t in indexed)


def test_a_question_of_symbols_alone_has_terms() -> None:
    assert query.terms(TEA) == ("zsym127861",)
    weighted = [(t.text, t.weight) for t in query.analyse(f"coding {CODER}?").terms]
    assert weighted[:4] == [
        ("coding", 1.0),
        ("zsym128105x128187", 1.0),
        ("zsym128105", query.VARIANT_WEIGHT),
        ("zsym128187", query.VARIANT_WEIGHT),
    ]


TURNS = [
    f"{TEA} matcha after lunch",
    f"{CODER} late night on the parser",
    f"{THUMB}{TONE} sounds good, see you then",
    "☕ coffee at eight, then the standup",
    "we talked about green tea and the kettle",
    f"{LAPTOP} the new laptop arrived",
]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "tether.db")
    rows = [
        LogRow(session="s", epoch=0, turn=i, field="user", text=text, tainted=False, time=T0)
        for i, text in enumerate(TURNS, start=1)
    ]
    s.index_log_rows(rows, IndexCursor(path="s/0.jsonl", offset=1, turn=len(TURNS), tainted=False))
    yield s
    s.close()


@pytest.mark.parametrize(
    ("question", "first"),
    [
        (TEA, 1),
        (f"{TEA}?", 1),
        (CODER, 2),
        (THUMB + TONE, 3),
        (THUMB, 3),  # the base finds it with its skin tone
        ("☕", 4),
        (LAPTOP, 6),  # alone it ranks first; the coder's laptop comes after
        ("matcha", 1),  # words are found as before
        ("green tea", 5),
    ],
)
def test_recall_finds_symbols(store: SqliteStore, question: str, first: int) -> None:
    hits = recall(store, question, 3, time=T0)
    assert hits
    assert hits[0].turn == first


def test_the_bases_of_a_sequence_find_it_after_an_exact_match(store: SqliteStore) -> None:
    assert [h.turn for h in recall(store, LAPTOP, 3, time=T0)][:2] == [6, 2]
    assert [h.turn for h in recall(store, CODER, 3, time=T0)][:2] == [2, 6]


def test_a_symbol_found_nowhere_finds_nothing(store: SqliteStore) -> None:
    assert recall(store, "🚀", 3, time=T0) == []


def test_an_index_from_before_symbols_is_rebuilt_by_its_migration(tmp_path: Path) -> None:
    path = tmp_path / "tether.db"
    s = SqliteStore(path)
    row = LogRow(session="s", epoch=0, turn=1, field="user", text=TURNS[0], tainted=False, time=T0)
    s.index_log_rows([row], IndexCursor(path="s/0.jsonl", offset=1, turn=1, tainted=False))
    s.close()
    # As the index was before: no symbol tokens, one version behind.
    db = sqlite3.connect(path)
    with db:
        (doc_id, body, aside) = db.execute("SELECT id, body, aside FROM doc").fetchone()
        db.execute(
            "INSERT INTO doc_fts (doc_fts, rowid, body, aside) VALUES ('delete', ?, ?, ?)",
            (doc_id, body, aside),
        )
        db.execute("UPDATE doc SET seg = NULL")
        db.execute("INSERT INTO doc_fts (rowid, body, aside) SELECT id, body, aside FROM doc")
        db.execute(f"PRAGMA user_version = {SYMBOLS_VERSION - 1}")
        # What the later migrations made goes too (the vectors' tables), so migrating
        # from that version runs them again as on a real store of the time.
        for trigger in ("doc_vec_deleted", "doc_vec_rewritten"):
            db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        db.execute("DROP TABLE IF EXISTS doc_vec")
        db.execute("DROP TABLE IF EXISTS vec_model")
        db.execute("DELETE FROM stat WHERE name = 'vec_gone'")
        for column in ("size", "mtime_ns", "ino", "tail"):  # the logs' states (schema 9)
            db.execute(f"ALTER TABLE index_cursor DROP COLUMN {column}")
    db.close()
    old = sqlite3.connect(path)
    found = old.execute("SELECT count(*) FROM doc_fts WHERE doc_fts MATCH 'zsym127861'")
    assert found.fetchone()[0] == 0
    old.close()
    s = SqliteStore(path)  # migrates
    try:
        [hit] = recall(s, TEA, 3, time=T0)
        assert hit.text == TURNS[0]
        assert recall(s, "matcha", 3, time=T0)[0].turn == 1
    finally:
        s.close()


def test_memory_recall_of_an_emoji_as_a_user_runs_it(home: Path, tmp_path: Path) -> None:
    lines = [
        {
            "session": "chat",
            "role": "user",
            "text": f"{TEA} matcha",
            "time": "2026-11-01T09:00:00Z",
        },
        {"session": "chat", "role": "assistant", "text": "Noted.", "time": "2026-11-01T09:00:01Z"},
        {"session": "chat", "role": "user", "text": "a kettle", "time": "2026-11-01T09:01:00Z"},
    ]
    source = tmp_path / "chat.jsonl"
    source.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    imported = tether(home, "sessions", "import", str(source))
    assert imported.returncode == 0, imported.stderr
    out = tether(home, "memory", "recall", TEA, "--json")
    assert out.returncode == 0, out.stderr
    [hit] = json.loads(out.stdout)
    assert hit["text"] == f"{TEA} matcha"


def test_a_store_at_the_version_before_finds_its_emoji_after_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "tether.db"
    old_store(path, SYMBOLS_VERSION - 1, [(1, 1, "user", TURNS[0]), (2, 2, "user", TURNS[4])])
    with SqliteStore(path) as store:
        assert store.schema_version() == len(MIGRATIONS)  # upgraded past the symbols step
        [hit] = recall(store, TEA, 3, time=T0)
        assert hit.turn == 1
        assert recall(store, "green tea", 3, time=T0)[0].turn == 2
