"""The LongMemEval benchmark's protocol: its metrics, its split, its gold and its mapping of
tether's hits back to the paper's ids. The figures in benchmarks/RESULTS.md are only as
honest as these pieces, so they are checked here on hand-made questions (the data set and
the bm25s baseline are not needed)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from bench_helpers import load_benchmark
from tether.stores.sqlite import SqliteStore

lme = load_benchmark("longmemeval_retrieval")


def question(
    qid: str, sessions: dict[str, list[tuple[str, str, bool]]], *, asked: str, qtype: str = "t"
) -> Any:
    """A Question whose haystack is ``sessions``: id -> [(role, text, has_answer)]."""
    return lme.Question(
        question_id=qid,
        question_type=qtype,
        question=asked,
        question_date="2023/05/30 (Tue) 15:00",
        haystack_dates=[f"2023/05/{10 + n:02d} (Wed) 09:00" for n in range(len(sessions))],
        haystack_session_ids=list(sessions),
        haystack_sessions=[
            [lme.Message(role=r, content=t, has_answer=a) for r, t, a in msgs]
            for msgs in sessions.values()
        ],
    )


def test_recall_all_needs_every_gold_item_in_the_top_k() -> None:
    gold = frozenset({"a", "b"})
    assert lme.recall_all(["a", "x", "b"], gold, 3) == 1.0
    assert lme.recall_all(["a", "x", "b"], gold, 2) == 0.0
    assert lme.recall_all([], gold, 5) == 0.0


def test_ndcg_any_is_the_papers() -> None:
    gold = frozenset({"a", "b"})
    assert lme.ndcg_any(["a", "b", "x"], gold, 5) == pytest.approx(1.0)
    # One gold item at rank 2 of two possible: (1 / log2 2) / (1 + 1 / log2 2).
    assert lme.ndcg_any(["x", "a"], gold, 5) == pytest.approx(1 / 2)
    # Rank 3: 1 / log2(3) over the ideal 2.
    assert lme.ndcg_any(["x", "y", "b"], gold, 5) == pytest.approx((1 / math.log2(3)) / 2)
    # Only the top k counts, and the ideal is capped at k items.
    assert lme.ndcg_any(["x", "a"], gold, 1) == 0.0
    assert lme.ndcg_any(["b"], gold, 1) == pytest.approx(1.0)


def test_the_split_deals_each_type_alternately_whatever_the_order() -> None:
    qs = [question(f"q{n}", {"s": []}, asked="?", qtype="ab"[n % 2]) for n in range(10)]
    half = lme.split(qs)
    assert half == lme.split(list(reversed(qs)))
    for qtype in "ab":
        halves = [half[q.question_id] for q in qs if q.question_type == qtype]
        assert sorted(halves) == ["report", "report", "tune", "tune", "tune"]


def test_gold_is_user_turns_with_the_answer_in_evidence_sessions() -> None:
    q = question(
        "q1",
        {
            "noise_1": [("user", "my bike is red", True), ("assistant", "nice", False)],
            "answer_x_1": [
                ("user", "hello", False),
                ("assistant", "hi, the bike is blue", True),
                ("user", "I bought a blue bike", True),
            ],
            "answer_x_2": [("user", "nothing here", False), ("assistant", "bike", True)],
        },
        asked="What colour is my bike?",
    )
    lines, keys = lme.import_lines(q)
    # Only an evidence session's user turn marked has_answer is gold (noise sessions and
    # the assistant side never are); its id is the paper's "<session>_<position>".
    assert keys.gold_sessions == frozenset({"answer_x_1"})
    assert keys.gold_turns == frozenset({"answer_x_1_3"})
    # tether's turn k of a session is its k-th user message; session ids are neutral.
    assert keys.turn_of[("h001", 2)] == "answer_x_1_3"
    assert keys.session_of == {"h000": "noise_1", "h001": "answer_x_1", "h002": "answer_x_2"}
    assert all(b"answer" not in line for line in lines)
    assert len(lines) == 7


def test_tether_rankings_map_hits_back_to_the_papers_ids(tmp_path: Path) -> None:
    q = question(
        "q2",
        {
            "noise_1": [("user", "The garden needs water", False), ("assistant", "Yes", False)],
            "answer_k_1": [
                ("user", "Good morning", False),
                ("assistant", "Morning!", False),
                ("user", "I adopted a tabby kitten called Miso", True),
                ("assistant", "Lovely", False),
            ],
            "noise_2": [("user", "Which train goes to Leeds?", False), ("assistant", "9", False)],
        },
        asked="What is the name of the kitten I adopted?",
    )
    lines, keys = lme.import_lines(q)
    home = tmp_path / "home"
    lme.build_home(q, home, lines)
    with SqliteStore(home / "tether.db") as store:
        ranked = lme.tether_rankings(store, q, keys)
    assert ranked.sessions[0] == "answer_k_1"
    assert ranked.turns[0] == "answer_k_1_3"
    figures = lme.figures(ranked, keys)
    assert figures["session_recall_all@5"] == 1.0
    assert figures["turn_ndcg_any@10"] == pytest.approx(1.0)
