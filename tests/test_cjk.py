"""Chinese, Japanese and Korean: words inside unspaced text are found, as a user asks."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.core.recall import cjk, query
from tether.memory.recall import recall, recall_sessions
from tether.records import IndexCursor, LogRow
from tether.stores.sqlite import SqliteStore

T0 = datetime(2026, 11, 1, tzinfo=UTC)

HAN = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
KANA = st.characters(min_codepoint=0x3041, max_codepoint=0x30FA)
HANGUL = st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3)
MIXED = st.text(st.one_of(HAN, KANA, HANGUL, st.characters(codec="ascii")), max_size=60)


def test_runs_become_overlapping_pairs_and_characters() -> None:
    assert cjk.segment("我喜欢乌龙茶") == "我喜 喜欢 欢乌 乌龙 龙茶 我 喜 欢 乌 龙 茶"
    assert cjk.segment("I like 茶 a lot") == "茶"
    assert cjk.segment("iPhone15手机很好") == "iPhone15 手机 机很 很好 手 机 很 好"
    assert cjk.segment("서울에서 만났어요") == "서울 울에 에서 서 울 에 만났 났어 어요 만 났 어 요"
    assert cjk.segment("plain English, no CJK") is None
    assert cjk.segment("") is None


@given(MIXED)
def test_every_pair_and_character_of_a_run_is_indexed(text: str) -> None:
    seg = cjk.segment(text)
    assert (seg is None) == (not cjk.runs(text))
    tokens = set((seg or "").split())
    for run in cjk.runs(text):
        for i in range(len(run) - 1):
            assert run[i : i + 2] in tokens
        assert set(run) <= tokens


def test_a_question_searches_the_pairs_of_its_runs() -> None:
    terms = [(t.text, t.kind, t.weight) for t in query.analyse("什么茶？").terms]
    half = query.VARIANT_WEIGHT
    assert terms == [
        ("什么", "term", 1),
        ("么茶", "term", 1),
        ("什", "term", half),
        ("么", "term", half),
        ("茶", "term", half),
    ]
    mixed = [t.text for t in query.analyse("Where is my iPhone15手机?").terms]
    assert mixed == ["iphone15", "手机", "手", "机"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "tether.db")
    texts = [
        ("zh", "我最喜欢的茶是乌龙茶，每天早上喝一杯。"),
        ("zh", "昨天我们在北京吃了烤鸭，味道非常好。"),
        ("ja", "来週の月曜日に東京で友達に会います。"),
        ("ja", "猫の名前はミロです。とても可愛いです。"),
        ("ko", "주말에 서울에서 친구를 만났어요."),
        ("en", "The kayak is red and the paddle is blue."),
    ]
    rows = [
        LogRow(session=sid, epoch=0, turn=i, field="user", text=text, tainted=False, time=T0)
        for i, (sid, text) in enumerate(texts, start=1)
    ]
    s.index_log_rows(rows, IndexCursor(path="x/0.jsonl", offset=1, turn=6, tainted=False))
    yield s
    s.close()


@pytest.mark.parametrize(
    ("question", "turn"),
    [
        ("我喜欢喝什么茶？乌龙茶吗？", 1),
        ("我平时喝什么茶？", 1),  # no pair in common: the characters 茶 and 喝 find it
        ("北京烤鸭", 2),
        ("東京で誰に会いますか", 3),
        ("ミロ", 4),
        ("서울에서 누구를 만났어?", 5),
        ("which kayak is red?", 6),
    ],
)
def test_recall_finds_words_inside_unspaced_text(
    store: SqliteStore, question: str, turn: int
) -> None:
    hits = recall(store, question, 3, time=T0)
    assert hits
    assert hits[0].turn == turn


def test_sessions_rank_by_the_pairs_too(store: SqliteStore) -> None:
    (best, *_) = recall_sessions(store, "东京 東京で友達", 3, time=T0)
    assert best.session == "ja"


def test_a_run_found_nowhere_finds_nothing(store: SqliteStore) -> None:
    assert recall(store, "火星旅行", 3, time=T0) == []


def test_notes_and_identity_entries_in_cjk_are_found_too(
    store: SqliteStore, tmp_path: Path
) -> None:
    store.add_note("妈妈的生日是十月三号", untrusted=False, session=None, time=T0)
    [hit] = recall(store, "妈妈生日", 1, time=T0)
    assert (hit.kind, hit.text) == ("note", "妈妈的生日是十月三号")
    home = tmp_path / "home"
    (home / "memory").mkdir(parents=True)
    (home / "memory" / "memory.md").write_text("- 私の誕生日は五月五日です\n", encoding="utf-8")
    [hit] = recall(store, "誕生日はいつ", 1, time=T0, home=home)
    assert hit.kind == "identity"
