"""Query analysis: whatever a person types becomes plain search terms (``SearchQuery``),
which the SQLite store renders as FTS5 that is taken literally, never an error."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Literal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from search_helpers import words
from tether.core.recall import query
from tether.core.recall.inflections import forms
from tether.core.recall.synonyms import synonyms
from tether.records import IndexCursor, LogRow, SearchQuery, SearchTerm
from tether.stores.sqlite import SqliteStore
from tether.stores.sqlite import fts as sqlite_fts

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


def match_expression(text: str, *, prefix_min: int | None = None) -> str | None:
    """The FTS5 the store runs for the plain query of ``text`` (None: nothing to search)."""
    plain = query.plain(text, prefix_min=prefix_min)
    return None if plain is None else sqlite_fts.expression(plain)


def accepted(store: SqliteStore, q: SearchQuery) -> None:
    """FTS5 parses what the store renders for ``q`` (search raises StoreError if not)."""
    assert sqlite_fts.expression(q) is not None
    store.search(q, 3)
    store.count_matches([q], 10)


def run_plan(store: SqliteStore, attempts: tuple[query.Attempt, ...]) -> None:
    for attempt in attempts:
        if attempt.mode == "rank":
            store.search_terms(attempt.query, 3, aside=0.3)
        else:
            store.newest(attempt.query, 3, within=attempt.within)


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
@example('"NEAR(a" "b) AND" cat* *milo ** "" "x"*', None)
def test_any_text_is_none_or_an_expression_fts5_accepts(
    fts: SqliteStore, text: str, prefix_min: int | None
) -> None:
    plain = query.plain(text, prefix_min=prefix_min)
    if plain is None:
        assert query.terms(text) == ()
        return
    accepted(fts, plain)
    analysed = query.analyse(text)
    for term in analysed.terms:
        accepted(fts, SearchQuery((term,)))
    # Some zero, some over budget, some under.
    counts = [len(sqlite_fts.term(t)) % 3 * 3000 for t in analysed.terms]
    run_plan(fts, query.plan(analysed, counts, budget=4000, total=10**6))
    run_plan(fts, query.plan(analysed, [1] * len(analysed.terms), budget=4000, total=4))


def test_fts_operators_and_quotes_are_plain_words(fts: SqliteStore) -> None:
    assert query.terms('cats AND "dogs" OR NOT birds NEAR(fish)') == (
        "cats",
        "dogs",
        "birds",
        "near",
        "fish",
    )
    plain = query.plain("river AND mill")
    assert plain == words("river", "mill")
    assert match_expression("river AND mill") == '"river" OR "mill"'
    assert plain is not None
    hits = fts.search(plain, 5)
    assert [h.text for h in hits] == ["near the river AND the old mill"]
    # A column filter and a caret are text, not syntax.
    assert match_expression("text:milo ^cat") == '"text" OR "milo" OR "cat"'


def test_quote_doubles_quotes() -> None:
    assert sqlite_fts.term(SearchTerm('say "hi"')) == '"say ""hi"""'
    assert sqlite_fts.term(SearchTerm("adopt", "prefix")) == '"adopt"*'
    assert sqlite_fts.term(SearchTerm("old mill", "phrase")) == '"old mill"'
    # A NUL would end an FTS5 string early; to the tokenizer it separates, as a space.
    assert sqlite_fts.term(SearchTerm("a\x00b")) == '"a b"'
    assert sqlite_fts.expression(words("a", "b", require="all")) == '"a" AND "b"'
    assert sqlite_fts.expression(words()) is None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.builds(
            SearchTerm,
            st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"])),
            st.sampled_from(["term", "phrase", "prefix"]),
            st.floats(0.01, 100),
        ),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(["any", "all"]),
)
def test_any_record_renders_to_fts5_the_store_accepts(
    fts: SqliteStore, terms: list[SearchTerm], require: Literal["any", "all"]
) -> None:
    q = SearchQuery(tuple(terms), require=require)
    accepted(fts, q)
    fts.search_terms(q, 3, aside=0.3)
    fts.newest(q, 3, within=2)


@pytest.mark.parametrize(
    "text",
    ["", "   ", "?!", "((((", '"""', "what did I do?", "When was it, and where?", "+ = $ <"],
)
def test_nothing_searchable_is_none(text: str) -> None:
    assert match_expression(text) is None


def test_emoji_alone_are_searchable() -> None:
    # Issue 17: unicode61 drops emoji, so they are searched as their index tokens.
    assert query.terms("🐈‍⬛ 🎉") == ("zsym128008x11035", "zsym128008", "zsym11035", "zsym127881")


def test_unbalanced_parentheses_and_emoji_keep_the_words(fts: SqliteStore) -> None:
    assert query.terms("(milo (cat 🐈") == ("milo", "cat", "zsym128008")
    hits = fts.search(query.plain("(milo (cat 🐈") or SearchQuery(), 5)
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
    plain = query.plain(text)
    assert plain is not None
    accepted(fts, plain)


def test_very_long_tokens_are_dropped() -> None:
    assert query.terms("a" * 10_000 + " cat") == ("cat",)


def test_prefix_for_longer_terms_only() -> None:
    assert match_expression("adopt cat", prefix_min=4) == '"adopt"* OR "cat"'
    assert query.plain("adopt cat", prefix_min=4) == SearchQuery(
        (SearchTerm("adopt", "prefix"), SearchTerm("cat"))
    )


def test_prefix_finds_the_rest_of_a_word(fts: SqliteStore) -> None:
    assert fts.search(query.plain("mil") or SearchQuery(), 5) == []
    hits = fts.search(query.plain("mil", prefix_min=3) or SearchQuery(), 5)
    assert {h.text for h in hits} == {
        "I adopted a cat named Milo in March",
        "near the river AND the old mill",
    }


def test_stemming_finds_other_forms_of_a_word(fts: SqliteStore) -> None:
    hits = fts.search(query.plain("adopting cats") or SearchQuery(), 5)
    assert [h.text for h in hits] == ["I adopted a cat named Milo in March"]


def test_diacritics_fold(fts: SqliteStore) -> None:
    hits = fts.search(query.plain("naive cafe") or SearchQuery(), 5)
    assert [h.turn for h in hits] == [3]


# -- analysis ---------------------------------------------------------------------------


def exprs(text: str) -> list[tuple[str, str | None, float]]:
    """(FTS5 the store runs, the word ``bonus`` looks for, weight) of each term."""
    return [(sqlite_fts.term(t), query.word_of(t), t.weight) for t in query.analyse(text).terms]


def test_analyse_adds_a_verbs_irregular_forms_at_a_lower_weight() -> None:
    half = query.VARIANT_WEIGHT
    assert exprs("What did I catch for Ann?") == [
        ('"catch"', "catch", 1.0),
        ('"ann"', "ann", 1.0),
        ('"caught"', "caught", half),
    ]
    # Forms already asked for are not added twice.
    assert [w for _, w, _ in exprs("caught catch")] == ["caught", "catch"]
    # A verb at the end of a line of the table is a group of its own (it once took in
    # the next line's first verb: "catch" searched "choose").
    assert forms("catch") == ("caught",)
    assert forms("choose") == ("chose", "chosen")
    assert forms("begin") == ("began", "begun")


def test_analyse_honours_quoted_phrases_and_prefixes() -> None:
    assert exprs('the "Ethereal Dreams" painting, photo* and a*') == [
        ('"ethereal"', "ethereal", 1.0),
        ('"dreams"', "dreams", 1.0),
        ('"painting"', "painting", 1.0),
        ('"photo"*', None, 1.0),
        ('"ethereal dreams"', None, 1.0),
    ]
    assert query.analyse('the "Ethereal Dreams" painting, photo*') == SearchQuery(
        (
            SearchTerm("ethereal"),
            SearchTerm("dreams"),
            SearchTerm("painting"),
            SearchTerm("photo", "prefix"),
            SearchTerm("ethereal dreams", "phrase"),
        )
    )
    # Curly quotes too; one word in quotes is just a word.
    assert ('"lovers unite"', None, 1.0) in exprs("“Lovers Unite” meetup")
    assert [e for e, _, _ in exprs('"milo"')] == ['"milo"']


def test_analyse_adds_the_synonyms_of_buying_and_spending_at_the_variant_weight() -> None:
    half = query.VARIANT_WEIGHT
    got = {(e, w) for e, _, w in exprs("Which lamp did I purchase?")}
    assert {('"purchase"', 1.0), ('"buy"', half), ('"bought"', half), ('"got"', half)} <= got
    # Through an irregular form and an inflection too; "got" alone stays a stop word.
    assert set(synonyms("bought")) == {"buy", "purchase", "acquire", "got"}
    assert set(synonyms("purchased")) == {"buy", "bought", "acquire", "got"}
    assert "paid" in synonyms("spending")
    assert "cost" in synonyms("spent")
    assert synonyms("lamp") == ()
    assert exprs("what have I got") == []


def test_single_quoted_titles_are_phrases_and_apostrophes_are_not_quotes() -> None:
    phrases = [
        e
        for e, word, _ in exprs(
            "Did I finish 'The Power' before 'Sapiens: A Brief History' at St. Mary's?"
        )
        if word is None
    ]
    assert phrases == ['"the power"', '"sapiens a brief history"']
    # An apostrophe inside a word neither opens nor closes a quote...
    assert [e for e, w, _ in exprs("'The Handmaid's Tale' on Hulu") if w is None] == [
        '"the handmaid s tale"'
    ]
    # ...and possessives, contractions and a lone quote make no phrase at all.
    for text in ("Emma's recipes and the students' books", "don't 'forget", "rock 'n' roll"):
        assert [e for e, w, _ in exprs(text) if w is None] == [], text


def test_phrases_and_prefixes_find_what_they_say(fts: SqliteStore) -> None:
    [phrase] = [t for t in query.analyse('"old mill"').terms if t.kind == "phrase"]
    assert [h.turn for h in fts.search(SearchQuery((phrase,)), 5)] == [2]
    [prefix] = query.analyse("mil*").terms
    assert {h.turn for h in fts.search(SearchQuery((prefix,)), 5)} == {1, 2}


# -- plan -------------------------------------------------------------------------------


def ranked(attempt: query.Attempt) -> list[tuple[str, float]]:
    """(FTS5 the store runs, multiplier) of each term a rank attempt scores."""
    assert attempt.query.require == "any"
    return [(sqlite_fts.term(t), t.weight) for t in attempt.query.terms]


def match(attempt: query.Attempt) -> str | None:
    """The FTS5 the store runs for a newest attempt."""
    return sqlite_fts.expression(attempt.query)


def test_plan_ranks_the_rare_terms_and_the_common_only_reorder() -> None:
    [attempt] = query.plan(
        words("time", "garden", "milo"), [90_000, 1_500, 12], budget=4000, total=1_000_000
    )
    assert attempt.mode == "rank"
    assert [e for e, _ in ranked(attempt)] == ['"garden"', '"milo"']
    [(word, weight)] = attempt.also
    assert word == "time"
    assert weight == pytest.approx(math.log(1 + 910_000.5 / 90_000.5))


def test_plan_rescales_bm25_to_a_positive_idf_times_the_weight() -> None:
    terms = SearchQuery((SearchTerm("cat"), SearchTerm("caught", weight=0.5)))
    [attempt] = query.plan(terms, [3, 3], budget=10, total=4)
    # In 3 of 4 rows FTS5's idf is floored at 1e-6: the multiplier restores Lucene's.
    (_, cat), (_, caught) = ranked(attempt)
    assert cat == pytest.approx(query.idf(3, 4) / 1e-6)
    assert caught == pytest.approx(cat / 2)
    assert query.idf(3, 4) > 0


def test_plan_keeps_adding_terms_while_they_fit_the_budget() -> None:
    [attempt] = query.plan(words("a1", "b2", "c3"), [1000, 2000, 1000], budget=4000, total=10**6)
    assert [e for e, _ in ranked(attempt)] == ['"a1"', '"b2"', '"c3"']
    [attempt] = query.plan(words("a1", "b2", "c3"), [1000, 2500, 1000], budget=4000, total=10**6)
    assert [e for e, _ in ranked(attempt)] == ['"a1"', '"c3"']
    assert [w for w, _ in attempt.also] == ["b2"]


def test_bonus_counts_each_common_word_a_row_holds_once() -> None:
    also = (("booked", 2.0), ("restaurant", 1.5), ("time", 0.5))
    assert query.bonus("We book a table at the restaurant, restaurants!", also) == 3.5
    assert query.bonus("nothing here", also) == 0.0
    assert query.bonus("anything", ()) == 0.0


def test_idf_is_positive_and_fts5s_never_negative() -> None:
    assert query.fts5_idf(10, 1000) > query.fts5_idf(100, 1000) > 0
    assert query.fts5_idf(900, 1000) == pytest.approx(1e-6)
    assert query.fts5_idf(50, 0) == pytest.approx(1e-6)  # unknown total: no weight, no error
    assert query.idf(10, 1000) > query.idf(900, 1000) > query.idf(1000, 1000) > 0
    assert query.weight(10, 1000) == query.fts5_idf(10, 1000)


def test_plan_when_every_term_is_common_takes_the_newest_with_all_then_any() -> None:
    all_, any_ = query.plan(words("time", "people"), [90_000, 50_000], budget=4000, total=10**6)
    assert (match(all_), all_.mode, all_.within) == ('"time" AND "people"', "newest", 400_000)
    assert (match(any_), any_.mode, any_.within) == ('"time" OR "people"', "newest", None)
    assert all_.query == words("time", "people", require="all")
    assert [w for w, _ in all_.also] == [w for w, _ in any_.also] == ["time", "people"]
    assert all_.also[1][1] > all_.also[0][1]  # the less common word weighs more
    [alone] = query.plan(words("time"), [90_000], budget=4000, total=10**6)
    assert (match(alone), alone.mode) == ('"time"', "newest")


def test_plan_drops_terms_that_match_nothing() -> None:
    [attempt] = query.plan(words("zzz", "milo"), [0, 3], budget=10)
    assert [e for e, _ in ranked(attempt)] == ['"milo"']
    assert query.plan(words("zzz"), [0], budget=10) == ()
    assert query.plan(words(), [], budget=10) == ()


def test_plan_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="one count per term"):
        query.plan(words("a"), [], budget=10)
    with pytest.raises(ValueError, match="budget"):
        query.plan(words("a"), [1], budget=0)
