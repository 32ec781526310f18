"""Evidence recall on LoCoMo: does ``recall(k=10)`` find the turns a question's answer is in?

**Data.** ``../shared/bench-data/locomo/locomo8.json`` (8 conversations of two people,
19-32 dated sessions each, ~4.8k turns in all; see its README). Tuning half: conv-26,
conv-41, conv-42, conv-43 (decisions are taken there); reporting half: conv-47, conv-48,
conv-49, conv-50 (as ``locomo_extraction.py`` splits them).

**Protocol.** Each conversation goes into a fresh home by ``import_jsonl`` (the ``tether
sessions import`` path): LoCoMo session n becomes tether session ``s<n>``, dated at its
``session_<n>_date_time`` (each turn a second after the one before), and every turn of it
a ``user`` line with its ``speaker`` (both are people: a shared chat), the image caption
LoCoMo gives for a shared photo appended as ``[image: ...]``. So tether's turn k of
session ``s<n>`` is LoCoMo's ``D<n>:<k>`` (checked). Every QA item with evidence
(``D<n>:<k>`` ids; ids naming no turn are dropped, and items left with none are skipped)
is asked through ``recall(store, question, 10, time=a day after the last session)``.

**Figure.** Evidence **recall@10** per question: the share of its evidence turns among the
first 10 hits, averaged per LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop, 5 adversarial), over categories 1-4 (``answerable``: adversarial questions
ask about something the conversation does not say) and over all questions
(``questions``). Beside it, in the
same run over the same turns:

- ``bm25``: plain BM25 (``bm25s``: Lucene, k1 1.5, b 0.75, English stop words, no
  stemming), one document per turn (speaker: text), per conversation;
- ``no_units``: tether with summary units left out (``recall.SUMMARY_WEIGHT = 0``);
- ``pointed``: tether, counting as found the evidence turns a summary unit among the hits
  covers (its first to last turn: what a caller opens);
- ``fused`` (``--vectors``, the extra tether[vectors]): recall with vectors fused, each
  home embedded first (MiniLM, one thread: minutes for ~600 turns on a shared core).

    PYTHONPATH=src:. python benchmarks/locomo_evidence.py [--half tune|report|both]
        [--jobs 2] [--vectors] [--set MODULE.NAME=VALUE]

Output: one JSON line per (half, category) on stdout, a table on stderr.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import closing, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.bm25_baseline import bm25_keys
from benchmarks.longmemeval_retrieval import override
from tether.config import Config
from tether.home import init_home
from tether.imports.jsonl import import_jsonl
from tether.memory import recall as recall_module
from tether.memory.recall import recall
from tether.stores.sqlite import SqliteStore

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "bench-data" / "locomo"
TUNE = ("conv-26", "conv-41", "conv-42", "conv-43")
REPORT = ("conv-47", "conv-48", "conv-49", "conv-50")
K = 10
CATEGORIES = {1: "multi_hop", 2: "temporal", 3: "open_domain", 4: "single_hop", 5: "adversarial"}
_EVIDENCE = re.compile(r"D(\d+):(\d+)")
_SESSION = re.compile(r"session_(\d+)")


@dataclass(frozen=True)
class Ask:
    qid: str
    question: str
    category: int
    evidence: frozenset[str]  # "D<n>:<k>"


@dataclass
class Result:
    qid: str
    conv: str
    category: int
    tether: float
    no_units: float
    pointed: float
    bm25: float
    fused: float | None
    ms: float


def conversations(ids: Iterable[str], data: Path = DATA) -> list[dict[str, Any]]:
    wanted = set(ids)
    loaded: list[dict[str, Any]] = json.loads((data / "locomo8.json").read_text())
    return [c for c in loaded if c["sample_id"] in wanted]


def session_date(text: str) -> datetime:
    """LoCoMo's ``1:56 pm on 8 May, 2023`` as a UTC time."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_text(t: dict[str, Any]) -> str:
    text = " ".join(str(t["text"]).split())
    caption = t.get("blip_caption")
    return f"{text} [image: {caption}]" if caption else text


def import_lines(conv: dict[str, Any]) -> tuple[list[bytes], list[tuple[str, str]], datetime]:
    """The import lines, the baseline's documents (dia id, text) and the time the
    questions are asked (a day after the last session)."""
    c = conv["conversation"]
    lines: list[bytes] = []
    docs: list[tuple[str, str]] = []
    last = datetime(1970, 1, 1, tzinfo=UTC)
    numbers = sorted(int(m.group(1)) for k, v in c.items() if (m := _SESSION.fullmatch(k)) and v)
    for n in numbers:
        start = session_date(c[f"session_{n}_date_time"])
        for k, t in enumerate(c[f"session_{n}"], start=1):
            if t["dia_id"] != f"D{n}:{k}":
                raise SystemExit(f"{conv['sample_id']}: turn {k} of session {n} is {t['dia_id']}")
            when = start + timedelta(seconds=k)
            line = {
                "session": f"s{n}",
                "role": "user",
                "speaker": t["speaker"],
                "text": turn_text(t),
                "time": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            lines.append(json.dumps(line).encode())
            docs.append((t["dia_id"], turn_text(t)))
            last = max(last, when)
    return lines, docs, last + timedelta(days=1)


def asks(conv: dict[str, Any], known: set[str]) -> list[Ask]:
    out = []
    for i, qa in enumerate(conv["qa"]):
        evidence = frozenset(
            f"D{s}:{t}" for s, t in _EVIDENCE.findall(json.dumps(qa.get("evidence", [])))
        )
        evidence &= known
        if evidence:
            out.append(Ask(f"{conv['sample_id']}/{i}", qa["question"], qa["category"], evidence))
    return out


def bm25_rank(docs: Sequence[tuple[str, str]], questions: Sequence[Ask]) -> dict[str, list[str]]:
    return bm25_keys(docs, [(a.qid, a.question) for a in questions], K)


def share(ranking: Sequence[str], evidence: frozenset[str]) -> float:
    return len(set(ranking[:K]) & evidence) / len(evidence)


class Options:
    """Set before the workers fork."""

    vectors = False


def _dia(session: str | None, turn: int | None) -> str | None:
    if session is None or turn is None or not session.startswith("s"):
        return None
    return f"D{session[1:]}:{turn}"


def _ask(store: SqliteStore, a: Ask, now: datetime, vectors: Any = None) -> tuple[float, float]:
    """(recall@10, recall@10 with summary units' turns counted) of one question."""
    hits = recall(store, a.question, K, time=now, vectors=vectors)
    ranking = [d for h in hits if (d := _dia(h.session, h.turn)) is not None]
    covered = {
        d
        for h in hits
        if h.first_turn is not None and h.last_turn is not None
        for t in range(h.first_turn, h.last_turn + 1)
        if (d := _dia(h.session, t)) is not None
    }
    return share(ranking, a.evidence), len((set(ranking) | covered) & a.evidence) / len(a.evidence)


def run_conversation(job: tuple[dict[str, Any], Path]) -> tuple[list[Result], dict[str, Any]]:
    conv, root = job
    cid = conv["sample_id"]
    lines, docs, now = import_lines(conv)
    questions = asks(conv, {d for d, _ in docs})
    home = root / cid
    init_home(home)
    src = root / f"{cid}.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    t0 = time.perf_counter()
    with closing(SqliteStore(home / "tether.db")) as store:
        import_jsonl(home, src, now=now, config=Config(), store=lambda: nullcontext(store))
    built_s = time.perf_counter() - t0
    base = bm25_rank(docs, questions)
    results: list[Result] = []
    with closing(SqliteStore(home / "tether.db")) as store:
        for a in questions:
            t1 = time.perf_counter()
            tether, pointed = _ask(store, a, now)
            ms = (time.perf_counter() - t1) * 1000
            weight = recall_module.SUMMARY_WEIGHT
            recall_module.SUMMARY_WEIGHT = 0.0
            try:
                no_units, _ = _ask(store, a, now)
            finally:
                recall_module.SUMMARY_WEIGHT = weight
            results.append(
                Result(
                    a.qid,
                    cid,
                    a.category,
                    tether,
                    no_units,
                    pointed,
                    share(base[a.qid], a.evidence),
                    None,
                    ms,
                )
            )
        info: dict[str, Any] = {
            "figure": "conversation",
            "conversation": cid,
            "sessions": len({json.loads(x)["session"] for x in lines}),
            "turns": len(docs),
            "questions": len(questions),
            "import_s": round(built_s, 2),
        }
        if Options.vectors:
            info["embed_s"] = _fused(store, home, questions, now, results)
    return results, info


def _fused(
    store: SqliteStore, home: Path, questions: Sequence[Ask], now: datetime, results: list[Result]
) -> float:
    """Embed the home (``reindex --vectors``'s loop) and ask again with vectors fused;
    the embedding's seconds."""
    from tether.llm import embedder
    from tether.memory.vectors import Vectors, embed_missing
    from tether.stores.sqlite.vectors import SqliteVectors

    with closing(SqliteVectors(home / "tether.db")) as index:
        t0 = time.perf_counter()
        vectors = Vectors(embedder.load(threads=1), index)
        embed_missing(vectors, batch=512)
        vectors.refresh()
        embed_s = time.perf_counter() - t0
        for a, r in zip(questions, results, strict=True):
            r.fused, _ = _ask(store, a, now, vectors)
    return round(embed_s, 1)


def mean(values: Iterable[float]) -> float:
    items = list(values)
    return statistics.fmean(items) if items else float("nan")


def summarise(results: Sequence[Result], halves: dict[str, Sequence[str]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for half, convs in halves.items():
        rs = [r for r in results if r.conv in convs]
        for name in [*CATEGORIES.values(), "answerable", "questions"]:
            group = [
                r
                for r in rs
                if name == "questions"
                or (name == "answerable" and r.category != 5)
                or CATEGORIES[r.category] == name
            ]
            record: dict[str, Any] = {
                "figure": "evidence_recall@10",
                "half": half,
                "category": name,
                "questions": len(group),
            }
            for field_name in ("tether", "no_units", "pointed", "bm25"):
                record[field_name] = round(mean(getattr(r, field_name) for r in group), 4)
            if group and all(r.fused is not None for r in group):
                record["fused"] = round(mean(r.fused or 0.0 for r in group), 4)
            out.append(record)
    return out


def table(records: Sequence[dict[str, Any]]) -> None:
    half = None
    for r in records:
        if r["half"] != half:
            half = r["half"]
            print(f"\n{half}: tether / no units / pointed / bm25 [fused]", file=sys.stderr)
        fused = f"  {r['fused']:.3f}" if "fused" in r else ""
        print(
            f"{r['category']:<12} {r['questions']:>4}  {r['tether']:.3f} / {r['no_units']:.3f}"
            f" / {r['pointed']:.3f} / {r['bm25']:.3f}{fused}",
            file=sys.stderr,
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--half", choices=("tune", "report", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--vectors", action="store_true", help="also recall with vectors fused")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MODULE.NAME=VALUE",
        help="tuning: override a constant (e.g. recall.SUMMARY_WEIGHT=0.5)",
    )
    args = parser.parse_args(argv)
    for setting in args.set:
        override(setting)
    Options.vectors = args.vectors
    try:
        import bm25s  # noqa: F401
    except ImportError:
        sys.exit("the baseline needs bm25s: .venv/bin/pip install -e '.[bench]'")
    halves: dict[str, Sequence[str]] = {}
    if args.half in ("tune", "both"):
        halves["tune"] = TUNE
    if args.half in ("report", "both"):
        halves["report"] = REPORT
    start = time.perf_counter()
    convs = conversations([c for cs in halves.values() for c in cs], args.data)
    with tempfile.TemporaryDirectory(prefix="tether-locomo-") as tmp:
        jobs = [(c, Path(tmp)) for c in convs]
        if args.jobs <= 1:
            done = [run_conversation(j) for j in jobs]
        else:
            with ProcessPoolExecutor(
                max_workers=args.jobs, mp_context=multiprocessing.get_context("fork")
            ) as pool:
                done = list(pool.map(run_conversation, jobs))
    results = [r for rs, _ in done for r in rs]
    for _, info in done:
        print(json.dumps(info))
    records = summarise(results, halves)
    for record in records:
        print(json.dumps(record))
    print(
        json.dumps(
            {
                "figure": "run",
                "conversations": len(convs),
                "questions": len(results),
                "wall_s": round(time.perf_counter() - start, 1),
                "jobs": args.jobs,
                "recall_ms_mean": round(mean(r.ms for r in results), 2),
                "vectors": args.vectors,
            }
        ),
        flush=True,
    )
    table(records)


if __name__ == "__main__":
    main()
