"""LongMemEval retrieval: tether's ``recall`` beside a plain BM25, with the paper's protocol.

Data: ``../shared/bench-data/longmemeval/longmemeval_s_subset100.json`` (101 questions of
LongMemEval_S, about 50 haystack sessions each). For every question:

1. a fresh home (``init_home``);
2. its haystack sessions written as one ``tether sessions import`` JSONL file, each message
   at its session's date (``haystack_dates``, read as UTC) plus one second per message, and
   brought in with ``import_jsonl`` (what the CLI runs: validate, session logs, index);
3. the question asked through ``recall`` (what the agent's tool and ``tether memory
   recall`` run) for the turn ranking, and ``recall_sessions`` (the same search, turn hits
   aggregated per session) for the session ranking, both with the question's date as the
   time, so "last week" means the week before the question was asked;
4. hits mapped back to haystack sessions and turns (tether's turn k of a session is its
   k-th user message, which is the paper's turn id ``<session>_<position>``).

Protocol (``src/retrieval`` of the LongMemEval repository): gold = evidence sessions (ids
``answer_*``) holding a user turn with ``has_answer``, and those user turns; abstention
questions (``*_abs``) are skipped, and so are questions whose evidence is only on the
assistant side (no gold under user-side keys: the paper's code would count them as a free
recall_all of 1 and an ndcg of 0; they are listed as ``no_user_gold``). Metrics:
``recall_all@k`` (every gold item in the top k) and ``ndcg_any@k``, k = 5 and 10 for
sessions, 5, 10 and 50 for turns.

Baseline, in the same run: ``bm25s`` (Lucene BM25, k1 1.5, b 0.75, its English stop
words, no stemming) over the paper's user-side keys: one document per session (its user
messages joined) for the session level, one per user message for the turn level.

Split: within each question type, questions are ordered by the SHA-256 of their id and
dealt alternately to a tuning half and a reporting half. Recall is tuned on the tuning
half (``benchmarks/RESULTS.md`` says how); both are reported (and ``all``).

Output: one JSON line per figure on stdout (``value``, ``baseline``, ``ratio``, per half
and question type, plus ``overall``), then a short table on stderr.

``--vectors`` (the extra tether[vectors]): every home is also embedded (``reindex
--vectors``'s loop) and asked again with vectors fused; each record then also carries
``fused`` (and ``fused_ratio`` to bm25s), so lexical, bm25s and fused print from one run.
The vectors go through ``embed_cache`` (the model's own vectors, remembered by text
between runs: the haystacks share most sessions).

    .venv/bin/pip install -e '.[bench,vectors]'
    .venv/bin/python benchmarks/longmemeval_retrieval.py [--jobs 2] [--only tune|report]
        [--dump FILE] [--misses] [--vectors] [--timed] [--spread] [--set MODULE.NAME=VALUE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import closing, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.embed_cache import CachedEmbedder, _key
from tether.config import Config
from tether.core.recall import timeline
from tether.home import init_home
from tether.imports.jsonl import import_jsonl
from tether.memory.recall import recall, recall_sessions
from tether.memory.vectors import Vectors, embed_missing, parts
from tether.ports import Store, VectorIndex
from tether.stores.sqlite import SqliteStore

DATA = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "bench-data"
    / "longmemeval"
    / "longmemeval_s_subset100.json"
)
SESSION_KS = (5, 10)
TURN_KS = (5, 10, 50)
METRICS = ("recall_all", "ndcg_any")
HALVES = ("tune", "report", "all")


class Message(msgspec.Struct):
    role: str
    content: str
    has_answer: bool = False


class Question(msgspec.Struct):
    question_id: str
    question_type: str
    question: str
    question_date: str
    haystack_dates: list[str]
    haystack_session_ids: list[str]
    haystack_sessions: list[list[Message]]


def load(path: Path) -> list[Question]:
    return msgspec.json.decode(path.read_bytes(), type=list[Question])


def parse_date(text: str) -> datetime:
    """``2023/05/30 (Tue) 23:46`` as UTC."""
    return datetime.strptime(text[:10] + text[-5:], "%Y/%m/%d%H:%M").replace(tzinfo=UTC)


def split(questions: Sequence[Question]) -> dict[str, str]:
    """question id -> "tune" | "report": per type, by SHA-256 of the id, alternately."""
    by_type: dict[str, list[str]] = {}
    for q in questions:
        by_type.setdefault(q.question_type, []).append(q.question_id)
    half: dict[str, str] = {}
    for ids in by_type.values():
        ordered = sorted(ids, key=lambda i: hashlib.sha256(i.encode()).hexdigest())
        for n, qid in enumerate(ordered):
            half[qid] = "tune" if n % 2 == 0 else "report"
    return half


# -- the haystack as tether sees it ------------------------------------------------------


@dataclass(frozen=True)
class Keys:
    """How tether's sessions and turns map to the paper's ids, and what is gold."""

    session_of: dict[str, str]  # tether session id -> haystack session id
    turn_of: dict[tuple[str, int], str]  # (tether session, turn) -> "<haystack id>_<pos>"
    gold_sessions: frozenset[str]
    gold_turns: frozenset[str]
    # the paper's user-side keys, for the baseline: (id, text)
    session_docs: tuple[tuple[str, str], ...]
    turn_docs: tuple[tuple[str, str], ...]


def import_lines(q: Question) -> tuple[list[bytes], Keys]:
    """The JSONL lines of a ``tether sessions import`` file for ``q``'s haystack."""
    lines: list[bytes] = []
    session_of: dict[str, str] = {}
    turn_of: dict[tuple[str, int], str] = {}
    gold_sessions: set[str] = set()
    gold_turns: set[str] = set()
    session_docs: list[tuple[str, str]] = []
    turn_docs: list[tuple[str, str]] = []
    for n, (hid, date, messages) in enumerate(
        zip(q.haystack_session_ids, q.haystack_dates, q.haystack_sessions, strict=True)
    ):
        sid = f"h{n:03d}"  # a neutral id: nothing about the evidence leaks into the index
        session_of[sid] = hid
        start = parse_date(date)
        turn = 0
        users: list[str] = []
        for pos, m in enumerate(messages, start=1):
            stamp = (start + timedelta(seconds=pos)).strftime("%Y-%m-%dT%H:%M:%SZ")
            line = {"session": sid, "role": m.role, "text": m.content, "time": stamp}
            lines.append(json.dumps(line).encode())
            if m.role != "user":
                continue
            turn += 1
            key = f"{hid}_{pos}"
            turn_of[(sid, turn)] = key
            users.append(m.content)
            turn_docs.append((key, m.content))
            if "answer" in hid and m.has_answer:
                gold_turns.add(key)
                gold_sessions.add(hid)
        session_docs.append((hid, " ".join(users)))
    keys = Keys(
        session_of=session_of,
        turn_of=turn_of,
        gold_sessions=frozenset(gold_sessions),
        gold_turns=frozenset(gold_turns),
        session_docs=tuple(session_docs),
        turn_docs=tuple(turn_docs),
    )
    return lines, keys


class Backend:
    """``--backend postgres``: the PostgreSQL database each question gets its own owner
    schema in (dropped after); None is SQLite in the question's home. (Set before the
    worker processes fork, so each has it.)"""

    postgres: str | None = None


def open_db(home: Path, q: Question) -> Store:
    """The question's store: SQLite in its home, or its own schema in ``Backend.postgres``."""
    if Backend.postgres is None:
        return SqliteStore(home / "tether.db")
    from tether.stores.postgres import PostgresStore

    return PostgresStore(Backend.postgres, _pg_owner(q))


def _pg_owner(q: Question) -> str:
    return "lme-" + hashlib.sha256(q.question_id.encode()).hexdigest()[:16]


def drop_db(q: Question) -> None:
    if Backend.postgres is None:
        return
    import psycopg

    with psycopg.connect(Backend.postgres, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "tether_{_pg_owner(q)}" CASCADE')


def build_home(q: Question, home: Path, lines: Sequence[bytes]) -> None:
    """A fresh home holding ``q``'s haystack, imported the way ``tether sessions import`` does."""
    init_home(home)
    src = home.parent / f"{home.name}.import.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    drop_db(q)
    with closing(open_db(home, q)) as store:
        import_jsonl(
            home,
            src,
            now=parse_date(q.question_date),
            config=Config(),
            store=lambda: nullcontext(store),
        )
    src.unlink()


# -- rankings ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rankings:
    sessions: list[str]  # haystack session ids, best first
    turns: list[str]  # "<haystack id>_<pos>", best first
    ms: float = 0.0  # time to answer (both recalls)


def tether_rankings(
    store: Store, q: Question, keys: Keys, vectors: Vectors | None = None
) -> Rankings:
    now = parse_date(q.question_date)
    start = time.perf_counter()
    hits = recall(store, q.question, max(TURN_KS), time=now, vectors=vectors)
    sessions = recall_sessions(store, q.question, max(SESSION_KS), time=now, vectors=vectors)
    ms = (time.perf_counter() - start) * 1000
    turns = [
        keys.turn_of.get((h.session, h.turn), f"other:{h.ref}")
        for h in hits
        if h.session is not None and h.turn is not None
    ]
    return Rankings(
        sessions=[keys.session_of.get(s.session, s.session) for s in sessions], turns=turns, ms=ms
    )


def bm25_ranking(docs: Sequence[tuple[str, str]], question: str, k: int) -> list[str]:
    """Plain BM25 (bm25s: Lucene variant, English stop words, no stemming), best first."""
    import bm25s  # the optional extra "bench"

    texts = [text for _, text in docs]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    vocab = retriever.vocab_dict
    words = bm25s.tokenize([question], stopwords="en", return_ids=False, show_progress=False)
    known = [[w for w in words[0] if w in vocab]]
    if not known[0]:
        return []
    found, scores = retriever.retrieve(known, k=min(k, len(texts)), show_progress=False)
    return [docs[int(i)][0] for i, s in zip(found[0], scores[0], strict=True) if float(s) > 0]


def bm25_rankings(q: Question, keys: Keys) -> Rankings:
    return Rankings(
        sessions=bm25_ranking(keys.session_docs, q.question, max(SESSION_KS)),
        turns=bm25_ranking(keys.turn_docs, q.question, max(TURN_KS)),
    )


# -- metrics (the paper's eval_utils) ----------------------------------------------------


def dcg(relevances: Sequence[float], k: int) -> float:
    rel = list(relevances)[:k]
    if not rel:
        return 0.0
    return rel[0] + sum(r / math.log2(p + 1) for p, r in enumerate(rel) if p >= 1)


def ndcg_any(ranking: Sequence[str], gold: frozenset[str], k: int) -> float:
    ideal = dcg([1.0] * min(len(gold), k), k)
    if ideal == 0:
        return 0.0
    return dcg([1.0 if r in gold else 0.0 for r in ranking[:k]], k) / ideal


def recall_all(ranking: Sequence[str], gold: frozenset[str], k: int) -> float:
    top = set(ranking[:k])
    return float(all(g in top for g in gold))


def figures(r: Rankings, keys: Keys) -> dict[str, float]:
    out: dict[str, float] = {}
    for level, ks, ranking, gold in (
        ("session", SESSION_KS, r.sessions, keys.gold_sessions),
        ("turn", TURN_KS, r.turns, keys.gold_turns),
    ):
        for k in ks:
            out[f"{level}_recall_all@{k}"] = recall_all(ranking, gold, k)
            out[f"{level}_ndcg_any@{k}"] = ndcg_any(ranking, gold, k)
    return out


FIGURES = tuple(
    f"{level}_{metric}@{k}"
    for level, ks in (("session", SESSION_KS), ("turn", TURN_KS))
    for metric in METRICS
    for k in ks
)


# -- running -----------------------------------------------------------------------------


@dataclass
class Result:
    question_id: str
    question_type: str
    skipped: str | None = None  # "abstention" | "no_user_gold"
    tether: dict[str, float] = field(default_factory=dict)
    bm25: dict[str, float] = field(default_factory=dict)
    fused: dict[str, float] = field(default_factory=dict)  # with --vectors
    ms: float = 0.0
    sessions: list[str] = field(default_factory=list)  # tether's session ranking
    turns: list[str] = field(default_factory=list)  # tether's turn ranking (top 50)
    gold_sessions: list[str] = field(default_factory=list)
    gold_turns: list[str] = field(default_factory=list)
    fused_sessions: list[str] = field(default_factory=list)
    fused_turns: list[str] = field(default_factory=list)


#: The embedder of a ``--vectors`` run: made in the parent, inherited by forked workers.
_EMBEDDER: CachedEmbedder | None = None


def open_vectors_index(home: Path, q: Question) -> VectorIndex:
    """The question's vector index, beside its store (``open_db``)."""
    if Backend.postgres is None:
        from tether.stores.sqlite.vectors import SqliteVectors

        return SqliteVectors(home / "tether.db")
    from tether.stores.postgres.vectors import PostgresVectors

    return PostgresVectors(Backend.postgres, _pg_owner(q))


def fused_rankings(store: Store, home: Path, q: Question, keys: Keys) -> Rankings:
    assert _EMBEDDER is not None
    index = open_vectors_index(home, q)
    with closing(index):
        vectors = Vectors(_EMBEDDER, index)
        embed_missing(vectors, batch=512)
        return tether_rankings(store, q, keys, vectors)


def precompute(questions: Sequence[Question], emit: Callable[[str], None]) -> None:
    """Embed every part of every haystack message once, into the cache (saved as it goes)."""
    assert _EMBEDDER is not None
    texts = list(
        dict.fromkeys(
            p
            for q in questions
            for session in q.haystack_sessions
            for m in session
            for p in parts(m.content, "user" if m.role == "user" else "assistant")
        )
    )
    todo = [t for t in texts if _key(t) not in _EMBEDDER.known]
    emit(f"embedding {len(todo)} of {len(texts)} distinct parts (the rest are cached)")
    start = time.perf_counter()
    step = 2048
    for n in range(0, len(todo), step):
        _EMBEDDER.embed(todo[n : n + step])
        _EMBEDDER.save()
        done = min(n + step, len(todo))
        rate = done / (time.perf_counter() - start)
        emit(f"  {done}/{len(todo)} parts, {rate:.0f}/s")


def run_question(q: Question) -> Result:
    result = Result(q.question_id, q.question_type)
    if q.question_id.endswith("_abs"):
        result.skipped = "abstention"
        return result
    lines, keys = import_lines(q)
    if not keys.gold_sessions:
        result.skipped = "no_user_gold"
        return result
    with tempfile.TemporaryDirectory(prefix="tether-lme-") as tmp:
        home = Path(tmp) / "home"
        build_home(q, home, lines)
        try:
            with closing(open_db(home, q)) as store:
                ours = tether_rankings(store, q, keys)
                if _EMBEDDER is not None:
                    fused = fused_rankings(store, home, q, keys)
                    result.fused = figures(fused, keys)
                    result.fused_sessions, result.fused_turns = fused.sessions, fused.turns
        finally:
            drop_db(q)
    result.tether = figures(ours, keys)
    result.bm25 = figures(bm25_rankings(q, keys), keys)
    result.ms = ours.ms
    result.sessions, result.turns = ours.sessions, ours.turns
    result.gold_sessions, result.gold_turns = sorted(keys.gold_sessions), sorted(keys.gold_turns)
    return result


def run_all(questions: Sequence[Question], jobs: int) -> list[Result]:
    if jobs <= 1:
        return [run_question(q) for q in questions]
    with ProcessPoolExecutor(
        max_workers=jobs, mp_context=multiprocessing.get_context("fork")
    ) as pool:
        return list(pool.map(run_question, questions, chunksize=2))


def mean(values: Iterable[float]) -> float:
    items = list(values)
    return statistics.fmean(items) if items else float("nan")


def summarise(
    results: Sequence[Result], half_of: dict[str, str], halves: Sequence[str]
) -> list[dict[str, Any]]:
    """One record per (half, question type or overall, figure)."""
    scored = [r for r in results if r.skipped is None]
    types = sorted({r.question_type for r in scored})
    out: list[dict[str, Any]] = []
    for half in halves:
        in_half = [r for r in scored if half == "all" or half_of[r.question_id] == half]
        for group in [*types, "overall"]:
            rs = [r for r in in_half if group in ("overall", r.question_type)]
            for name in FIGURES:
                value = mean(r.tether[name] for r in rs)
                base = mean(r.bm25[name] for r in rs)
                record = {
                    "figure": name,
                    "half": half,
                    "type": group,
                    "questions": len(rs),
                    "value": round(value, 4),
                    "baseline": round(base, 4),
                    "ratio": round(value / base, 3) if base > 0 else None,
                }
                if rs and all(r.fused for r in rs):
                    fused = mean(r.fused[name] for r in rs)
                    record["fused"] = round(fused, 4)
                    record["fused_ratio"] = round(fused / base, 3) if base > 0 else None
                out.append(record)
    return out


TABLE_COLUMNS = (
    ("S R@5", "session_recall_all@5"),
    ("S R@10", "session_recall_all@10"),
    ("S nDCG@5", "session_ndcg_any@5"),
    ("T R@10", "turn_recall_all@10"),
    ("T R@50", "turn_recall_all@50"),
    ("T nDCG@10", "turn_ndcg_any@10"),
)


def table(records: Sequence[dict[str, Any]], emit: Callable[[str], None]) -> None:
    index = {(r["half"], r["type"], r["figure"]): r for r in records}
    halves = list(dict.fromkeys(r["half"] for r in records))
    groups = list(dict.fromkeys(r["type"] for r in records))
    for half in halves:
        fused = "fused" in index[(half, "overall", TABLE_COLUMNS[0][1])]
        emit(f"\n{half} half: {'fused / ' if fused else ''}tether lexical / bm25s baseline")
        head = f"{'type':<26} {'n':>3}  " + "  ".join(f"{c:>11}" for c, _ in TABLE_COLUMNS)
        emit(head)
        for group in groups:
            row = index.get((half, group, TABLE_COLUMNS[0][1]))
            if row is None:
                continue
            cells = []
            for _, name in TABLE_COLUMNS:
                r = index[(half, group, name)]
                cell = f"{r['value']:.2f}/{r['baseline']:.2f}"
                if "fused" in r:
                    cell = f"{r['fused']:.2f}/{cell}"
                cells.append(cell.rjust(16 if fused else 11))
            emit(f"{group:<26} {row['questions']:>3}  " + "  ".join(cells))


def misses(
    results: Sequence[Result],
    questions: Sequence[Question],
    half_of: dict[str, str],
    emit: Callable[[str], None],
) -> None:
    """Each scored question that misses session R@5 or turn R@10: its text, and where each
    gold session and turn ranked (``-`` when not in the ranking kept)."""
    text = {q.question_id: q.question for q in questions}
    for r in results:
        if r.skipped is not None:
            continue
        scores = r.fused or r.tether
        failed = [
            name for name in ("session_recall_all@5", "turn_recall_all@10") if scores[name] < 1.0
        ]
        if not failed:
            continue
        emit(f"\n{half_of[r.question_id]} {r.question_id} {r.question_type}: {', '.join(failed)}")
        emit(f"  {text[r.question_id]}")
        for label, gold, ranking in (
            ("session", r.gold_sessions, r.fused_sessions or r.sessions),
            ("turn", r.gold_turns, r.fused_turns or r.turns),
        ):
            at = {key: n for n, key in enumerate(ranking, start=1)}
            emit(f"  {label}: " + ", ".join(f"{g} @{at.get(g, '-')}" for g in gold))


def override(setting: str) -> None:
    """``ranking.RRF_K=30``: set a module constant (the forked workers inherit it)."""
    import importlib

    name, _, value = setting.partition("=")
    module, _, attr = name.rpartition(".")
    where = {"ranking": "tether.core.recall.ranking", "recall": "tether.memory.recall"}
    where |= {"periods": "tether.core.recall.periods", "timeline": "tether.core.recall.timeline"}
    where |= {"summaries": "tether.core.recall.summaries", "amounts": "tether.core.recall.amounts"}
    target = importlib.import_module(where.get(module, f"tether.memory.{module}"))
    old = getattr(target, attr)
    if isinstance(old, bool) and value not in ("True", "False"):
        raise SystemExit(f"--set {setting}: True or False")
    setattr(target, attr, value == "True" if isinstance(old, bool) else type(old)(value))


def asks_time(q: Question) -> bool:
    """Whether ``q`` asks about time as recall reads it (a period, or an order)."""
    asked = timeline.intent(q.question, parse_date(q.question_date))
    return asked.period is not None or asked.order


def asks_spread(q: Question) -> bool:
    """Whether ``q`` asks for an order or a count as recall reads it (``Intent.spread``)."""
    return timeline.intent(q.question, parse_date(q.question_date)).spread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--only", choices=("tune", "report"), default=None)
    parser.add_argument("--dump", type=Path, default=None, help="per-question results (JSONL)")
    parser.add_argument(
        "--misses",
        action="store_true",
        help="list the questions that miss session R@5 or turn R@10, with gold ranks (stderr)",
    )
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="postgres: each question in its own schema of $TETHER_TEST_POSTGRES (or --pg)",
    )
    parser.add_argument(
        "--timed",
        action="store_true",
        help="tuning: only the questions that ask about time (a period named, or an order:"
        " core.recall.timeline.intent), the ones a time-dependent fusion setting can change",
    )
    parser.add_argument(
        "--spread",
        action="store_true",
        help="tuning: only the questions that ask for an order or a count"
        " (core.recall.timeline.intent's spread), the ones the openings lift can change",
    )
    parser.add_argument("--pg", default=os.environ.get("TETHER_TEST_POSTGRES"))
    parser.add_argument(
        "--vectors", action="store_true", help="also recall with vectors fused (tether[vectors])"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MODULE.NAME=VALUE",
        help="tuning: override a constant of tether.core.recall.ranking, tether.memory.recall or"
        " tether.memory.vectors for this run (e.g. ranking.RRF_K=30)",
    )
    args = parser.parse_args()
    for setting in args.set:
        override(setting)
    if args.backend == "postgres":
        if not args.pg:
            sys.exit("--backend postgres needs --pg URL or TETHER_TEST_POSTGRES")
        Backend.postgres = args.pg
    try:
        import bm25s  # noqa: F401
    except ImportError:
        sys.exit("the baseline needs bm25s: .venv/bin/pip install -e '.[bench]'")
    global _EMBEDDER  # noqa: PLW0603 (the forked workers inherit it)

    start = time.perf_counter()
    questions = load(args.data)
    half_of = split(questions)
    if args.only is not None:
        questions = [q for q in questions if half_of[q.question_id] == args.only]
    if args.timed:
        questions = [q for q in questions if asks_time(q)]
    if args.spread:
        questions = [q for q in questions if asks_spread(q)]
    if args.vectors:
        _EMBEDDER = CachedEmbedder(threads=args.jobs)
        precompute(questions, lambda line: print(line, file=sys.stderr, flush=True))
    results = run_all(questions, args.jobs)
    wall = time.perf_counter() - start

    halves = [args.only] if args.only else list(HALVES)
    records = summarise(results, half_of, halves)
    for record in records:
        print(json.dumps(record))
    skipped: dict[str, list[str]] = {}
    for r in results:
        if r.skipped is not None:
            skipped.setdefault(r.skipped, []).append(r.question_id)
    timed = [r.ms for r in results if r.skipped is None]
    print(
        json.dumps(
            {
                "figure": "run",
                "questions": len(results),
                "scored": len(timed),
                "skipped": skipped,
                "wall_s": round(wall, 1),
                "jobs": args.jobs,
                "recall_ms_mean": round(mean(timed), 2),
                "note": "recall_ms: recall (k=50) + recall_sessions (k=10) per question",
            }
        ),
        flush=True,
    )
    if args.dump is not None:
        with args.dump.open("w") as f:
            for r in results:
                f.write(json.dumps(r.__dict__) + "\n")
    table(records, lambda line: print(line, file=sys.stderr))
    if args.misses:
        misses(results, questions, half_of, lambda line: print(line, file=sys.stderr))


if __name__ == "__main__":
    main()
