"""``recall``: search memory with a question; what the agent's tool and the CLI both run.

The question is analysed by ``tether.core.recall.query`` into a ``SearchQuery`` (plain words,
phrases, prefixes and verb forms, never search syntax: the store renders it for its
index), the store counts how many rows each term matches, and ``query.plan`` decides
what to rank so a recall stays fast on millions of rows. A period the question names
("last week", "in March": ``core.recall.periods``, relative to ``time``) lifts what was written
in it. ``core.recall.ranking`` weighs the owner's words above replies and tool output and folds
rows into one hit per (session, turn). Every hit returned is logged in the recalls log
(counts and last found times survive a re-index).

Identity entries (memory.md) and the sweep's active facts are searched too, as kinds
``identity`` and ``fact``: a recall first brings their index rows in step (a cheap check
when nothing changed; see ``memory.facts`` and ``stores.memory``), from the
``SweepStore`` its caller passes (none: no facts).

``recall_sessions`` is the same search ranked by session: a session's turn hits
aggregated by ``core.recall.ranking.by_session``, with the assistant's side of the conversation
weighed more than for a turn (``ranking.SESSION_ASIDE_WEIGHT``).

Summary units (``core.recall.summaries``: a session's digest, a compaction's summary; kinds
``session-summary`` / ``epoch-summary``) are found like any row and placed by ``_placed``:
weighed by ``SUMMARY_WEIGHT``, at most ``SUMMARY_SLOTS`` of the k, and after the other
turns when a turn it covers ranks above it; their hits carry the range they stand for
(``_spanned``).

A question asking for a sum of money ("how much did I spend on ...") lifts the turns found
where the owner stated one (``core.recall.amounts``), lexical or fused.

Handed a complete ``memory.vectors.Vectors``, both also embed the question once (its
nearest rows searched while the lexical search runs on the vectors' worker thread; a
question asked again is not embedded again) and fuse its nearest rows with the lexical
ranking by a blend of their normalised scores (``ranking.blend``); when the question's
words found nothing, only turns really near it (``ranking.supported``: a question related
to nothing finds nothing, not the nearest unrelated turns). Turns for ``recall``; for
``recall_sessions``, each ranking aggregated per session first, then the sessions
blended (``ranking.blend_sessions``). The period boost applies to both rankings. The API
and what is returned are the same with and without vectors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import msgspec

from tether.core.recall import amounts, periods, query, ranking, standing, summaries, timeline
from tether.errors import BadInputError, DiskFullError, StoreError
from tether.memory.facts import sync_facts
from tether.memory.identity import Identity
from tether.memory.vectors import POOL as VECTOR_POOL
from tether.memory.vectors import Vectors, vector_turns
from tether.ports import RecallStore, SweepStore, TextSearch, TurnReader
from tether.records import Found, Hit, SearchQuery
from tether.scan.allow import home_allow

#: Rows fetched per hit wanted, so the several rows of one turn still leave k hits.
FANOUT = 4
#: Rows fetched at least: enough for a turn's rows to meet, and for ``also`` words
#: (``query.bonus``) to re-order a rare word's few dozen matches.
POOL = 200
#: Newest rows scored when every word is common (no bm25; see ``query.plan``).
NEWEST_POOL = 200
#: Turns a session search looks at (about ten a session).
SESSION_TURNS = 100
#: How ``recall_sessions`` fuses vectors: "sessions" ranks sessions by vector on their
#: own (``ranking.VECTOR_SESSION_REST``) and fuses the two session rankings; "turns"
#: fuses the turn rankings and aggregates the fused turns per session.
SESSION_FUSION = "sessions"
#: Leave the words that named a period ("two weeks ago") out of the search terms; month
#: and weekday names stay (measured on LongMemEval: see benchmarks/RESULTS.md).
STRIP_PERIOD = True
#: Spread the hits of a question that asks for an order or a count over sessions
#: (``timeline.spread``; measured in benchmarks/RESULTS.md, "Recall over a long life").
SPREAD = False
#: Answer a question that names only a period with that period's turns.
PERIOD_LISTING = True
#: Last places of a request's hits given to the owner's standing instructions and
#: preferences its words did not find (``core.recall.standing``; 0: none).
STANDING_SLOTS = 2
#: Rows holding standing markers read for them (best bm25 first: the rarer markers).
STANDING_POOL = 300
#: A marker matching more rows than this is left out of that search: ranking its whole
#: posting list would cost more than the rest of the recall ("always" in a big home).
STANDING_BUDGET = 5000
#: Rows of a named period read for a question that names nothing else (``listing``).
PERIOD_ROWS = 400
#: A summary unit's score (``core.recall.summaries``: a session's digest, an epoch's compaction
#: summary) beside a turn's; 0 leaves units out of recall. Chosen on the long-horizon
#: tuning half (benchmarks/RESULTS.md, "Session and epoch summaries").
SUMMARY_WEIGHT = 0.75
#: The most places of the top k that summary units may take: a question about one fact
#: keeps the rest for turns.
SUMMARY_SLOTS = 2
#: A unit ranked below a turn it covers goes after every other turn found (out of the
#: first k when they fill it): that turn already leads into its range.
SUMMARY_AFTER_TURNS = True
_UNIT_KINDS = frozenset({"session-summary", "epoch-summary"})


class SessionHit(msgspec.Struct, frozen=True):
    """One session ``recall_sessions`` found: its score and its turns found, best first."""

    session: str
    score: float
    turns: tuple[Hit, ...]


@dataclass(frozen=True)
class _Question:
    query: SearchQuery
    counts: tuple[int, ...]  # rows each term matches, capped at budget + 1
    period: periods.Period | None


def _question(store: TextSearch, text: str, time: datetime, budget: int) -> _Question | None:
    """The question's terms with their counts over the whole index (also when a search
    is kept to a few refs: bm25 of a common word costs its whole posting list, however
    few rows it may return), and the period it names; None when nothing in it is
    searchable."""
    if not query.terms(text):
        return None
    period = periods.find_period(text, time)
    if period is not None and STRIP_PERIOD:
        rest = periods.without(text, period)
        text = rest if query.terms(rest) else text
    analysed = query.analyse(text)
    counts = store.count_matches([SearchQuery((t,)) for t in analysed.terms], budget + 1)
    return _Question(analysed, tuple(counts), period)


def _turns(
    store: TextSearch,
    question: _Question,
    pool: int,
    budget: int,
    *,
    aside: float = ranking.ASIDE_WEIGHT,
    only: Sequence[str] | None = None,
) -> list[ranking.Scored]:
    """Turns (and notes, pages) for ``question``, best first; replies and tool output weigh
    ``aside`` beside the owner's words. ``only``: among the rows of these refs (the
    ``within`` window of a newest-first search is then not applied: ``only`` is small)."""
    total = store.row_count()
    for attempt in query.plan(question.query, question.counts, budget=budget, total=total):
        if attempt.mode == "newest":
            within = attempt.within if only is None else None
            found = store.newest(attempt.query, NEWEST_POOL, within=within, only=only)
        else:
            found = store.search_terms(attempt.query, pool, aside=aside, only=only)
        if found:
            return ranking.fold(
                found, attempt.also, question.period, ranking.PERIOD_BOOST, aside=aside
            )
    return []


def _fusing(vectors: Vectors | None, text: str) -> Vectors | None:
    """``vectors`` when there is something to fuse: None without vectors, when not every
    row has one yet (recall stays lexical), or when nothing in ``text`` is searchable
    (nothing is found, and the model is not run)."""
    if vectors is None or not vectors.complete or not query.terms(text):
        return None
    return vectors


def _lexical(
    store: TextSearch,
    text: str,
    time: datetime,
    budget: int,
    pool: int,
    *,
    aside: float = ranking.ASIDE_WEIGHT,
    only: Sequence[str] | None = None,
) -> tuple[_Question | None, list[ranking.Scored]]:
    """The question analysed and its lexical ranking (``_question``, ``_turns``)."""
    q = _question(store, text, time, budget)
    return q, [] if q is None else _turns(store, q, pool, budget, aside=aside, only=only)


def _both(
    vectors: Vectors | None,
    text: str,
    lexical: Callable[[], tuple[_Question | None, list[ranking.Scored]]],
    *,
    pool: int = VECTOR_POOL,
    only: Sequence[str] | None = None,
) -> tuple[_Question | None, list[ranking.Scored], list[ranking.Scored] | None]:
    """``lexical()`` and, with vectors to fuse, the vector ranking of ``text``'s turns
    (None: none). The lexical search runs on the vectors' worker thread while this one
    embeds the question and searches its nearest rows: the model, faiss and SQLite let
    go of the GIL, so the two overlap, and the longer path (the vectors') stays on the
    caller's thread, which need not wait to be woken once it is done."""
    fusing = _fusing(vectors, text)
    if fusing is None:
        return *lexical(), None
    beside = fusing.beside(lexical)
    try:
        found = fusing.nearest(text, pool, only=only)
    except BaseException:
        futures.wait([beside])  # nothing of this recall left running when it raises
        raise
    q, turns = beside.result()
    return q, turns, None if q is None else vector_turns(found, q.period)


log = logging.getLogger("tether.memory")


@contextlib.contextmanager
def _best_effort(doing: str) -> Iterator[None]:
    """A write recall makes on the way (identity and facts brought in step, recall
    counts) that may fail on a full disk or an unwritable store: recall then answers
    from what the store holds, with one warning (runbook: index-behind)."""
    try:
        yield
    except (DiskFullError, StoreError) as exc:
        log.warning("recall: %s failed, answering from what is indexed: %s", doing, exc)


def _sync(store: RecallStore, sweep: SweepStore | None, home: Path | None) -> None:
    """Bring the identity (when ``home`` is given) and sweep fact rows in step."""
    if home is None:
        sync_facts(store, sweep)
        return
    Identity(home, store).sync()
    sync_facts(store, sweep, allow=home_allow(home))


def _period_turns(store: TextSearch, period: periods.Period, limit: int) -> list[ranking.Scored]:
    """The first ``limit`` turns written in ``period``, oldest first (score 0; the row shown
    is the owner's words where the turn has them)."""
    turns: dict[tuple[str, int], list[Found]] = {}
    for row in store.between(period.start, period.end, PERIOD_ROWS):
        if row.session is None or row.turn is None or row.turn < 1:
            continue
        key = (row.session, row.turn)
        if key in turns or len(turns) < limit:
            turns.setdefault(key, []).append(row)
    out = []
    for key, rows in turns.items():
        best = next((r for r in rows if r.field == "user"), rows[0])
        out.append(ranking.Scored(key=key, score=0.0, best=best, rows=tuple(rows)))
    return out


def _in_time(
    store: TextSearch,
    turns: list[ranking.Scored],
    asked: timeline.Intent,
    limit: int,
    until: datetime | None,
) -> list[ranking.Scored]:
    """``turns`` as time has them: none written after ``until``; a question that names
    only a period answered by that period's turns first; a question that asks for an
    order or a count spread over sessions."""
    if PERIOD_LISTING and asked.listing and asked.period is not None:
        first = _period_turns(store, asked.period, limit)
        keys = {t.key for t in first}
        turns = first + [t for t in turns if t.key not in keys]
    if until is not None:  # after the listing: a day named may lie after ``until``
        turns = [t for t in turns if t.best.time < until]
    if SPREAD and asked.spread:
        turns = timeline.spread(
            turns, lambda scored: scored.key[0] if isinstance(scored.key, tuple) else None
        )
    return turns


def _with_standing(
    store: TextSearch,
    text: str,
    turns: list[ranking.Scored],
    limit: int,
    before: datetime,
) -> list[ranking.Scored]:
    """``turns``' first ``limit``, the last ``STANDING_SLOTS`` of them given to the owner's
    standing statements written before ``before`` that are not among them, when ``text``
    is a request: those sharing most word stems with it first, then the newest."""
    if not STANDING_SLOTS or not standing.is_request(text):
        return turns[:limit]
    top = turns[:limit]
    shown = {t.key for t in top}
    found: dict[tuple[str, int], Found] = {}
    markers = standing.search_terms()
    counts = store.count_matches([SearchQuery((t,)) for t in markers.terms], STANDING_BUDGET + 1)
    kept = tuple(t for t, n in zip(markers.terms, counts, strict=True) if 0 < n <= STANDING_BUDGET)
    if not kept:
        return top
    for row in store.search_terms(SearchQuery(kept), STANDING_POOL, aside=0.0):
        if (
            row.field == "user"
            and row.session is not None
            and row.turn is not None
            and row.time < before
            and (row.session, row.turn) not in shown
            and standing.is_standing(row.text)
        ):
            found.setdefault((row.session, row.turn), row)
    if not found:
        return top
    ranked = sorted(
        found.items(),
        key=lambda kr: (-standing.shared_stems(text, kr[1].text), -kr[1].time.timestamp()),
    )[:STANDING_SLOTS]
    extra = [ranking.Scored(key=key, score=0.0, best=row, rows=(row,)) for key, row in ranked]
    return top[: limit - len(extra)] + extra


def _placed(turns: list[ranking.Scored], limit: int) -> list[ranking.Scored]:
    """``turns`` with summary units weighed by ``SUMMARY_WEIGHT``; among the first ``limit``,
    at most ``SUMMARY_SLOTS`` units, and (``SUMMARY_AFTER_TURNS``) none ranked below a
    turn it covers: that turn already leads into its range, so the place goes to another
    turn (the others follow, in order)."""
    if not any(t.best.kind in _UNIT_KINDS for t in turns):
        return turns
    if SUMMARY_WEIGHT <= 0:
        return [t for t in turns if t.best.kind not in _UNIT_KINDS]
    weighed = [
        dataclasses.replace(t, score=t.score * SUMMARY_WEIGHT) if t.best.kind in _UNIT_KINDS else t
        for t in turns
    ]
    weighed.sort(key=lambda scored: -scored.score)
    kept: list[ranking.Scored] = []
    later: list[ranking.Scored] = []
    seen: dict[str, list[int]] = {}  # session -> its turns placed so far
    units = 0
    for t in weighed:
        if isinstance(t.key, tuple):
            seen.setdefault(t.key[0], []).append(t.key[1])
        elif t.best.kind in _UNIT_KINDS and len(kept) < limit:
            span = summaries.span_of(t.best.ref)
            covered = span is not None and any(
                span.first <= n <= span.last for n in seen.get(span.session, ())
            )
            if units >= SUMMARY_SLOTS or (SUMMARY_AFTER_TURNS and covered):
                later.append(t)
                continue
            units += 1
        kept.append(t)
    return kept + later


def _spanned(store: TurnReader, hit: Hit) -> Hit:
    """A summary unit's hit with the range it covers: its turns, epoch, and when its
    first turn was written (read from the index)."""
    span = summaries.span_of(hit.ref)
    if span is None:
        return hit
    rows = store.session_turns(span.session, span.first, span.first)
    return msgspec.structs.replace(
        hit,
        first_turn=span.first,
        last_turn=span.last,
        epoch=span.epoch,
        first_time=min((r.time for r in rows), default=hit.time),
    )


def _hit(scored: ranking.Scored) -> Hit:
    best = scored.best
    return Hit(
        kind=best.kind,
        session=best.session,
        turn=best.turn,
        text=best.text,
        tag="memory-tainted" if best.tainted else "memory",
        score=scored.score,
        ref=best.ref,
        time=best.time,
    )


def recall(
    store: RecallStore,
    text: str,
    limit: int,
    *,
    time: datetime,
    budget: int = query.DEFAULT_BUDGET,
    home: Path | None = None,
    sweep: SweepStore | None = None,
    only: Callable[[], Sequence[str]] | None = None,
    vectors: Vectors | None = None,
    until: datetime | None = None,
    in_time_order: bool = False,
) -> list[Hit]:
    """The ``limit`` best hits for ``text`` (best first), logged as recalled at ``time``.

    A query with nothing searchable in it (empty, punctuation, only stop words) finds
    nothing rather than everything. ``budget`` bounds the rows ranked (see core.recall.query).
    ``time`` is also "now" for a period the question names. With ``home``, identity
    entries are brought in step with its memory.md first; the fact rows are brought in
    step with ``sweep``'s active facts (none without it). ``only``: called after that
    sync, the refs the search is kept to (a remote MCP client's world pages and facts).
    ``until``: leave out what was written at or after it (recall as it stood: ``--as-of``).
    ``in_time_order``: the same hits, oldest first (``--timeline``).

    Time in the question (``core.recall.timeline.intent``): a period it names lifts what was
    written in it; a question naming only a period ("what did we talk about on May 30")
    gets that period's turns; one asking for an order or a count gets hits spread over
    sessions (``timeline.spread``).
    """
    if limit < 1:
        raise BadInputError(f"k must be at least 1 (got {limit})")
    with _best_effort("bringing identity and facts in step"):
        _sync(store, sweep, home)
    refs = None if only is None else only()
    pool = max(limit * FANOUT, POOL)
    q, turns, near = _both(
        vectors, text, lambda: _lexical(store, text, time, budget, pool, only=refs), only=refs
    )
    if near is not None:
        turns = ranking.blend(turns, ranking.supported(turns, near))
    if q is not None and amounts.AMOUNT_LIFT > 0 and amounts.asks_amount(text):
        turns = amounts.lift(turns)
    turns = _placed(turns, limit)  # before the period listing, which ranks by time, not score
    if q is not None:
        turns = _in_time(store, turns, timeline.intent(text, time), limit, until)
        turns = _with_standing(store, text, turns, limit, time if until is None else until)
    hits = [_spanned(store, _hit(t)) for t in turns[:limit]]
    if in_time_order:
        hits = timeline.chronological(hits, lambda hit: hit.time, lambda hit: hit.ref)
    with _best_effort("counting the recall"):
        store.record_recalls([h.ref for h in hits], time)
    return hits


def recall_sessions(
    store: RecallStore,
    text: str,
    limit: int,
    *,
    time: datetime,
    budget: int = query.DEFAULT_BUDGET,
    vectors: Vectors | None = None,
) -> list[SessionHit]:
    """The ``limit`` sessions that best answer ``text``, best first, each with its turn hits.

    The same search as ``recall`` (notes and pages left out) over more turns; sessions
    are scored by ``ranking.by_session``. The best turn of each session returned is logged
    as recalled.
    """
    if limit < 1:
        raise BadInputError(f"k must be at least 1 (got {limit})")
    pool = max(SESSION_TURNS * FANOUT, POOL)
    q, turns, near = _both(
        vectors,
        text,
        lambda: _lexical(store, text, time, budget, pool, aside=ranking.SESSION_ASIDE_WEIGHT),
        pool=SESSION_TURNS * FANOUT,
    )
    if q is None:
        return []
    sessions = ranking.by_session(turns, ranking.SESSION_REST)
    near = None if near is None else ranking.supported(turns, near)
    if near is not None and SESSION_FUSION == "turns":
        sessions = ranking.by_session(ranking.blend(turns, near), ranking.SESSION_REST)
    elif near is not None:
        ranked = ranking.by_session(near, ranking.VECTOR_SESSION_REST)
        sessions = ranking.blend_sessions(sessions, ranked)
    sessions = sessions[:limit]
    out = [
        SessionHit(session=s.session, score=s.score, turns=tuple(_hit(t) for t in s.turns))
        for s in sessions
    ]
    with _best_effort("counting the recall"):
        store.record_recalls([s.turns[0].ref for s in out], time)
    return out
