"""Recall over a long life: histories of over a million tokens, questions of nine kinds.

Data: ``../shared/bench-data/longmemeval/longmemeval_s_subset100.json`` (LongMemEval_S,
101 questions, each with a haystack of ~50 dated sessions). A **history** joins the
haystacks of several questions (in a fixed order, by SHA-256 of ``SEED`` and the question
id) into one timeline, until it holds at least ``--tokens`` (default 1,000,000) tokens as
``tether.core.context.tokens`` counts them. Every haystack session keeps its own date (a session
shared by two haystacks goes in once); the questions of the joined haystacks keep their
``question_date`` as their "now". Sessions get neutral ids in time order (``h00042``), so
nothing about the evidence leaks into the index.

**Evidence** of a question: the turns (tether's turn k of a session: its k-th user message
and the replies after it) of its evidence sessions (``answer_*``) holding a message with
``has_answer``, on either side. Figure: evidence **recall@10** (the share of a question's
evidence turns in its first ten hits), averaged per kind; ``overall`` is the mean of the
kinds (each kind counts the same, however many questions it has), ``questions`` the mean
over questions. ``ceiling`` is what a perfect ranking would score (min(1, 10 / evidence
turns)).

**Kinds** (the issue's nine), from LongMemEval's question types where they exist:

- ``knowledge_update`` <- knowledge-update;
- ``single_fact`` <- single-session-user and single-session-assistant;
- ``temporal`` <- temporal-reasoning, except:
- ``event_ordering`` <- temporal-reasoning questions that ask for an order ("first",
  "order", "earliest", "most recently", "second");
- ``multi_session`` <- multi-session;
- ``preference`` <- single-session-preference;

and built deterministically where LongMemEval has none (abstention questions are left out):

- ``instruction``: ``INSTRUCTIONS`` (``long_horizon_data.py``), pairs of a standing
  instruction the owner gave ("From now on, give me distances in kilometres") and a later
  request that depends on it while sharing few of its words. Each history gets ``BUILT``
  pairs (in turn): the instruction as the first user message of a short session of its
  own (the owner's line and a one-line acknowledgement) at a date drawn (seeded) from the
  history's span; the question asked ``ASK_AFTER`` later. Evidence: the instruction's turn.
- ``contradiction``: ``CONTRADICTIONS``, pairs of statements about one thing that disagree
  (the first early in the history, the second later), and a question about the thing.
  Both go in as sessions of their own, like instructions (``BUILT`` a history). Evidence:
  both turns (to notice a contradiction one needs both sides).
- ``summary``: "What did we talk about on <day>?" for ``SUMMARIES`` sessions a history
  (seeded, among sessions with 3-10 user turns whose day holds no other session), asked
  a week after that day. Evidence: every turn of that session.

**Split:** per kind, questions ordered by SHA-256 of ``SEED`` + id and dealt alternately
to a tuning half and a reporting half; decide on ``--only tune``, report the other.

**Systems**, in the same run over the same homes: ``tether`` = ``recall(store, question,
10, time=question_date, until=the end of its day)`` in process (what ``tether memory
recall -k 10 --as-of DATE`` runs) on a home built by ``import_jsonl`` (the ``tether
sessions import`` path) into SQLite: the joined timeline holds sessions dated after a
question, which a memory asked on that day could not hold, so recall is asked as of the
question's day (the end of it: LongMemEval dates some evidence hours after its question);
``--no-as-of`` asks without the cut. ``bm25`` (``baseline``) = plain BM25 (``bm25s``:
Lucene, k1 1.5, b 0.75, English stop words, no stemming), one document per turn (the user
message and its replies), over the whole history; ``bm25_as_of`` (``baseline_as_of``) =
the same ranking less the turns of sessions dated after the question's day (the top 10
filled from further down), so the cut's share of the gain shows.

``--vectors`` (the extra tether[vectors]): every home is also embedded (``reindex
--vectors``'s loop, MiniLM on one thread a worker: ~5 min a 1M-token history on the
shared cores, kept in the home) and each question asked again with vectors fused; the
records then carry ``fused``.

Homes are cached under ``--keep DIR`` (reused when the history's fingerprint matches).

    PYTHONPATH=src:. python benchmarks/long_horizon.py [--histories N] [--jobs 2]
        [--only tune|report] [--keep DIR] [--tokens N] [--misses] [--vectors] [--no-as-of]
        [--set MODULE.NAME=VALUE]

Output: one JSON line per figure (half, kind) on stdout, a table on stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import closing, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from typing import Any

from benchmarks.bm25_baseline import bm25_keys
from benchmarks.long_horizon_data import CONTRADICTIONS, INSTRUCTIONS
from benchmarks.longmemeval_retrieval import DATA, Question, load, override, parse_date
from tether.config import Config
from tether.core.context import tokens
from tether.home import init_home
from tether.imports.jsonl import import_jsonl
from tether.memory.recall import recall
from tether.stores.sqlite import SqliteStore

SEED = "long-horizon-1"
K = 10
SUMMARIES = 6
#: Instructions, and contradictions, built into each history (taken from the lists in turn).
BUILT = 3
#: How long after an injected instruction or contradiction its question is asked.
ASK_AFTER = timedelta(days=20)
KINDS = (
    "knowledge_update",
    "contradiction",
    "single_fact",
    "temporal",
    "multi_session",
    "preference",
    "instruction",
    "summary",
    "event_ordering",
)
_ORDER_WORDS = ("first", "order", "earliest", "most recently", "second")

# -- building a history -------------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    sid: str  # the haystack's id, or "built-*"
    start: datetime
    messages: tuple[tuple[str, str, bool], ...]  # (role, text, has_answer)


@dataclass
class Ask:
    qid: str
    kind: str
    question: str
    now: datetime
    evidence: frozenset[str] = frozenset()  # "<sid>#<turn>" (haystack session id)

    @property
    def day_end(self) -> datetime:
        """The end of the question's day: what "as of" its date leaves in (LongMemEval
        dates some evidence hours after its question, on the same day)."""
        return datetime.combine(self.now.date() + timedelta(days=1), dtime(), self.now.tzinfo)


@dataclass
class History:
    number: int
    sessions: list[Session]
    asks: list[Ask]
    tokens: int

    def fingerprint(self) -> str:
        h = hashlib.sha256(SEED.encode())
        for s in self.sessions:
            h.update(f"{s.sid}|{s.start.isoformat()}|{len(s.messages)}\n".encode())
        return h.hexdigest()[:16]


def _order(ids: Iterable[str]) -> list[str]:
    return sorted(ids, key=lambda i: hashlib.sha256(f"{SEED}:{i}".encode()).hexdigest())


def kind_of(q: Question) -> str | None:
    t = q.question_type
    if q.question_id.endswith("_abs"):
        return None
    if t == "temporal-reasoning":
        text = q.question.lower()
        return "event_ordering" if any(w in text for w in _ORDER_WORDS) else "temporal"
    return {
        "knowledge-update": "knowledge_update",
        "single-session-user": "single_fact",
        "single-session-assistant": "single_fact",
        "multi-session": "multi_session",
        "single-session-preference": "preference",
    }[t]


def turns_of(messages: Sequence[tuple[str, str, bool]]) -> list[tuple[int, str, bool]]:
    """(turn, text, has_answer) per tether turn: a user message and the replies after it
    (messages before the first user message belong to turn 0, which recall never shows)."""
    out: list[tuple[int, str, bool]] = []
    turn = 0
    for role, text, answer in messages:
        if role == "user":
            turn += 1
            out.append((turn, text, answer))
        elif out:
            t, joined, has = out[-1]
            out[-1] = (t, joined + "\n" + text, has or answer)
    return out


def _session_tokens(s: Session) -> int:
    return sum(tokens.count(text) for _, text, _ in s.messages)


def build_histories(questions: Sequence[Question], budget: int) -> list[History]:
    by_id = {q.question_id: q for q in questions}
    histories: list[History] = []
    sessions: dict[str, Session] = {}
    members: list[Question] = []
    count = 0
    for qid in _order(by_id):
        q = by_id[qid]
        for sid, date, msgs in zip(
            q.haystack_session_ids, q.haystack_dates, q.haystack_sessions, strict=True
        ):
            if sid in sessions:
                continue
            s = Session(
                sid, parse_date(date), tuple((m.role, m.content, m.has_answer) for m in msgs)
            )
            sessions[sid] = s
            count += _session_tokens(s)
        members.append(q)
        if count >= budget:
            histories.append(_history(len(histories), sessions, members, count))
            sessions, members, count = {}, [], 0
    return histories


def _picks(number: int, pool: int) -> list[int]:
    """The ``BUILT`` pairs history ``number`` gets: in turn, so all are used."""
    return [(number * BUILT + i) % pool for i in range(BUILT)]


def _history(
    number: int, sessions: dict[str, Session], members: Sequence[Question], count: int
) -> History:
    rng = random.Random(f"{SEED}:{number}")
    asks: list[Ask] = []
    for q in members:
        kind = kind_of(q)
        if kind is None:
            continue
        evidence = {
            f"{sid}#{turn}"
            for sid in q.haystack_session_ids
            if "answer" in sid
            for turn, _, has in turns_of(sessions[sid].messages)
            if has
        }
        if evidence:
            asks.append(
                Ask(
                    q.question_id,
                    kind,
                    q.question,
                    parse_date(q.question_date),
                    frozenset(evidence),
                )
            )
    first = min(s.start for s in sessions.values())
    last = max(s.start for s in sessions.values())
    span = max(1, int((last - first).total_seconds()))
    built: list[Session] = []
    for n in _picks(number, len(INSTRUCTIONS)):
        said, request = INSTRUCTIONS[n]
        start = first + timedelta(seconds=rng.randrange(span // 2))
        sid = f"built-instruction-{n}"
        built.append(Session(sid, start, (("user", said, True), ("assistant", "Noted.", False))))
        asks.append(
            Ask(
                f"{number}-{sid}",
                "instruction",
                request,
                start + ASK_AFTER,
                frozenset({f"{sid}#1"}),
            )
        )
    for n in _picks(number, len(CONTRADICTIONS)):
        early, late, question = CONTRADICTIONS[n]
        one = first + timedelta(seconds=rng.randrange(span // 2))
        two = one + timedelta(seconds=rng.randrange(span // 2))
        a, b = f"built-contradiction-{n}a", f"built-contradiction-{n}b"
        built.append(Session(a, one, (("user", early, True), ("assistant", "I see.", False))))
        built.append(Session(b, two, (("user", late, True), ("assistant", "Good to know.", False))))
        asks.append(
            Ask(
                f"{number}-contradiction-{n}",
                "contradiction",
                question,
                two + ASK_AFTER,
                frozenset({f"{a}#1", f"{b}#1"}),
            )
        )
    for s in built:
        sessions[s.sid] = s
    days: dict[str, int] = {}
    for s in sessions.values():
        days[s.start.date().isoformat()] = days.get(s.start.date().isoformat(), 0) + 1
    candidates = sorted(
        s.sid
        for s in sessions.values()
        if days[s.start.date().isoformat()] == 1
        and 3 <= len(turns_of(s.messages)) <= 10
        and not s.sid.startswith("built-")
    )
    for sid in rng.sample(candidates, min(SUMMARIES, len(candidates))):
        s = sessions[sid]
        day = f"{s.start:%B} {s.start.day}, {s.start.year}"
        asks.append(
            Ask(
                f"{number}-summary-{sid}",
                "summary",
                f"What did we talk about on {day}?",
                s.start + timedelta(days=7),
                frozenset(f"{sid}#{t}" for t, _, _ in turns_of(s.messages)),
            )
        )
    ordered = sorted(sessions.values(), key=lambda s: (s.start, s.sid))
    total = count + sum(_session_tokens(s) for s in built)
    return History(number, ordered, asks, total)


def split(asks: Sequence[Ask]) -> dict[str, str]:
    by_kind: dict[str, list[str]] = {}
    for a in asks:
        by_kind.setdefault(a.kind, []).append(a.qid)
    half: dict[str, str] = {}
    for ids in by_kind.values():
        for n, qid in enumerate(_order(ids)):
            half[qid] = "tune" if n % 2 == 0 else "report"
    return half


# -- homes ----------------------------------------------------------------------------------


def import_lines(
    h: History,
) -> tuple[list[bytes], dict[tuple[str, int], str], list[tuple[str, str]]]:
    """The ``tether sessions import`` lines; (tether session, turn) -> "<sid>#<turn>"; and
    the baseline's documents (key, turn text)."""
    lines: list[bytes] = []
    key_of: dict[tuple[str, int], str] = {}
    docs: list[tuple[str, str]] = []
    for n, s in enumerate(h.sessions):
        tid = f"h{n:05d}"
        for pos, (role, text, _) in enumerate(s.messages, start=1):
            stamp = (s.start + timedelta(seconds=pos)).strftime("%Y-%m-%dT%H:%M:%SZ")
            line = {"session": tid, "role": role, "text": text, "time": stamp}
            lines.append(json.dumps(line).encode())
        for turn, text, _ in turns_of(s.messages):
            key_of[(tid, turn)] = f"{s.sid}#{turn}"
            docs.append((f"{s.sid}#{turn}", text))
    return lines, key_of, docs


def build_home(h: History, home: Path, lines: Sequence[bytes]) -> None:
    mark = home / "long-horizon.fingerprint"
    if mark.exists() and mark.read_text() == h.fingerprint():
        return
    if home.exists():
        shutil.rmtree(home)
    init_home(home)
    src = home.parent / f"{home.name}.import.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    with closing(SqliteStore(home / "tether.db")) as store:
        import_jsonl(
            home,
            src,
            now=h.sessions[-1].start + timedelta(days=1),
            config=Config(),
            store=lambda: nullcontext(store),
        )
    src.unlink()
    mark.write_text(h.fingerprint())


def bm25_rank(
    docs: Sequence[tuple[str, str]],
    asks: Sequence[Ask],
    dated: dict[str, datetime] | None = None,
) -> dict[str, list[str]]:
    """Plain BM25 (bm25s), best first, per question id: the index built once. With
    ``dated`` (key -> when written), turns written after the question are dropped from
    its ranking (the top 10 then filled from further down)."""
    deep = K if dated is None else 50 * K
    ranked = bm25_keys(docs, [(a.qid, a.question) for a in asks], deep)
    out: dict[str, list[str]] = {}
    for a in asks:
        keys = ranked[a.qid]
        if dated is not None:
            keys = [key for key in keys if dated[key] < a.day_end]
        out[a.qid] = keys[:K]
    return out


# -- running ----------------------------------------------------------------------------------


class AsOf:
    """Whether recall leaves out what was written after the question's date, and whether
    it is also asked with vectors fused (set before the workers fork)."""

    on = True
    vectors = False


def fused_shares(
    store: SqliteStore, home: Path, h: History, key_of: dict[tuple[str, int], str]
) -> dict[str, float]:
    """Each question's evidence recall@10 with vectors fused (``--vectors``): the home's rows
    embedded first (``reindex --vectors``'s loop; kept in the home, so a ``--keep`` run
    embeds once)."""
    from tether.llm import embedder
    from tether.memory.vectors import Vectors, embed_missing
    from tether.stores.sqlite.vectors import SqliteVectors

    out: dict[str, float] = {}
    with closing(SqliteVectors(home / "tether.db")) as index:
        vectors = Vectors(embedder.load(threads=1), index)
        embed_missing(vectors, batch=512)
        vectors.refresh()
        for a in h.asks:
            until = a.day_end if AsOf.on else None
            hits = recall(store, a.question, K, time=a.now, until=until, vectors=vectors)
            ranking = [
                key_of.get((hit.session, hit.turn), hit.ref)
                for hit in hits
                if hit.session is not None and hit.turn is not None
            ]
            out[a.qid] = share(ranking, a.evidence)
    return out


@dataclass
class Result:
    qid: str
    kind: str
    history: int
    evidence: int
    tether: float = 0.0
    bm25: float = 0.0
    bm25_as_of: float = 0.0
    fused: float | None = None
    #: ``tether`` with the evidence turns that a summary unit among the hits covers
    #: (``core.recall.summaries``: its first to last turn) counted as found.
    pointed: float = 0.0
    ceiling: float = 0.0
    ms: float = 0.0
    hits: list[str] = field(default_factory=list)


def share(ranking: Sequence[str], evidence: frozenset[str]) -> float:
    return len(set(ranking[:K]) & evidence) / len(evidence)


def run_history(job: tuple[History, Path]) -> tuple[list[Result], dict[str, Any]]:
    h, root = job
    lines, key_of, docs = import_lines(h)
    home = root / f"history-{h.number}"
    start = time.perf_counter()
    build_home(h, home, lines)
    built_s = time.perf_counter() - start
    base = bm25_rank(docs, h.asks)
    dated = {f"{s.sid}#{t}": s.start for s in h.sessions for t, _, _ in turns_of(s.messages)}
    base_as_of = bm25_rank(docs, h.asks, dated)
    results: list[Result] = []
    with closing(SqliteStore(home / "tether.db")) as store:
        for a in h.asks:
            t0 = time.perf_counter()
            hits = recall(store, a.question, K, time=a.now, until=a.day_end if AsOf.on else None)
            ms = (time.perf_counter() - t0) * 1000
            ranking = [
                key_of.get((hit.session, hit.turn), hit.ref)
                for hit in hits
                if hit.session is not None and hit.turn is not None
            ]
            covered = {
                key_of[(hit.session, t)]
                for hit in hits[:K]
                if hit.session is not None and hit.first_turn is not None
                for t in range(hit.first_turn, (hit.last_turn or 0) + 1)
                if (hit.session, t) in key_of
            }
            results.append(
                Result(
                    a.qid,
                    a.kind,
                    h.number,
                    len(a.evidence),
                    tether=share(ranking, a.evidence),
                    pointed=len((set(ranking[:K]) | covered) & a.evidence) / len(a.evidence),
                    bm25=share(base[a.qid], a.evidence),
                    bm25_as_of=share(base_as_of[a.qid], a.evidence),
                    ceiling=min(1.0, K / len(a.evidence)),
                    ms=ms,
                    hits=ranking,
                )
            )
        if AsOf.vectors:
            t0 = time.perf_counter()
            fused = fused_shares(store, home, h, key_of)
            for r in results:
                r.fused = fused[r.qid]
            embed_s = time.perf_counter() - t0
    info = {
        "figure": "history",
        "history": h.number,
        "tokens": h.tokens,
        "sessions": len(h.sessions),
        "turns": len(docs),
        "questions": len(h.asks),
        "build_s": round(built_s, 1),
    }
    if AsOf.vectors:
        info["embed_and_fused_s"] = round(embed_s, 1)
    return results, info


def mean(values: Iterable[float]) -> float:
    items = list(values)
    return statistics.fmean(items) if items else float("nan")


def summarise(
    results: Sequence[Result], half_of: dict[str, str], halves: Sequence[str]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for half in halves:
        rs = [r for r in results if half == "all" or half_of[r.qid] == half]
        for kind in [*KINDS, "overall", "questions"]:
            group = [r for r in rs if kind in ("overall", "questions", r.kind)]
            if kind == "overall":  # the mean of the kinds, as the issue counts it
                kinds = [g for k in KINDS if (g := [r for r in group if r.kind == k])]
            else:
                kinds = [group]
            figures = {
                name: mean(mean(getattr(r, name) for r in g) for g in kinds)
                for name in ("tether", "bm25", "bm25_as_of", "ceiling", "pointed")
            }
            value, base = figures["tether"], figures["bm25"]
            out.append(
                {
                    "figure": "evidence_recall@10",
                    "half": half,
                    "kind": kind,
                    "questions": len(group),
                    "value": round(value, 4),
                    "baseline": round(base, 4),
                    "ratio": round(value / base, 3) if base > 0 else None,
                    "baseline_as_of": round(figures["bm25_as_of"], 4),
                    "ceiling": round(figures["ceiling"], 4),
                    "pointed": round(figures["pointed"], 4),
                }
            )
            if group and all(r.fused is not None for r in group):
                fused = mean(mean(r.fused or 0.0 for r in g) for g in kinds)
                out[-1]["fused"] = round(fused, 4)
    return out


def table(records: Sequence[dict[str, Any]]) -> None:
    half = None
    for r in records:
        if r["half"] != half:
            half = r["half"]
            print(f"\n{half} half: tether / bm25 / bm25 as of (ceiling)", file=sys.stderr)
        fused = f"  fused {r['fused']:.3f}" if "fused" in r else ""
        print(
            f"{r['kind']:<17} {r['questions']:>4}  {r['value']:.3f} / {r['baseline']:.3f}"
            f" / {r['baseline_as_of']:.3f}  ({r['ceiling']:.2f}){fused}"
            f"  pointed {r['pointed']:.3f}",
            file=sys.stderr,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--histories", type=int, default=0, help="histories to run (0: all)")
    parser.add_argument("--tokens", type=int, default=1_000_000, help="tokens per history")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", choices=("tune", "report"))
    parser.add_argument("--keep", type=Path, help="cache built homes here between runs")
    parser.add_argument("--misses", action="store_true", help="list missed questions (stderr)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MODULE.NAME=VALUE",
        help="tuning: override a constant (e.g. recall.SPREAD=False, timeline.SESSION_CAP=3)",
    )
    parser.add_argument(
        "--vectors",
        action="store_true",
        help="also recall with vectors fused (tether[vectors]; embeds each home once)",
    )
    parser.add_argument(
        "--no-as-of",
        action="store_true",
        help="let recall see what was written after the question's date",
    )
    args = parser.parse_args()
    for setting in args.set:
        override(setting)
    AsOf.on = not args.no_as_of
    AsOf.vectors = args.vectors
    try:
        import bm25s  # noqa: F401
    except ImportError:
        sys.exit("the baseline needs bm25s: .venv/bin/pip install -e '.[bench]'")
    start = time.perf_counter()
    histories = build_histories(load(args.data), args.tokens)
    if args.histories:
        histories = histories[: args.histories]
    half_of = split([a for h in histories for a in h.asks])
    if args.only:
        for h in histories:
            h.asks = [a for a in h.asks if half_of[a.qid] == args.only]
    with tempfile.TemporaryDirectory(prefix="tether-long-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        jobs = [(h, root) for h in histories]
        if args.jobs <= 1:
            done = [run_history(j) for j in jobs]
        else:
            with ProcessPoolExecutor(
                max_workers=args.jobs, mp_context=multiprocessing.get_context("fork")
            ) as pool:
                done = list(pool.map(run_history, jobs))
    results = [r for rs, _ in done for r in rs]
    for _, info in done:
        print(json.dumps(info))
    records = summarise(results, half_of, [args.only] if args.only else ["tune", "report", "all"])
    for record in records:
        print(json.dumps(record))
    print(
        json.dumps(
            {
                "figure": "run",
                "histories": len(histories),
                "questions": len(results),
                "wall_s": round(time.perf_counter() - start, 1),
                "jobs": args.jobs,
                "recall_ms_mean": round(mean(r.ms for r in results), 2),
            }
        ),
        flush=True,
    )
    table(records)
    if args.misses:
        asks = {a.qid: a for h in histories for a in h.asks}
        for r in results:
            if r.tether < r.ceiling:
                a = asks[r.qid]
                print(
                    f"[{half_of[r.qid]}] {r.kind} {r.qid} {r.tether:.2f}/{r.bm25:.2f} "
                    f"{a.now:%Y-%m-%d} {a.question[:90]!r} gold={sorted(a.evidence)[:4]} "
                    f"got={r.hits[:5]}",
                    file=sys.stderr,
                )


if __name__ == "__main__":
    main()
