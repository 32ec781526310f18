"""Recall latency over 100,000 and 1,000,000 indexed turns; import throughput.

Prints one JSON line per figure. Each home is built with ``import_jsonl`` from a generated
JSONL file (pseudo-English: real function words plus a Zipf-distributed content
vocabulary of 30,000 words, seeded; sessions of ~50 turns, a user line and a reply each),
which also gives the import throughput at that size. Baselines, measured in the same run:

- recall: a raw single-term FTS5 MATCH (the query's rarest word, bm25, LIMIT k) on the
  same table, and the naive plan (OR of every query word, every match ranked);
- import: the same records written as session logs with plain appends and one fsync per
  file (no validation, no locks, no index).

Goal (issue "The agent runtime and its memory"): p50 < 5 ms and p99 < 25 ms at 1M turns.

``--vectors real|synthetic`` (the extra tether[vectors]; issue 21: p50 < 20 ms, p99 < 60
ms at 1M turns with vectors on, query embedding included; known-item top 5 >= 0.80):
after the lexical figures, every row gets a vector and recall runs again with vectors
fused, beside the lexical figures of the same run. ``real`` embeds every row with the
model (embedding throughput is measured on it; on two shared cores about 20-150 rows/s, so
only small homes); ``synthetic`` stores random unit vectors instead, which measures the
search and the query embedding at any size honestly but says nothing of quality (no
known-item figure then). Also printed: the vectors' size per 100k turns.

    .venv/bin/python benchmarks/recall_latency.py [--turns 100000 1000000] [--queries 300]
        [--vectors real|synthetic] [--keep DIR] [--dump-hits FILE]

``--dump-hits FILE`` (with ``--vectors``) writes every question's fused hits, refs and
scores, to ``FILE.<turns>``, untimed; ``benchmarks/same_hits.py A B`` says whether two
such files (two checkouts on one kept home) rank alike: a speed change must not move a
hit.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tether.config import Config
from tether.core.recall import query
from tether.files import encode_records
from tether.home import init_home
from tether.imports.jsonl import import_jsonl
from tether.memory.indexer import index_home
from tether.memory.recall import recall
from tether.records import Assistant, LogRecord, SearchQuery, SearchTerm, User
from tether.stores.sqlite import SqliteStore
from tether.stores.sqlite import fts as sqlite_fts

T0 = datetime(2024, 1, 1, tzinfo=UTC)
K = 5

_FUNCTION_TEXT = (
    "the a of to and in is it you that he was for on are with as i his they be at one have "
    "this from or had by but what some we can out other were all there when up use your how "
    "said an each she which do their if will about many then them would so these her "
    "him has more could go come did no my than who may been now any just me our"
)
_CONTENT_TEXT = (
    "time word way number sound people water call day part place made live back little man "
    "year show form sentence great think help line turn cause mean move right boy old tell "
    "set three want air well play small end put home read hand port large spell add land "
    "big high follow act ask change light kind house picture animal point mother world "
    "build earth father head stand page country answer school grow study learn plant cover "
    "food sun four state keep eye thought city tree cross farm start story saw sea draw left "
    "night life north open walk example paper group music letter mile river car feet care "
    "book carry science eat room friend idea fish mountain base horse cut watch color face "
    "wood girl list bird body dog family song measure door product black short class wind "
    "question ship area rock order fire south problem piece king space hour step ground "
    "interest reach table travel morning simple vowel war pattern center love person money "
    "road map rain rule town machine note plan figure star box field beauty drive week ocean "
    "minute mind tail fact street inch wheel force object surface moon island foot system "
    "test record boat gold plane wonder game shape heat snow bring paint language garden "
    "kitchen doctor dentist flight hotel restaurant recipe budget invoice meeting project "
    "deadline report server database migration backup password account bank tax rent lease "
    "insurance appointment birthday wedding gift holiday ticket train bus bike coffee tea "
    "dinner lunch breakfast cat puppy vet medicine exercise gym yoga running marathon "
    "guitar piano concert movie podcast novel poem camera photo phone laptop printer "
    "router keyboard screen battery charger cable speaker tomato basil pepper onion garlic"
)
_SYLLABLE_TEXT = "ka lo mi ren to sa vel dor an is ur pe tri gon sel mar bo nik fa lu zen qua"
FUNCTION_WORDS = _FUNCTION_TEXT.split()
CONTENT_WORDS = _CONTENT_TEXT.split()
SYLLABLES = _SYLLABLE_TEXT.split()
TEMPLATES = (
    "What did I say about the {a} and the {b}?",
    "When did we talk about {a}?",
    "Remind me what the {a} {b} was",
    "Did I ever mention {a} with {b}?",
    "what was the {a} thing, something about {b} and {c}",
    "Where did I put the {a}?",
)


class Corpus:
    """Deterministic pseudo-English: function words, then Zipf-ranked content words."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        vocab = list(dict.fromkeys(CONTENT_WORDS))
        seen = set(vocab) | set(FUNCTION_WORDS)
        while len(vocab) < 30_000:
            word = "".join(self.rng.choice(SYLLABLES) for _ in range(self.rng.randint(2, 4)))
            if word not in seen:
                seen.add(word)
                vocab.append(word)
        self.vocab = vocab
        self.rank = {w: r for r, w in enumerate(vocab)}
        self.cum = list(itertools.accumulate(1 / (r + 1) ** 1.07 for r in range(len(vocab))))

    def sentence(self, lo: int, hi: int) -> str:
        n = self.rng.randint(lo, hi)
        content = self.rng.choices(self.vocab, cum_weights=self.cum, k=n)
        words = [w if self.rng.random() < 0.6 else self.rng.choice(FUNCTION_WORDS) for w in content]
        return " ".join(words).capitalize() + "."


def write_import(path: Path, corpus: Corpus, turns: int, per_session: int) -> list[str]:
    """The import file; returns each turn's user text (turn i of the file, in order)."""
    users: list[str] = []
    t = T0
    with path.open("w") as f:
        for i in range(turns):
            sid = f"s{i // per_session:07d}"
            t += timedelta(seconds=30)
            user = corpus.sentence(6, 24)
            users.append(user)
            reply = corpus.sentence(8, 40)
            for role, text, dt in (("user", user, 0), ("assistant", reply, 5)):
                stamp = (t + timedelta(seconds=dt)).strftime("%Y-%m-%dT%H:%M:%SZ")
                f.write(json.dumps({"session": sid, "role": role, "text": text, "time": stamp}))
                f.write("\n")
    return users


def raw_append_baseline(path: Path, out: Path) -> float:
    """Seconds to write the same records as session logs: plain appends, one fsync a file."""
    by_session: dict[str, list[LogRecord]] = {}
    start = time.perf_counter()
    with path.open("rb") as f:
        for raw in f:
            d = json.loads(raw)
            at = datetime.fromisoformat(d["time"])
            rec: LogRecord = (
                User(time=at, text=d["text"])
                if d["role"] == "user"
                else Assistant(time=at, text=d["text"])
            )
            by_session.setdefault(d["session"], []).append(rec)
    for sid, records in by_session.items():
        fd = os.open(out / f"{sid}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, encode_records(records))
            os.fsync(fd)
        finally:
            os.close(fd)
    return time.perf_counter() - start


def make_queries(corpus: Corpus, users: list[str], n: int) -> Iterator[tuple[str, int, str]]:
    """(question, target turn index, its rarest word). Most ask after one turn's distinctive
    word with a couple of its others; one in ten uses only common words."""
    rng = random.Random(99)
    common = [w for w in corpus.vocab[:300]]
    for i in range(n):
        target = rng.randrange(len(users))
        words = [w for w in query.terms(users[target]) if w in corpus.rank]
        if i % 10 == 9 or not words:
            a, b, c = rng.sample(common, 3)
            yield rng.choice(TEMPLATES).format(a=a, b=b, c=c), -1, a
            continue
        rare = max(words, key=corpus.rank.__getitem__)
        others = [w for w in words if w != rare] or [rare]
        b, c = rng.choice(others), rng.choice(others)
        yield rng.choice(TEMPLATES).format(a=rare, b=b, c=c), target, rare


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def emit(**figure: object) -> None:
    print(json.dumps(figure), flush=True)


def bench_vectors(
    mode: str,
    *,
    home: Path,
    store: SqliteStore,
    questions: list[tuple[str, int, str]],
    turn_of: dict[int, tuple[str, int]],
    turns: int,
    dump: Path | None = None,
) -> None:
    """The vector figures (see the module's doc) on a home already built and measured;
    with ``dump``, every question's fused hits written there (``dump_hits``)."""
    import numpy as np

    from tether.llm import embedder
    from tether.memory.vectors import Vectors, embed_missing
    from tether.stores.sqlite.vectors import SqliteVectors

    model = embedder.load()
    index = SqliteVectors(home / "tether.db")

    def store_bytes() -> int:  # the SQLite file, its WAL and journal; not the graph
        return sum(p.stat().st_size for p in home.glob("tether.db*") if ".graph-" not in p.name)

    size_before = store_bytes()
    had = index.vector_counts(model.model_id).done
    try:
        vectors = Vectors(model, index)
        start = time.perf_counter()
        if mode == "real":
            embed_missing(vectors, batch=256)
            rate = vectors.counts.total / (time.perf_counter() - start)
            emit(figure="embed_rows_per_s", turns=turns, value=round(rate, 1), mode=mode)
        else:
            rng = np.random.default_rng(3)
            after = 0
            while batch := index.missing_vectors(model.model_id, 20_000, after=after):
                m = rng.standard_normal((len(batch), model.dim)).astype(np.float32)
                m /= np.linalg.norm(m, axis=1, keepdims=True)
                index.put_vectors(
                    model.model_id, [(r.doc, m[i : i + 1]) for i, r in enumerate(batch)]
                )
                after = batch[-1].doc
            vectors.refresh()
        start = time.perf_counter()
        grown = index.maintain(model.model_id)
        if grown:
            took = time.perf_counter() - start
            emit(
                figure="vector_graph_build",
                turns=turns,
                value=round(took, 1),
                unit="s",
                vectors=grown,
                per_s=round(grown / took),
                note="HNSW over the vectors (stores/vector_graph.py), built once, saved",
            )
        store.optimize_index()
        if not had:  # (a kept home that had its vectors already: nothing new to weigh)
            size = store_bytes() - size_before
            emit(
                figure="vector_mb_per_100k_turns",
                turns=turns,
                value=round(size / 2**20 * 100_000 / turns, 1),
                rows=vectors.counts.done,
                dtype="int8 + scale",
            )
        graph = index.graph_file(model.model_id)
        if graph.exists():
            emit(
                figure="vector_graph_mb_per_100k_turns",
                turns=turns,
                value=round(graph.stat().st_size / 2**20 * 100_000 / turns, 1),
                note="the saved graph file beside the store",
            )
        for q, _, _ in questions[:20]:  # load the matrix, warm the caches
            recall(store, q, K, time=T0, vectors=vectors)
        # The timed questions are asked for the first time (the checkouts that keep a
        # question's vector: ``Vectors.forget_asked``; ``recall_ab.py`` times repeats).
        forget = getattr(vectors, "forget_asked", None)
        if forget is not None:
            forget()
        embed_ms: list[float] = []
        for q, _, _ in questions[:100]:
            start = time.perf_counter()
            model.embed([q])
            embed_ms.append((time.perf_counter() - start) * 1000)
        ours: list[float] = []
        found = known = 0
        for q, target, _ in questions:
            start = time.perf_counter()
            hits = recall(store, q, K, time=T0, vectors=vectors)
            ours.append((time.perf_counter() - start) * 1000)
            if target >= 0:
                known += 1
                found += turn_of[target] in {(h.session, h.turn) for h in hits}
        if dump is not None:
            dump_hits(dump, store, vectors, questions)
        query = model.embed([questions[0][0]])
        nearest = [timed(lambda: index.nearest(model.model_id, query, 200)) for _ in range(50)]
        # The exact scan in the same run: the same table, no graph (the baseline).
        exact_index = SqliteVectors(home / "tether.db", graph_from=2**62)
        try:
            exact_index.nearest(model.model_id, query, 200)  # load the matrix
            exact = [
                timed(lambda: exact_index.nearest(model.model_id, query, 200)) for _ in range(20)
            ]
        finally:
            exact_index.close()
        for p in (50, 99):
            emit(
                figure=f"recall_vectors_ms_p{p}",
                turns=turns,
                value=round(percentile(ours, p), 2),
                mode=mode,
                goal="p50 < 20, p99 < 60 at 1M turns, query embedding included",
                embed_query_ms=round(percentile(embed_ms, p), 2),
                nearest_200_ms=round(percentile(nearest, p), 2),
                nearest_200_exact_scan_ms=round(percentile(exact, p), 2),
                graph=index.graph_file(model.model_id).exists(),
            )
        if mode == "real":
            emit(
                figure="recall_vectors_target_in_top5",
                turns=turns,
                value=round(found / known, 3),
                queries=known,
                goal=">= 0.80 at 1M turns",
            )
    finally:
        index.close()


def dump_hits(
    path: Path, store: SqliteStore, vectors: object, questions: list[tuple[str, int, str]]
) -> None:
    """Each question's fused ``recall`` (k 10) and ``recall_sessions`` (k 5), one JSON line
    each: refs in order and scores (repr), to compare two checkouts' rankings on one kept
    home (``benchmarks/same_hits.py``)."""
    from tether.memory.recall import recall_sessions
    from tether.memory.vectors import Vectors

    assert isinstance(vectors, Vectors)
    with path.open("w") as f:
        for q, _, _ in questions:
            hits = recall(store, q, 10, time=T0, vectors=vectors)
            f.write(json.dumps({"q": q, "hits": [[h.ref, repr(h.score)] for h in hits]}) + "\n")
            found = recall_sessions(store, q, 5, time=T0, vectors=vectors)
            sessions = [[s.session, repr(s.score), [t.ref for t in s.turns]] for s in found]
            f.write(json.dumps({"q": q, "sessions": sessions}) + "\n")


def bench(
    turns: int,
    n_queries: int,
    per_session: int,
    seed: int,
    tmp: Path,
    *,
    vectors: str | None = None,
    dump: Path | None = None,
) -> None:
    corpus = Corpus(seed)
    home = tmp / f"home-{turns}"
    src = tmp / f"import-{turns}.jsonl"
    if (home / "tether.db").exists() and src.exists():  # kept by an earlier --keep run
        users = [json.loads(line)["text"] for line in src.open() if '"role": "user"' in line]
    else:
        users = build(home, src, corpus, turns=turns, per_session=per_session, tmp=tmp)
    store = SqliteStore(home / "tether.db")
    try:
        measure(
            home,
            store,
            corpus=corpus,
            users=users,
            turns=turns,
            n_queries=n_queries,
            per_session=per_session,
            vectors=vectors,
            dump=dump,
        )
    finally:
        store.close()


def build(
    home: Path, src: Path, corpus: Corpus, *, turns: int, per_session: int, tmp: Path
) -> list[str]:
    """The home imported from a generated file, with the import figures; the users' lines."""
    init_home(home)
    start = time.perf_counter()
    users = write_import(src, corpus, turns, per_session)
    generate_s = time.perf_counter() - start
    store = SqliteStore(home / "tether.db")
    try:
        start = time.perf_counter()
        report = import_jsonl(home, src, now=T0, config=Config(), store=lambda: nullcontext(store))
        import_s = time.perf_counter() - start
    finally:
        store.close()
    raw_dir = tmp / f"raw-{turns}"
    raw_dir.mkdir()
    raw_s = raw_append_baseline(src, raw_dir)
    rate, raw_rate = turns / import_s, turns / raw_s
    emit(
        figure="import_turns_per_s",
        turns=turns,
        value=round(rate),
        includes="validate, session files with fsync, FTS index",
        baseline="plain appends + one fsync per session file",
        baseline_value=round(raw_rate),
        ratio=round(rate / raw_rate, 3),
    )
    size = sum(p.stat().st_size for p in home.glob("tether.db*"))
    emit(
        figure="build_s",
        turns=turns,
        value=round(generate_s + import_s, 1),
        generate_s=round(generate_s, 1),
        import_and_index_s=round(import_s, 1),
        indexed_rows=report.indexed_rows,
        db_mb=round(size / 2**20),
    )
    return users


def measure(
    home: Path,
    store: SqliteStore,
    *,
    corpus: Corpus,
    users: list[str],
    turns: int,
    n_queries: int,
    per_session: int,
    vectors: str | None,
    dump: Path | None = None,
) -> None:
    """The recall figures on a built home (lexical, then with vectors if asked)."""
    emit(
        figure="index_pass_nothing_new_ms",
        turns=turns,
        value=round(timed(lambda: index_home(home, store)), 1),
        note="what `memory recall` pays first on an up-to-date home",
    )

    questions = list(make_queries(corpus, users, n_queries))
    turn_of = {i: (f"s{i // per_session:07d}", i % per_session + 1) for i in range(turns)}
    conn = sqlite3.connect(home / "tether.db")
    try:
        for q, _, rare in questions[:20]:  # warm the page cache for everyone alike
            recall(store, q, K, time=T0)
            conn.execute(RAW, (sqlite_fts.term(SearchTerm(rare)), K)).fetchall()
        ours: list[float] = []
        found = known = 0
        for q, target, _ in questions:
            start = time.perf_counter()
            hits = recall(store, q, K, time=T0)
            ours.append((time.perf_counter() - start) * 1000)
            if target >= 0:
                known += 1
                found += turn_of[target] in {(h.session, h.turn) for h in hits}
        single: list[float] = []
        for _, _, rare in questions:
            start = time.perf_counter()
            conn.execute(RAW, (sqlite_fts.term(SearchTerm(rare)), K)).fetchall()
            single.append((time.perf_counter() - start) * 1000)
        naive: list[float] = []
        for q, _, _ in questions[: max(20, n_queries // 5)]:
            start = time.perf_counter()
            store.search(query.plain(q) or SearchQuery(), K * 4)
            naive.append((time.perf_counter() - start) * 1000)
    finally:
        conn.close()
    for p in (50, 99):
        value, base = percentile(ours, p), percentile(single, p)
        emit(
            figure=f"recall_ms_p{p}",
            turns=turns,
            value=round(value, 2),
            queries=len(ours),
            k=K,
            goal="p50 < 5, p99 < 25 at 1M turns",
            baseline="raw single-term FTS5 MATCH (rarest word), bm25, LIMIT k",
            baseline_value=round(base, 2),
            ratio=round(value / base, 2),
            naive_or_all_terms_ms=round(percentile(naive, p), 2),
        )
    emit(
        figure="recall_target_in_top5",
        turns=turns,
        value=round(found / known, 3),
        queries=known,
        note="known-item questions: the asked-about turn is in the top 5",
    )
    emit(figure="recall_ms_mean", turns=turns, value=round(statistics.fmean(ours), 2))
    if vectors is not None:
        bench_vectors(
            vectors,
            home=home,
            store=store,
            questions=questions,
            turn_of=turn_of,
            turns=turns,
            dump=dump,
        )


RAW = "SELECT rowid, bm25(doc_fts) AS s FROM doc_fts WHERE doc_fts MATCH ? ORDER BY s LIMIT ?"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--session-turns", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--vectors", choices=("real", "synthetic"), default=None)
    parser.add_argument(
        "--keep", type=Path, default=None, help="build the homes in this (new) folder and keep them"
    )
    parser.add_argument(
        "--dump-hits",
        type=Path,
        default=None,
        help="with --vectors: write each question's fused hits here (<file>.<turns>)",
    )
    args = parser.parse_args()
    for turns in args.turns:
        with (
            tempfile.TemporaryDirectory(prefix="tether-bench-")
            if args.keep is None
            else nullcontext(str(args.keep))
        ) as tmp:
            Path(tmp).mkdir(parents=True, exist_ok=True)
            dump = None if args.dump_hits is None else args.dump_hits.with_suffix(f".{turns}")
            bench(
                turns,
                args.queries,
                args.session_turns,
                args.seed,
                Path(tmp),
                vectors=args.vectors,
                dump=dump,
            )


if __name__ == "__main__":
    main()
