"""A checkpoint window cut into parts and compared with what is banked, pure.

A window can be tens of MB: it is banked in parts, one segment each. Banking is by
content range: a banked range is the harness's ids of its first and last record; a
transcript is append-only, so a range whose last id is in a read covers every turn from
its first id (or the read's start) to it (``covered``). A window is cut into parts on a
grid fixed by its own turns (``grid``: greedy from its first turn, at most ``max_chars``
of rendering a part), so two readers of the same window, whatever they banked before, cut
the same parts; what a part lacks is banked as a ``Piece`` (``pieces``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tether.core.checkpoints.window import Turn, render


@dataclass(frozen=True)
class Piece:
    """Turns of a window still to bank: within part ``part`` (1-based) of the ``parts`` of
    the window's grid; ``key`` is the id of the window's first record."""

    turns: tuple[Turn, ...]
    part: int
    parts: int
    key: str

    @property
    def first(self) -> str:
        return self.turns[0].uid

    @property
    def last(self) -> str:
        return self.turns[-1].uid


def grid(turns: Sequence[Turn], max_chars: int) -> list[tuple[int, int]]:
    """The window's parts as ``[start, end)`` turn indexes: greedy from the first turn,
    each at most ``max_chars`` of rendering (a longer turn is a part alone)."""
    out: list[tuple[int, int]] = []
    start = used = 0
    for i, t in enumerate(turns):
        cost = len(render((t,))) + 1
        if i > start and used + cost > max_chars:
            out.append((start, i))
            start, used = i, 0
        used += cost
    if start < len(turns):
        out.append((start, len(turns)))
    return out


def covered(turns: Sequence[Turn], spans: Iterable[tuple[str, str]]) -> list[bool]:
    """Which ``turns`` (one read, file order) the banked ranges ``spans`` (first id, last
    id) hold. A range whose last id is not in the read covers nothing of it (it ended
    before, or the read does not know where); one whose first id is not in the read began
    before it."""
    at: dict[str, int] = {}
    for i, t in enumerate(turns):
        if t.uid:
            at.setdefault(t.uid, i)
    out = [False] * len(turns)
    for first, last in spans:
        j = at.get(last) if last else None
        if j is None:
            continue
        i = at.get(first, 0) if first else j
        if i > j:
            continue
        for k in range(i, j + 1):
            out[k] = True
    return out


def pieces(turns: Sequence[Turn], cover: Sequence[bool], max_chars: int) -> list[Piece]:
    """What is left to bank of a window: for each part of its grid, every run of turns
    not covered that has text, in order."""
    parts = grid(turns, max_chars)
    key = turns[0].uid if turns else ""
    out: list[Piece] = []
    for n, (a, b) in enumerate(parts, start=1):
        run: list[Turn] = []
        for k in range(a, b + 1):
            if k < b and not cover[k]:
                run.append(turns[k])
                continue
            if run and render(run):
                out.append(Piece(tuple(run), n, len(parts), key))
            run = []
    return out
