"""Ranking what the index found: owner's words first, turns, sessions, periods."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.core.recall import ranking
from tether.core.recall.periods import Period
from tether.records import Found, LogField

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def row(
    session: str | None,
    turn: int | None,
    score: float,
    *,
    field: LogField | None = "user",
    text: str = "x",
    time: datetime = T0,
    rid: int = 0,
) -> Found:
    ref = f"turn:{session}:{turn}" if session is not None else f"note:{rid}"
    return Found(
        id=rid,
        kind="turn" if session is not None else "note",
        session=session,
        turn=turn,
        field=field,
        tainted=False,
        ref=ref,
        time=time,
        text=text,
        score=score,
    )


def test_a_turn_sums_its_rows_and_shows_its_best() -> None:
    rows = [
        row("a", 1, 1.0, text="I adopted Milo"),
        row("a", 1, 0.4, field="assistant", text="Congratulations on Milo"),
        row("a", 2, 1.2, text="Milo again"),
        row(None, None, 0.5, field=None, text="note about Milo", rid=3),
    ]
    turns = ranking.fold(rows)
    assert [(t.key, round(t.score, 6)) for t in turns] == [
        (("a", 1), 1.4),
        (("a", 2), 1.2),
        ("note:3", 0.5),
    ]
    assert turns[0].best.text == "I adopted Milo"
    assert len(turns[0].rows) == 2


def test_also_words_count_less_in_replies() -> None:
    also = (("garden", 2.0),)
    owner = row("a", 1, 0.0, text="my garden")
    reply = row("a", 2, 0.0, field="assistant", text="your garden")
    assert ranking.row_score(owner, also) == 2.0
    assert ranking.row_score(reply, also) == pytest.approx(2.0 * ranking.ASIDE_WEIGHT)
    # Ranking sessions weighs replies more (still less than the owner's words).
    session_weight = ranking.SESSION_ASIDE_WEIGHT
    assert ranking.ASIDE_WEIGHT < session_weight < 1.0
    assert ranking.row_score(reply, also, aside=session_weight) == pytest.approx(
        2.0 * session_weight
    )
    assert ranking.row_score(owner, also, aside=session_weight) == 2.0


def test_a_row_written_in_the_named_period_is_lifted() -> None:
    week = Period(T0, T0 + timedelta(days=7), "this week")
    inside = row("a", 1, 1.0, time=T0 + timedelta(days=1))
    outside = row("b", 1, 1.5, time=T0 - timedelta(days=1))
    turns = ranking.fold([outside, inside], period=week, boost=1.0)
    assert [t.key for t in turns] == [("a", 1), ("b", 1)]
    assert [t.key for t in ranking.fold([outside, inside], period=week, boost=0.0)] == [
        ("b", 1),
        ("a", 1),
    ]


def test_a_session_is_its_best_turn_plus_a_share_of_the_rest() -> None:
    turns = ranking.fold(
        [row("once", 1, 2.0), row("often", 1, 1.5), row("often", 2, 1.0), row("often", 3, 1.0)]
    )
    sessions = ranking.by_session(turns, rest=0.3)
    assert [s.session for s in sessions] == ["often", "once"]
    assert sessions[0].score == pytest.approx(1.5 + 0.3 * 2.0)
    assert [t.key for t in sessions[0].turns] == [("often", 1), ("often", 2), ("often", 3)]
    # Notes and pages belong to no session.
    assert ranking.by_session(ranking.fold([row(None, None, 1.0, field=None)])) == []


scores = st.floats(min_value=0.001, max_value=100, allow_nan=False)
rows_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 4), scores), max_size=30
)


@settings(max_examples=200, deadline=None)
@given(rows_strategy)
def test_folding_keeps_every_rows_score_once(items: list[tuple[str, int, float]]) -> None:
    rows = [row(s, t, sc, rid=i) for i, (s, t, sc) in enumerate(items)]
    turns = ranking.fold(rows)
    assert sum(t.score for t in turns) == pytest.approx(sum(r.score for r in rows))
    assert len({t.key for t in turns}) == len(turns)
    assert [t.score for t in turns] == sorted((t.score for t in turns), reverse=True)
    sessions = ranking.by_session(turns)
    assert [s.score for s in sessions] == sorted((s.score for s in sessions), reverse=True)
    for s in sessions:
        assert s.score >= s.turns[0].score > 0


@settings(max_examples=100, deadline=None)
@given(rows_strategy, st.sampled_from(["a", "b", "c"]), scores)
def test_another_matching_turn_never_lowers_a_session(
    items: list[tuple[str, int, float]], session: str, extra: float
) -> None:
    rows = [row(s, t, sc, rid=i) for i, (s, t, sc) in enumerate(items)]
    before = {s.session: s.score for s in ranking.by_session(ranking.fold(rows))}
    more = [*rows, row(session, 99, extra, rid=len(rows))]
    after = {s.session: s.score for s in ranking.by_session(ranking.fold(more))}
    assert after[session] > before.get(session, 0.0)


# -- fusion with vector rankings -------------------------------------------------------

_keys = st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 6)), unique=True, max_size=12)


def _ranked(keys: list[tuple[str, int]]) -> list[ranking.Scored]:
    rows = [row(s, t, float(len(keys) - n), rid=n) for n, (s, t) in enumerate(keys)]
    return ranking.fold(rows)


def _near(keys: list[tuple[str, int]]) -> list[ranking.Scored]:
    """A vector ranking: cosines falling from 0.9, best first."""
    rows = [row(s, t, 0.9 - 0.05 * n, rid=100 + n) for n, (s, t) in enumerate(keys)]
    return ranking.fold_best(rows)


@given(_keys, _keys)
@settings(max_examples=200)
def test_blend_keeps_every_turn_once_and_agreement_wins(
    lexical: list[tuple[str, int]], vector: list[tuple[str, int]]
) -> None:
    fused = ranking.blend(_ranked(lexical), _near(vector))
    keys = [s.key for s in fused]
    assert sorted(keys) == sorted(set(lexical) | set(vector))
    assert [s.score for s in fused] == sorted((s.score for s in fused), reverse=True)
    if lexical and vector and lexical[0] == vector[0]:
        assert keys[0] == lexical[0]  # first in both is first fused


@given(_keys)
def test_blend_with_no_vector_ranking_keeps_the_lexical_order(
    lexical: list[tuple[str, int]],
) -> None:
    ranked = _ranked(lexical)
    assert [s.key for s in ranking.blend(ranked, [])] == [s.key for s in ranked]


def test_blend_weighs_normalised_scores() -> None:
    # lexical 10 / 9.9 / 0.1 normalise to 1 / 0.99 / 0; cosines 0.8 / 0.3 to 0.78 / 0.22
    lexical = ranking.fold(
        [row("s", 1, 10.0, rid=1), row("s", 2, 9.9, rid=2), row("s", 3, 0.1, rid=3)]
    )
    vector = ranking.fold_best([row("s", 3, 0.8, rid=4), row("s", 2, 0.3, rid=5)])
    fused = ranking.blend(lexical, vector, share=0.6, floor=0.1)
    # s2: 0.4 x 0.99 + 0.6 x 0.22; s3: 0.6 x 0.78 (a near row beats a lexical-only
    # lead); s1: 0.4 x 1
    assert [s.key for s in fused] == [("s", 2), ("s", 3), ("s", 1)]
    assert [round(s.score, 3) for s in fused] == [0.529, 0.467, 0.4]
    lexical_only = ranking.blend(lexical, vector, share=0.0, floor=0.1)
    assert [s.key for s in lexical_only] == [("s", 1), ("s", 2), ("s", 3)]


def test_a_row_at_the_cosine_floor_adds_nothing() -> None:
    lexical = ranking.fold([row("s", 1, 2.0, rid=1), row("s", 2, 1.0, rid=2)])
    far = ranking.fold_best([row("s", 2, ranking.COSINE_FLOOR, rid=3)])
    fused = ranking.blend(lexical, far)
    assert [s.key for s in fused] == [("s", 1), ("s", 2)]
    assert fused[1].score == 0.0  # the lexical last normalises to 0, the far row adds 0


@given(_keys, _keys)
def test_blend_sessions_ranks_each_session_once(
    lexical: list[tuple[str, int]], vector: list[tuple[str, int]]
) -> None:
    a = ranking.by_session(_ranked(lexical))
    b = ranking.by_session(_near(vector), ranking.VECTOR_SESSION_REST)
    fused = ranking.blend_sessions(a, b)
    assert sorted(s.session for s in fused) == sorted({s for s, _ in lexical + vector})
    assert [s.score for s in fused] == sorted((s.score for s in fused), reverse=True)
    for s in fused:
        assert len({t.key for t in s.turns}) == len(s.turns)


def test_a_turn_found_by_vector_scores_by_its_best_row_and_its_period() -> None:
    inside = Period(T0, T0 + timedelta(days=1), "today")
    rows = [
        row("a", 1, 0.5, rid=1),
        row("a", 1, 0.6, field="assistant", rid=2),
        row("b", 1, 0.7, rid=3, time=T0 - timedelta(hours=1)),
    ]
    turns = ranking.fold_best(rows, inside)
    by_key = {t.key: t.score for t in turns}
    assert by_key[("a", 1)] == pytest.approx(0.6 * ranking.VECTOR_ASIDE * 2)
    assert turns[0].best.id == 2


def test_a_turn_found_only_by_vector_needs_a_floor_and_more_when_no_word_matched() -> None:
    lexical = ranking.fold([row("s", 1, 2.0, rid=1)])
    vector = ranking.fold_best(
        [
            row("s", 1, 0.05, rid=2),  # found by its words too: kept, however far
            row("s", 2, 0.5, rid=3),  # near: kept
            row("s", 3, 0.2, rid=4),  # found only by vector, middling
            row("s", 4, 0.05, rid=5),  # found only by vector, far
        ]
    )
    kept = ranking.supported(lexical, vector, alone=0.1, no_match=0.3)
    assert sorted(s.key for s in kept) == [("s", 1), ("s", 2), ("s", 3)]
    # No word of the question matched: only what is really near it.
    alone = ranking.supported([], vector, alone=0.1, no_match=0.3)
    assert [s.key for s in alone] == [("s", 2)]


def test_the_floor_reads_the_cosine_before_the_period_boost() -> None:
    inside = Period(T0, T0 + timedelta(days=1), "today")
    vector = ranking.fold_best([row("s", 1, 0.2, rid=1)], inside)  # 0.4 once boosted
    assert ranking.supported([], vector, alone=0.1, no_match=0.3) == []
