"""How recall ranks what the index found: rows -> turns -> sessions. Pure, no I/O.

- **Rows.** The store scores each row it finds by bm25 over the query's terms (weighted
  and rescaled by ``core.query.plan``), with the owner's words (user text, notes, pages)
  at full weight and the rest of a session log (assistant replies, tool calls, tool
  summaries) at ``ASIDE_WEIGHT``: what the owner said is what they ask about later, and
  replies restate the question's words in every answer. ``row_score`` adds the ``also``
  words' bonus at the same field weight, and ``PERIOD_BOOST`` when the question names a
  period and the row was written in it.
- **Turns.** ``fold`` sums the rows of a turn (its user text, the reply, tool calls): one
  hit per (session, turn), one per note or page, best first; the text shown is the turn's
  best row.
- **Sessions.** ``by_session`` scores a session by its best turn plus ``SESSION_REST``
  times the others: a conversation that keeps coming back to the question beats one that
  touched it once. Rows are weighed for sessions with ``SESSION_ASIDE_WEIGHT`` in place of
  ``ASIDE_WEIGHT``: which conversation was about something shows in the replies as well.

Every constant was chosen on the tuning half of the LongMemEval benchmark
(``benchmarks/longmemeval_retrieval.py``; figures in ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tether.core import query
from tether.core.periods import Period
from tether.records import Found

#: Weight of assistant replies, tool calls and tool summaries beside the owner's words.
ASIDE_WEIGHT = 0.3
#: The same weight when ranking sessions: what a conversation is about shows in the
#: replies too (the owner asks about "my Sony flash", the replies talk photography).
SESSION_ASIDE_WEIGHT = 0.5
#: Fields weighed at ``ASIDE_WEIGHT``.
ASIDE_FIELDS = frozenset({"assistant", "tool_call", "summary"})
#: A session's score: its best turn plus this times the sum of its other turns.
SESSION_REST = 0.3
#: Score multiplier of a row written within the period a question names.
PERIOD_BOOST = 1.0


@dataclass(frozen=True)
class Scored:
    """A turn (or a note, a page) with its score and the rows that made it."""

    key: tuple[str, int] | str  # (session, turn) for log rows, else the ref
    score: float
    best: Found  # the row shown
    rows: tuple[Found, ...]


@dataclass(frozen=True)
class SessionScore:
    session: str
    score: float
    turns: tuple[Scored, ...]  # best first


def field_weight(row: Found, aside: float = ASIDE_WEIGHT) -> float:
    return aside if row.field in ASIDE_FIELDS else 1.0


def row_score(
    row: Found,
    also: Sequence[tuple[str, float]] = (),
    period: Period | None = None,
    boost: float = PERIOD_BOOST,
    aside: float = ASIDE_WEIGHT,
) -> float:
    """The store's score plus the ``also`` bonus (at the row's field weight, ``aside`` for
    replies and tool output), boosted when the row was written in ``period``."""
    score = row.score + field_weight(row, aside) * query.bonus(row.text, also)
    if period is not None and boost and row.time in period:
        score *= 1 + boost
    return score


def fold(
    rows: Sequence[Found],
    also: Sequence[tuple[str, float]] = (),
    period: Period | None = None,
    boost: float = PERIOD_BOOST,
    aside: float = ASIDE_WEIGHT,
) -> list[Scored]:
    """One ``Scored`` per turn (log rows) or per ref (notes, pages), best first; ties keep
    the order the rows came in. Rows scoring nothing are left out."""
    groups: dict[tuple[str, int] | str, list[tuple[float, Found]]] = {}
    for row in rows:
        score = row_score(row, also, period, boost, aside)
        if score <= 0:
            continue
        key: tuple[str, int] | str
        key = (
            (row.session, row.turn) if row.session is not None and row.turn is not None else row.ref
        )
        groups.setdefault(key, []).append((score, row))
    out = [
        Scored(
            key=key,
            score=sum(s for s, _ in scored),
            best=max(scored, key=lambda sr: sr[0])[1],
            rows=tuple(r for _, r in scored),
        )
        for key, scored in groups.items()
    ]
    out.sort(key=lambda s: -s.score)
    return out


def by_session(turns: Sequence[Scored], rest: float = SESSION_REST) -> list[SessionScore]:
    """Sessions of the log turns in ``turns`` (best first): best turn + ``rest`` x the others."""
    grouped: dict[str, list[Scored]] = {}
    for t in turns:
        if isinstance(t.key, tuple):
            grouped.setdefault(t.key[0], []).append(t)
    out = []
    for session, ts in grouped.items():
        ordered = sorted(ts, key=lambda s: -s.score)
        score = ordered[0].score + rest * sum(s.score for s in ordered[1:])
        out.append(SessionScore(session, score, tuple(ordered)))
    out.sort(key=lambda s: -s.score)
    return out


# -- vectors (``memory.vectors``): nearest rows, and their ranking fused with bm25's --------

#: Weight of a reply's or tool output's cosine beside the owner's words, for a turn.
VECTOR_ASIDE = 0.9
#: Reciprocal-rank fusion's constant: a hit at rank r counts 1 / (RRF_K + r).
RRF_K = 20
#: Weight of the vector ranking in the fusion (the lexical one weighs 1).
VECTOR_WEIGHT = 1.0
#: ``by_session``'s ``rest`` for sessions ranked by vector (as measured: the lexical value;
#: other turns are all middling, so summing them would favour long sessions.
VECTOR_SESSION_REST = 0.3


def fold_best(
    rows: Sequence[Found],
    period: Period | None = None,
    boost: float = PERIOD_BOOST,
    aside: float | None = None,
) -> list[Scored]:
    """Like ``fold``, but a turn scores by its best row (similarities do not add up: a
    turn with a reply is not twice as near as one without). ``aside``: ``VECTOR_ASIDE``."""
    aside = VECTOR_ASIDE if aside is None else aside
    groups: dict[tuple[str, int] | str, list[tuple[float, Found]]] = {}
    for row in rows:
        score = row.score * field_weight(row, aside)
        if period is not None and boost and row.time in period:
            score *= 1 + boost
        if score <= 0:
            continue
        key: tuple[str, int] | str
        key = (
            (row.session, row.turn) if row.session is not None and row.turn is not None else row.ref
        )
        groups.setdefault(key, []).append((score, row))
    out = []
    for key, scored in groups.items():
        top = max(scored, key=lambda sr: sr[0])
        out.append(Scored(key=key, score=top[0], best=top[1], rows=tuple(r for _, r in scored)))
    out.sort(key=lambda s: -s.score)
    return out


def rrf(
    lexical: Sequence[Scored],
    vector: Sequence[Scored],
    k: float | None = None,
    weight: float | None = None,
) -> list[Scored]:
    """Reciprocal-rank fusion of two rankings of turns: each scores 1 / (k + rank) in a
    ranking it is in (rank 1 first), the vector one times ``weight``; best first, ties in
    lexical order. The row shown is the lexical one when the turn is in both. (``k`` and
    ``weight`` default to ``RRF_K`` and ``VECTOR_WEIGHT``, read when called.)"""
    k = RRF_K if k is None else k
    weight = VECTOR_WEIGHT if weight is None else weight
    fused: dict[tuple[str, int] | str, tuple[float, Found, tuple[Found, ...]]] = {}
    for w, ranking in ((1.0, lexical), (weight, vector)):
        for rank, s in enumerate(ranking, start=1):
            score, best, rows = fused.get(s.key, (0.0, s.best, ()))
            fused[s.key] = (score + w / (k + rank), best, rows + s.rows)
    out = [Scored(key=key, score=v[0], best=v[1], rows=v[2]) for key, v in fused.items()]
    out.sort(key=lambda s: -s.score)
    return out


def rrf_sessions(
    lexical: Sequence[SessionScore],
    vector: Sequence[SessionScore],
    k: float | None = None,
    weight: float | None = None,
) -> list[SessionScore]:
    """``rrf`` at the level of sessions: each ranking aggregated by ``by_session`` on its
    own scores first, then fused; a session's turns are the lexical ones, then the
    vector ones it adds."""
    k = RRF_K if k is None else k
    weight = VECTOR_WEIGHT if weight is None else weight
    fused: dict[str, tuple[float, tuple[Scored, ...]]] = {}
    for w, ranking in ((1.0, lexical), (weight, vector)):
        for rank, s in enumerate(ranking, start=1):
            score, turns = fused.get(s.session, (0.0, ()))
            seen = {t.key for t in turns}
            fused[s.session] = (
                score + w / (k + rank),
                turns + tuple(t for t in s.turns if t.key not in seen),
            )
    out = [SessionScore(session, v[0], v[1]) for session, v in fused.items()]
    out.sort(key=lambda s: -s.score)
    return out
