"""How recall ranks what the index found: rows -> turns -> sessions. Pure, no I/O.

- **Rows.** The store scores each row it finds by bm25 over the query's terms (weighted
  and rescaled by ``core.recall.query.plan``), with the owner's words (user text, notes, pages)
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

from tether.core.recall import query
from tether.core.recall.periods import Period
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
    out.sort(key=lambda scored: -scored.score)
    return out


def by_session(turns: Sequence[Scored], rest: float = SESSION_REST) -> list[SessionScore]:
    """Sessions of the log turns in ``turns`` (best first): best turn + ``rest`` x the others."""
    grouped: dict[str, list[Scored]] = {}
    for t in turns:
        if isinstance(t.key, tuple):
            grouped.setdefault(t.key[0], []).append(t)
    out = []
    for session, ts in grouped.items():
        ordered = sorted(ts, key=lambda scored: -scored.score)
        score = ordered[0].score + rest * sum(s.score for s in ordered[1:])
        out.append(SessionScore(session, score, tuple(ordered)))
    out.sort(key=lambda scored: -scored.score)
    return out


# -- vectors (``memory.vectors``): nearest rows, and their ranking fused with bm25's --------

#: Weight of a reply's or tool output's cosine beside the owner's words, for a turn.
VECTOR_ASIDE = 0.9
#: How the two rankings are fused: a convex blend of their scores, each normalised to 0-1
#: (lexical: min-max over its list, bm25 has no scale of its own; a cosine: from
#: ``COSINE_FLOOR`` to 1, its own scale, so a weak nearest row stays weak). A score
#: blend keeps how far apart two hits are, which reciprocal rank throws away, and is
#: known to need fewer labelled questions to tune (Bruch et al., "An Analysis of Fusion
#: Functions for Hybrid Retrieval", 2023). Chosen on the LongMemEval tuning half over
#: shares 0.1-0.8 and floors 0.0-0.3, taking the middle of the best plateau: there it
#: gave turn R@10 0.889 -> 0.911 and session nDCG@5 0.937 -> 0.944 against reciprocal
#: rank (k=20), the session R@5 the same (benchmarks/RESULTS.md).
#: Share of the vector score in a turn's blend (the lexical one has the rest).
TURN_VECTOR_SHARE = 0.6
#: Share of the vector score in a session's blend: less than for a turn, as the lexical
#: session ranking already sums a conversation's turns.
SESSION_VECTOR_SHARE = 0.25
#: The cosine that normalises to 0: rows this far from the question add nothing.
COSINE_FLOOR = 0.1
#: The least cosine a turn found only by vector needs to be fused at all, when lexical
#: recall found something (a turn lexical recall found too is always fused). 0.0: as
#: measured on LongMemEval (``vectors.MIN_COSINE`` already drops rows pointing away); a
#: higher one also thins the vector session ranking (``by_session`` sums a session's
#: turns), which was not measured.
VECTOR_ALONE = 0.0
#: The least cosine a turn needs when lexical recall found nothing: a question that shares
#: no word with anything the owner said is answered by meaning only when something is
#: really near it. Vector search always has a nearest row; MiniLM puts unrelated texts at
#: 0.0-0.2 (a nonsense or off-topic question's nearest row in a 500-turn haystack: see
#: benchmarks/RESULTS.md, issue 35, branch ``lme-turns``) and a category beside an
#: instance of it at 0.3-0.55 ("streaming service" / an Apple TV+ turn 0.45).
NO_MATCH_COSINE = 0.3
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
    out.sort(key=lambda scored: -scored.score)
    return out


def supported(
    lexical: Sequence[Scored],
    vector: Sequence[Scored],
    alone: float | None = None,
    no_match: float | None = None,
) -> list[Scored]:
    """The turns of ``vector`` worth fusing with ``lexical``: those lexical recall found
    too, and those found only by vector whose best row's cosine (before any period boost)
    is at least ``alone``, or ``no_match`` when ``lexical`` is empty. (Defaults:
    ``VECTOR_ALONE`` and ``NO_MATCH_COSINE``, read when called.)"""
    alone = VECTOR_ALONE if alone is None else alone
    no_match = NO_MATCH_COSINE if no_match is None else no_match
    floor = alone if lexical else max(alone, no_match)
    found = {s.key for s in lexical}
    return [s for s in vector if s.key in found or s.best.score >= floor]


def _lexical_scale(scores: Sequence[float]) -> tuple[float, float]:
    """(low, span) of a lexical list, for min-max normalising; one score (or all equal)
    normalises to 1."""
    if not scores:
        return 0.0, 0.0
    low = min(scores)
    return low, max(scores) - low


def _unit(score: float, low: float, span: float) -> float:
    return (score - low) / span if span > 0 else 1.0


def blend(
    lexical: Sequence[Scored],
    vector: Sequence[Scored],
    share: float | None = None,
    floor: float | None = None,
) -> list[Scored]:
    """Turns of two rankings fused by score: ``(1 - share)`` x the lexical score
    min-max normalised over its list plus ``share`` x the cosine normalised from
    ``floor`` to 1 (a turn missing from one ranking has 0 there); best first, ties in
    lexical order. The row shown is the lexical one when the turn is in both.
    (``share`` and ``floor`` default to ``TURN_VECTOR_SHARE`` and ``COSINE_FLOOR``,
    read when called.)"""
    share = TURN_VECTOR_SHARE if share is None else share
    floor = COSINE_FLOOR if floor is None else floor
    low, span = _lexical_scale([s.score for s in lexical])
    fused: dict[tuple[str, int] | str, tuple[float, Found, tuple[Found, ...]]] = {}
    for s in lexical:
        fused[s.key] = ((1 - share) * _unit(s.score, low, span), s.best, s.rows)
    for s in vector:
        near = share * max(0.0, (s.score - floor) / (1 - floor))
        score, best, rows = fused.get(s.key, (0.0, s.best, ()))
        fused[s.key] = (score + near, best, rows + s.rows)
    out = [Scored(key=key, score=v[0], best=v[1], rows=v[2]) for key, v in fused.items()]
    out.sort(key=lambda scored: -scored.score)
    return out


def blend_sessions(
    lexical: Sequence[SessionScore],
    vector: Sequence[SessionScore],
    share: float | None = None,
    floor: float | None = None,
) -> list[SessionScore]:
    """``blend`` at the level of sessions, each ranking aggregated by ``by_session`` on
    its own scores first. A session's vector score (best turn plus the rest) is not a
    cosine, so it is normalised from ``floor`` to the list's best; a session's turns are
    the lexical ones, then those the vector ranking adds. (``share`` defaults to
    ``SESSION_VECTOR_SHARE``.)"""
    share = SESSION_VECTOR_SHARE if share is None else share
    floor = COSINE_FLOOR if floor is None else floor
    low, span = _lexical_scale([s.score for s in lexical])
    top = max((s.score for s in vector), default=0.0)
    fused: dict[str, tuple[float, tuple[Scored, ...]]] = {}
    for s in lexical:
        fused[s.session] = ((1 - share) * _unit(s.score, low, span), s.turns)
    for s in vector:
        near = share * max(0.0, (s.score - floor) / (top - floor)) if top > floor else 0.0
        score, turns = fused.get(s.session, (0.0, ()))
        seen = {t.key for t in turns}
        fused[s.session] = (score + near, turns + tuple(t for t in s.turns if t.key not in seen))
    out = [SessionScore(session, v[0], v[1]) for session, v in fused.items()]
    out.sort(key=lambda scored: -scored.score)
    return out
