"""Fact extraction quality on LoCoMo's annotated observations: recall and precision of
the facts the harvest puts in the sweep store, for the extractive path alone, the bundled
model (embedded SmolLM2-135M, no server) alone, and both.

**Data.** ``../shared/bench-data/locomo/locomo8.json`` (8 conversations). Tuning half:
conv-26, conv-41, conv-42, conv-43 (every decision was taken there); reporting half:
conv-47, conv-48, conv-49, conv-50.

**Protocol.** Each LoCoMo session becomes one banked segment of a fresh home (one
``[time] USER (Speaker): text`` block a turn, through ``bank_redacted``, as a hook banks a
window): both speakers are people, so both speak as the owner (a shared chat, as
``User{speaker}`` records are). The segment's turn n is LoCoMo's ``D<s>:<n>``. The
segment is harvested by ``Harvester.harvest`` (lane ``ingest``) with ``[extract] mode``
set to the path measured; the facts are read back from the sweep store with the turn
range their refs cite.

**Matching** (``matches``): a fact matches an observation when
1. it cites one of the observation's evidence turns: its cited range (``first_turn`` ..
   ``last_turn`` of its refs) holds an evidence turn and spans at most ``MAX_SPAN`` turns
   (a fact citing a whole session cites nothing in particular), and
2. it shares at least ``MIN_SHARED`` content words with the observation: words of
   ``[a-z0-9]+`` (lower case, ``'s`` and apostrophes off), minus ``STOP`` words and the two
   speakers' first names, each cut to its stem by ``stem`` (plural, past, -ing, -ly).

**Figures.** recall = observations (of the sessions run) matched by at least one fact;
precision = facts matching at least one observation. One JSON line per (path, half).

    .venv/bin/python benchmarks/locomo_extraction.py --paths extractive --half both
    .venv/bin/python benchmarks/locomo_extraction.py --paths model,both --half report \
        --sessions 2        # the bundled model is slow: the first N sessions of each
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "bench-data" / "locomo"
TUNE = ("conv-26", "conv-41", "conv-42", "conv-43")
REPORT = ("conv-47", "conv-48", "conv-49", "conv-50")
MAX_SPAN = 3
MIN_SHARED = 2
STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "so",
        "to",
        "of",
        "in",
        "on",
        "at",
        "for",
        "from",
        "with",
        "by",
        "as",
        "into",
        "onto",
        "about",
        "over",
        "under",
        "after",
        "before",
        "than",
        "then",
        "that",
        "this",
        "these",
        "those",
        "there",
        "here",
        "it",
        "its",
        "i",
        "me",
        "my",
        "mine",
        "myself",
        "we",
        "us",
        "our",
        "ours",
        "you",
        "your",
        "yours",
        "he",
        "him",
        "his",
        "she",
        "her",
        "hers",
        "they",
        "them",
        "their",
        "theirs",
        "is",
        "am",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "have",
        "has",
        "had",
        "do",
        "does",
        "did",
        "done",
        "will",
        "would",
        "can",
        "could",
        "should",
        "may",
        "might",
        "must",
        "shall",
        "just",
        "really",
        "very",
        "also",
        "too",
        "still",
        "now",
        "some",
        "any",
        "all",
        "much",
        "many",
        "more",
        "most",
        "own",
        "one",
        "not",
        "no",
        "yes",
        "get",
        "got",
        "like",
        "thing",
        "things",
        "stuff",
        "lot",
        "lots",
        "going",
        "go",
        "went",
        "way",
        "well",
        "even",
        "owner",
        "others",
        "other",
        "who",
        "what",
        "which",
        "when",
        "where",
        "why",
        "how",
        "s",
        "t",
    ]
)
_EVIDENCE = re.compile(r"D(\d+):(\d+)")
_TOKEN = re.compile(r"[a-z0-9]+")


def stem(word: str) -> str:
    for suffix, repl in (
        ("ies", "y"),
        ("ied", "y"),
        ("ing", ""),
        ("ed", ""),
        ("es", ""),
        ("ly", ""),
        ("s", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: len(word) - len(suffix)] + repl
    return word


def content(text: str, names: frozenset[str]) -> frozenset[str]:
    low = text.lower().replace("'s", "").replace("\u2019s", "").replace("'", "")
    return frozenset(stem(w) for w in _TOKEN.findall(low) if w not in STOP and w not in names)


@dataclass(frozen=True)
class Observation:
    session: int
    text: str
    evidence: frozenset[int]  # turn numbers within the session
    words: frozenset[str]


@dataclass(frozen=True)
class FoundFact:
    session: int
    text: str
    first: int | None
    last: int | None
    words: frozenset[str]


def cites(fact: FoundFact, obs: Observation) -> bool:
    if fact.session != obs.session or fact.first is None or fact.last is None:
        return False
    if fact.last - fact.first + 1 > MAX_SPAN:
        return False
    return any(fact.first <= t <= fact.last for t in obs.evidence)


def matches(fact: FoundFact, obs: Observation) -> bool:
    return cites(fact, obs) and len(fact.words & obs.words) >= MIN_SHARED


@dataclass
class Score:
    observations: int = 0
    matched_observations: int = 0
    facts: int = 0
    matched_facts: int = 0
    seconds: float = 0.0
    model_calls: int = 0
    turns: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    def add(self, facts: Sequence[FoundFact], observations: Sequence[Observation]) -> None:
        self.observations += len(observations)
        self.facts += len(facts)
        self.matched_observations += sum(any(matches(f, o) for f in facts) for o in observations)
        self.matched_facts += sum(any(matches(f, o) for o in observations) for f in facts)


# -- the data ----------------------------------------------------------------------------


def conversations(ids: Iterable[str]) -> list[dict[str, object]]:
    wanted = set(ids)
    data = json.loads((DATA / "locomo8.json").read_text())
    return [c for c in data if c["sample_id"] in wanted]


def session_numbers(conv: dict[str, object]) -> list[int]:
    c = conv["conversation"]
    assert isinstance(c, dict)
    return sorted(
        int(k.split("_")[1]) for k, v in c.items() if re.fullmatch(r"session_\d+", k) and v
    )


def names_of(conv: dict[str, object]) -> frozenset[str]:
    c = conv["conversation"]
    assert isinstance(c, dict)
    return frozenset(str(c[k]).split()[0].lower() for k in ("speaker_a", "speaker_b"))


def observations(conv: dict[str, object], n: int) -> list[Observation]:
    obs = conv["observation"]
    assert isinstance(obs, dict)
    names = names_of(conv)
    out = []
    for items in obs.get(f"session_{n}_observation", {}).values():
        for text, evidence in items:
            turns = frozenset(
                int(t) for s, t in _EVIDENCE.findall(json.dumps(evidence)) if int(s) == n
            )
            out.append(Observation(n, text, turns, content(text, names)))
    return out


def segment_text(conv: dict[str, object], n: int) -> str:
    """The session as a banked window: one ``USER (Speaker)`` block a turn, so that the
    segment's turn k is LoCoMo's ``D<n>:<k>`` (checked by the caller)."""
    c = conv["conversation"]
    assert isinstance(c, dict)
    blocks = []
    for k, t in enumerate(c[f"session_{n}"], start=1):
        assert t["dia_id"] == f"D{n}:{k}", t["dia_id"]
        text = " ".join(str(t["text"]).split())
        blocks.append(f"[2023-05-08T13:56:{k % 60:02d}Z] USER ({t['speaker']}): {text}")
    return "\n\n".join(blocks) + "\n"


# -- one path ----------------------------------------------------------------------------


def config_text(path: str, extra: str, model_path: str = "") -> str:
    mode = {"extractive": "extractive", "model": "model", "both": "both"}[path]
    llm = '[llm]\nbackend = "embedded"\ntimeout_s = 900\n' if path != "extractive" else ""
    if llm and model_path:
        llm += f"model_path = {json.dumps(model_path)}\n"
    return f'{llm}[expect]\nn_ctx = 4096\n[extract]\nmode = "{mode}"\n{extra}'


class MemoLlm:
    """The bundled model once per distinct request: greedy decoding with a fixed seed
    makes the "both" path's calls the "model" path's, so they are answered from memory
    (``misses`` and ``model_s`` count only what the model really did)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.memo: dict[str, Any] = {}
        self.misses = 0
        self.model_s = 0.0
        self.prompt_n = 0
        self.predicted_n = 0

    async def complete(self, request: Any) -> Any:
        import msgspec

        key = msgspec.json.encode(request).decode()
        if key not in self.memo:
            start = time.perf_counter()
            got = await self.llm.complete(request)
            self.model_s += time.perf_counter() - start
            self.misses += 1
            self.prompt_n += got.prompt_n
            self.predicted_n += got.predicted_n
            self.memo[key] = got
        return self.memo[key]

    async def aclose(self) -> None:
        return None


async def run_conversation(
    conv: dict[str, object], sessions: int | None, toml: str, score: Score, llm: MemoLlm | None
) -> None:
    from tether.agent.metered import Meter, MeteredLlm
    from tether.checkpoint.bank import bank_redacted, redact_text
    from tether.checkpoint.harvest import Harvester
    from tether.config import load_config
    from tether.core.timing.scheduling import Priority
    from tether.extract.calls import CallLog
    from tether.extract.extractor import Extractor
    from tether.home import init_home
    from tether.stores import open_sweep_store
    from tether.sweep import owners

    names = names_of(conv)
    numbers = session_numbers(conv)[: sessions or None]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        init_home(home)
        (home / "tether.toml").write_text(toml)
        config = load_config(home)
        ex = config.extract
        sweep = open_sweep_store(home, config)
        owners.ensure_default(sweep, datetime.now(UTC))
        extractor = None
        if llm is not None and ex.resolved_mode(config.llm) != "extractive":
            # as harvest_now builds it, over the shared model (no ledger: nothing to cap)
            counted = MeteredLlm(
                llm,
                Meter(None, None, config.llm.max_tokens),
                "harvest",
                priority=Priority.TOOL_SUMMARY,
                calls=CallLog(home, "harvest", now=lambda: datetime.now(UTC)),
            )
            extractor = Extractor(
                counted,
                slot=config.slots.background,
                max_tokens=config.llm.max_tokens,
                form=ex.resolved_form(config.llm),
                on_malformed=counted.malformed,
            )
        harvester = Harvester(
            home,
            extractor,
            sweep,
            page_exists=lambda _: False,
            writeback=lambda: None,
            now=lambda: datetime.now(UTC),
            mode=ex.resolved_mode(config.llm),
            chunk_chars=ex.resolved_chunk_chars(config.llm),
        )
        sid = str(conv["sample_id"])
        for n in numbers:
            session = f"{sid}-s{n}"
            red = redact_text(segment_text(conv, n))
            report = bank_redacted(
                home, session, red, what="locomo", time=datetime.now(UTC), source="bench"
            )
            assert report.path is not None
            start = time.perf_counter()
            out = await harvester.harvest(report.path.name, lane="ingest")
            score.seconds += time.perf_counter() - start
            score.outcomes[out.outcome] = score.outcomes.get(out.outcome, 0) + 1
            score.model_calls += out.model_calls + out.model_failed
            c = conv["conversation"]
            assert isinstance(c, dict)
            score.turns += len(c[f"session_{n}"])
        sweep.close()
        sweep = open_sweep_store(home, config)
        try:
            with sweep.transaction() as tx:
                rows = tx.facts("owner")
        finally:
            sweep.close()
        by_session: dict[int, list[FoundFact]] = {n: [] for n in numbers}
        for row in rows:
            if not row.active:
                continue
            for ref in json.loads(row.refs):
                n = int(str(ref["session"]).rsplit("-s", 1)[1])
                by_session[n].append(
                    FoundFact(
                        n,
                        row.text,
                        ref.get("first_turn"),
                        ref.get("last_turn"),
                        content(row.text, names),
                    )
                )
        for n in numbers:
            score.add(by_session[n], observations(conv, n))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--paths", default="extractive", help="extractive,model,both")
    parser.add_argument("--half", choices=("tune", "report", "both"), default="both")
    parser.add_argument("--sessions", type=int, default=0, help="first N sessions (0: all)")
    parser.add_argument("--extra", default="", help="more [extract] lines of tether.toml")
    parser.add_argument("--model-path", default="", help="a GGUF instead of the bundled model")
    args = parser.parse_args(argv)
    asyncio.run(run(args))


async def run(args: argparse.Namespace) -> None:
    halves = {"tune": [TUNE], "report": [REPORT], "both": [TUNE, REPORT]}[args.half]
    paths = args.paths.split(",")
    llm: MemoLlm | None = None
    if any(p != "extractive" for p in paths):
        from tether.llm.embedded import EmbeddedLlm, resolve_model_path

        embedded = EmbeddedLlm(resolve_model_path(args.model_path), n_ctx=4096, timeout_s=900)
        llm = MemoLlm(embedded)
    try:
        for half in halves:
            for path in paths:
                await one(args, half, path, llm)
    finally:
        if llm is not None:
            await llm.llm.aclose()


async def one(
    args: argparse.Namespace, half: tuple[str, ...], path: str, llm: MemoLlm | None
) -> None:
    score = Score()
    before = (
        (0, 0.0, 0, 0) if llm is None else (llm.misses, llm.model_s, llm.prompt_n, llm.predicted_n)
    )
    for conv in conversations(half):
        toml = config_text(path, args.extra, args.model_path)
        await run_conversation(conv, args.sessions, toml, score, llm)
    line: dict[str, Any] = {
        "figure": "locomo_extraction",
        "path": path,
        "half": "tune" if half == TUNE else "report",
        "sessions": "all" if not args.sessions else f"first {args.sessions}",
        "model": args.model_path or ("bundled" if path != "extractive" else None),
        "recall": round(score.matched_observations / max(1, score.observations), 3),
        "precision": round(score.matched_facts / max(1, score.facts), 3),
        "observations": score.observations,
        "facts": score.facts,
        "turns": score.turns,
        "model_calls": score.model_calls,
        "outcomes": score.outcomes,
    }
    if llm is not None and path != "extractive":
        calls = llm.misses - before[0]
        model_s = llm.model_s - before[1]
        line.update(
            model_calls_made=calls,  # 0 when every call was answered from the memo
            model_s=round(model_s, 1),
            s_per_call=round(model_s / calls, 1) if calls else None,
            prompt_n=llm.prompt_n - before[2],
            predicted_n=llm.predicted_n - before[3],
            predicted_per_s=round((llm.predicted_n - before[3]) / model_s, 2) if calls else None,
        )
    else:
        line.update(seconds=round(score.seconds, 1))
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
