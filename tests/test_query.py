"""Query analysis: whatever a person types becomes terms FTS5 takes literally, never an error."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tether.core import query
from tether.ports import IndexCursor, LogRow
from tether.stores.sqlite import SqliteStore

T0 = datetime(2026, 11, 1, tzinfo=UTC)

FTS_SYNTAX = [*list("\"*^:()-+{}.,;'"), "AND", "OR", "NOT", "NEAR", "NEAR(", "text:", " ", "é"]


@pytest.fixture(scope="module")
def fts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteStore]:
    """A real store (the real FTS5 table and tokenizer) holding a few rows."""
    store = SqliteStore(tmp_path_factory.mktemp("fts") / "tether.db")
    rows = [
        LogRow(session="s", epoch=0, turn=i, field="user", text=text, tainted=False, time=T0)
        for i, text in enumerate(
            [
                "I adopted a cat named Milo in March",
                "near the river AND the old mill",
                "naïve café in Straße 5 with emoji 🐈",
                'under_score words and quotes "like this"',
            ],
            start=1,
        )
    ]
    store.index_log_rows(rows, IndexCursor(path="s/0.jsonl", offset=1, turn=4, tainted=False))
    yield store
    store.close()


def accepted(store: SqliteStore, expression: str) -> None:
    """FTS5 parses ``expression`` (search raises StoreError if it does not)."""
    store.search(expression, 3)
    store.count_matches([expression], 10)


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.text(),
        st.lists(st.sampled_from([*FTS_SYNTAX, "cat", "milo", "Ω", "日本語"])).map("".join),
        st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"])),
    ),
    st.sampled_from([None, 1, 4]),
)
@example('"', None)
@example("((( NEAR(a b, 3) AND OR NOT *", None)
@example("text:cat ^milo", 1)
@example("🐈🐈🐈", None)
@example("_", None)
@example("a\u0301b", None)
def test_any_text_is_none_or_an_expression_fts5_accepts(
    fts: SqliteStore, text: str, prefix_min: int | None
) -> None:
    expression = query.match_expression(text, prefix_min=prefix_min)
    if expression is None:
        assert query.terms(text) == ()
        return
    accepted(fts, expression)
    words = query.terms(text)
    counts = [len(w) % 3 * 3000 for w in words]  # some zero, some over budget, some under
    for attempt in query.plan(words, counts, budget=4000, prefix_min=prefix_min):
        accepted(fts, attempt.match)


def test_fts_operators_and_quotes_are_plain_words(fts: SqliteStore) -> None:
    assert query.terms('cats AND "dogs" OR NOT birds NEAR(fish)') == (
        "cats",
        "dogs",
        "birds",
        "near",
        "fish",
    )
    expression = query.match_expression("river AND mill")
    assert expression == '"river" OR "mill"'
    hits = fts.search(expression, 5)
    assert [h.text for h in hits] == ["near the river AND the old mill"]
    # A column filter and a caret are text, not syntax.
    assert query.match_expression("text:milo ^cat") == '"text" OR "milo" OR "cat"'


def test_quote_doubles_quotes() -> None:
    assert query.quote('say "hi"') == '"say ""hi"""'
    assert query.quote("adopt", prefix=True) == '"adopt"*'


@pytest.mark.parametrize(
    "text",
    ["", "   ", "?!", "((((", '"""', "what did I do?", "When was it, and where?", "🐈‍⬛ 🎉"],
)
def test_nothing_searchable_is_none(text: str) -> None:
    assert query.match_expression(text) is None


def test_unbalanced_parentheses_and_emoji_keep_the_words(fts: SqliteStore) -> None:
    assert query.terms("(milo (cat 🐈") == ("milo", "cat")
    hits = fts.search(query.match_expression("(milo (cat 🐈") or "", 5)
    assert hits[0].text.startswith("I adopted a cat named Milo")


def test_a_question_keeps_only_what_it_is_about() -> None:
    assert query.terms("When did I adopt my cat?") == ("adopt", "cat")
    assert query.terms("What's the name of the restaurant we booked?") == (
        "name",
        "restaurant",
        "booked",
    )


def test_terms_are_distinct_casefolded_and_lowercase() -> None:
    assert query.terms("Straße STRASSE straße Cat CAT cat") == ("straße", "cat")


def test_ten_kilobytes_of_text_is_bounded(fts: SqliteStore) -> None:
    text = " ".join(f'word{i} NEAR( "x{i}" AND' for i in range(1200))
    assert len(text) > 10_000
    words = query.terms(text)
    assert len(words) == query.MAX_TERMS
    expression = query.match_expression(text)
    assert expression is not None
    accepted(fts, expression)


def test_very_long_tokens_are_dropped() -> None:
    assert query.terms("a" * 10_000 + " cat") == ("cat",)


def test_prefix_for_longer_terms_only() -> None:
    assert query.match_expression("adopt cat", prefix_min=4) == '"adopt"* OR "cat"'


def test_prefix_finds_the_rest_of_a_word(fts: SqliteStore) -> None:
    assert fts.search(query.match_expression("mil") or "", 5) == []
    hits = fts.search(query.match_expression("mil", prefix_min=3) or "", 5)
    assert {h.text for h in hits} == {
        "I adopted a cat named Milo in March",
        "near the river AND the old mill",
    }


def test_stemming_finds_other_forms_of_a_word(fts: SqliteStore) -> None:
    hits = fts.search(query.match_expression("adopting cats") or "", 5)
    assert [h.text for h in hits] == ["I adopted a cat named Milo in March"]


def test_diacritics_fold(fts: SqliteStore) -> None:
    hits = fts.search(query.match_expression("naive cafe") or "", 5)
    assert [h.turn for h in hits] == [3]


# -- plan -------------------------------------------------------------------------------


def test_plan_ranks_the_rare_terms_and_the_common_only_reorder() -> None:
    [attempt] = query.plan(
        ["time", "garden", "milo"], [90_000, 1_500, 12], budget=4000, total=1_000_000
    )
    assert (attempt.match, attempt.mode) == ('"garden" OR "milo"', "rank")
    [(word, weight)] = attempt.also
    assert word == "time"
    assert weight == pytest.approx(math.log(910_000.5 / 90_000.5))


def test_plan_keeps_adding_terms_while_they_fit_the_budget() -> None:
    attempts = query.plan(["a1", "b2", "c3"], [1000, 2000, 1000], budget=4000, total=10**6)
    assert attempts == (query.Attempt('"a1" OR "b2" OR "c3"'),)
    [attempt] = query.plan(["a1", "b2", "c3"], [1000, 2500, 1000], budget=4000, total=10**6)
    assert attempt.match == '"a1" OR "c3"'
    assert [w for w, _ in attempt.also] == ["b2"]


def test_bonus_counts_each_common_word_a_row_holds_once() -> None:
    also = (("booked", 2.0), ("restaurant", 1.5), ("time", 0.5))
    assert query.bonus("We book a table at the restaurant, restaurants!", also) == 3.5
    assert query.bonus("nothing here", also) == 0.0
    assert query.bonus("anything", ()) == 0.0


def test_weight_is_bm25_idf_and_never_negative() -> None:
    assert query.weight(10, 1000) > query.weight(100, 1000) > 0
    assert query.weight(900, 1000) == pytest.approx(1e-6)
    assert query.weight(50, 0) == pytest.approx(1e-6)  # unknown total: no weight, no error


def test_plan_when_every_term_is_common_takes_the_newest_with_all_then_any() -> None:
    all_, any_ = query.plan(["time", "people"], [90_000, 50_000], budget=4000, total=10**6)
    assert (all_.match, all_.mode, all_.within) == ('"time" AND "people"', "newest", 400_000)
    assert (any_.match, any_.mode, any_.within) == ('"time" OR "people"', "newest", None)
    assert [w for w, _ in all_.also] == [w for w, _ in any_.also] == ["time", "people"]
    assert all_.also[1][1] > all_.also[0][1]  # the less common word weighs more
    [alone] = query.plan(["time"], [90_000], budget=4000, total=10**6)
    assert (alone.match, alone.mode) == ('"time"', "newest")


def test_plan_drops_terms_that_match_nothing() -> None:
    assert query.plan(["zzz", "milo"], [0, 3], budget=10) == (query.Attempt('"milo"'),)
    assert query.plan(["zzz"], [0], budget=10) == ()
    assert query.plan([], [], budget=10) == ()


def test_plan_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="one count per word"):
        query.plan(["a"], [], budget=10)
    with pytest.raises(ValueError, match="budget"):
        query.plan(["a"], [1], budget=0)
