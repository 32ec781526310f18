"""A checkpoint window's grid of parts and its coverage by banked ranges
(``core.checkpoints.parts``), property-tested."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tether.core.checkpoints.parts import covered, grid, pieces
from tether.core.checkpoints.window import Turn, render

texts = st.text(alphabet=st.sampled_from("ab \n"), max_size=30)


def numbered(words: list[str]) -> list[Turn]:
    return [Turn("user", w, "2026-11-01T10:00:00Z", f"id-{i}") for i, w in enumerate(words)]


@given(st.lists(texts, max_size=30), st.integers(1, 120))
def test_the_grid_cuts_a_window_into_ordered_parts_within_the_size(
    words: list[str], size: int
) -> None:
    turns = numbered(words)
    parts = grid(turns, size)
    assert [i for a, b in parts for i in range(a, b)] == list(range(len(turns)))
    for a, b in parts:
        if b - a > 1:
            assert sum(len(render((t,))) + 1 for t in turns[a:b]) <= size


@given(st.lists(texts, max_size=30), st.lists(st.booleans(), max_size=30), st.integers(1, 120))
def test_pieces_hold_every_uncovered_turn_once_and_no_covered_one(
    words: list[str], flags: list[bool], size: int
) -> None:
    turns = numbered(words)
    cover = (flags + [False] * len(turns))[: len(turns)]
    got = [t for p in pieces(turns, cover, size) for t in p.turns]
    want = [t for t, c in zip(turns, cover, strict=True) if not c]
    assert all(t in want for t in got)
    assert len({t.uid for t in got}) == len(got)
    assert render(got) == render(want)  # no text of an uncovered turn is left out
    # the parts are the window's grid, whatever was covered: two readers cut alike
    for p in pieces(turns, cover, size):
        a, b = grid(turns, size)[p.part - 1]
        assert all(t in turns[a:b] for t in p.turns)
        assert p.parts == len(grid(turns, size))


@given(st.integers(0, 20), st.data())
def test_a_banked_range_covers_exactly_its_turns(n: int, data: st.DataObject) -> None:
    turns = numbered(["x"] * n)
    if n == 0:
        assert covered(turns, [("id-0", "id-0")]) == []
        return
    i = data.draw(st.integers(0, n - 1))
    j = data.draw(st.integers(i, n - 1))
    cover = covered(turns, [(f"id-{i}", f"id-{j}")])
    assert cover == [i <= k <= j for k in range(n)]
    # a range that began before the read covers from its start; one after it, nothing
    assert covered(turns, [("gone", f"id-{j}")]) == [k <= j for k in range(n)]
    assert covered(turns, [(f"id-{i}", "later")]) == [False] * n
