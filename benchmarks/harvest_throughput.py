"""Harvest throughput with the fake model: segments a second through the whole harvest
(gates, claim, chunks, extraction over real HTTP, dedup into the sweep store, link reads,
receipt, manifest), beside the bare extractor calls on the same chunks (the baseline: what
the model round trips alone cost) in the same run.

Each segment is a banked window of ``--kib`` KiB (rendered turns) whose every chunk the
fake answers with a page of two facts, one new and one already known. One JSON line per
figure:

    .venv/bin/python benchmarks/harvest_throughput.py [--segments 20] [--kib 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from tether.checkpoint.bank import bank_redacted, redact_text
from tether.checkpoint.harvest import Harvester, chunks, segment_turns
from tether.config import load_config
from tether.core.learning.extraction import render_turns
from tether.extract.extractor import Extractor
from tether.home import init_home
from tether.llm.llama_server import LlamaServerClient
from tether.records import ExtractionRequest
from tether.stores import open_sweep_store
from tether.sweep import owners
from tether.testing.fake_llama import FakeLlama, Reply


def _reply(session: str, i: int) -> Reply:
    memories = [
        {"text": f"fact {i}", "subject": "bench", "entity": f"e{i}", "sessions": [session]},
        {"text": "the shared fact", "subject": "bench", "entity": "shared", "sessions": [session]},
    ]
    return Reply(content=json.dumps({"memories": memories}))


async def run(segments: int, kib: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, FakeLlama(n_ctx=1 << 20, parallel=2) as fake:
        home = Path(tmp) / "home"
        init_home(home)
        (home / "tether.toml").write_text(f'[llm]\nurl = "{fake.url}"\n')
        now = datetime.now(UTC)
        names = []
        line = "a turn of the session with a decision and some words; " * 4
        for s in range(segments):
            session = f"cc-bench-{s}"
            blocks: list[str] = []
            size = 0
            while size < kib * 1024:
                block = f"[2026-11-01T10:00:00Z] USER: {s} {len(blocks)} {line}"
                blocks.append(block)
                size += len(block) + 2
            red = redact_text("\n\n".join(blocks) + "\n")
            report = bank_redacted(home, session, red, what="bench", time=now, source="bench")
            assert report.path is not None
            names.append((session, report.path.name))
        llm = LlamaServerClient(fake.url, timeout_s=30)
        sweep = open_sweep_store(home, load_config(home))
        owners.ensure_default(sweep, now)
        extractor = Extractor(llm, slot=1)
        harvester = Harvester(
            home,
            extractor,
            sweep,
            page_exists=lambda _: False,
            writeback=lambda: None,
            now=lambda: datetime.now(UTC),
        )
        calls = 0
        # the baseline: the extractor alone on the same chunks
        start = time.perf_counter()
        for session, name in names:
            text = (home / "corpus" / name).read_text()
            for i, run_ in enumerate(chunks(segment_turns(session, text))):
                fake.script(_reply(session, i))
                request = ExtractionRequest(
                    instructions="x", source=render_turns(run_), sessions=(session,)
                )
                await extractor.extract(request)
                calls += 1
        bare = time.perf_counter() - start
        fake.reset()
        start = time.perf_counter()
        inserted = 0
        for session, name in names:
            text = (home / "corpus" / name).read_text()
            for i in range(len(chunks(segment_turns(session, text)))):
                fake.script(_reply(session, i))
            out = await harvester.harvest(name, lane="harvest")
            inserted += out.inserted
        full = time.perf_counter() - start
        await llm.aclose()
        sweep.close()
    return {
        "segments": segments,
        "chunks": calls,
        "inserted": inserted,
        "bare_s": bare,
        "harvest_s": full,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--segments", type=int, default=20)
    parser.add_argument("--kib", type=int, default=64)
    args = parser.parse_args()
    r = asyncio.run(run(args.segments, args.kib))
    print(
        json.dumps(
            {
                "figure": "extractor_calls_only",
                "segments_per_s": round(r["segments"] / r["bare_s"], 1),
                "chunks": r["chunks"],
            }
        )
    )
    print(
        json.dumps(
            {
                "figure": "harvest_throughput",
                "segments_per_s": round(r["segments"] / r["harvest_s"], 1),
                "baseline_segments_per_s": round(r["segments"] / r["bare_s"], 1),
                "overhead_ratio": round(r["harvest_s"] / r["bare_s"], 2),
                "facts_inserted": r["inserted"],
                "segment_kib": args.kib,
            }
        )
    )


if __name__ == "__main__":
    main()
