"""``tether compile-context`` over a home of many pages: what selection, the sensitivity
scan and packing cost beyond reading the pages.

For each size, a home of ``N`` world pages (a fifth under each durable prefix, the rest
under ``notes/``; updated over 90 days; bodies of about 1,500 characters of generated
prose, one page in fifty with an email address). Figures are medians of ``--runs``:

- ``compile_ms``: ``compile_view`` with ``--check`` semantics (everything but the write);
- ``read_ms`` (baseline, same run): reading the same pages from the store, the floor any
  compile pays.

    .venv/bin/python benchmarks/compile_context.py [--pages 1000 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tether.home import init_home
from tether.records import Page
from tether.stores.sqlite import SqliteStore
from tether.views.compile import compile_view

WORDS = [
    *("garden", "river", "lantern", "harbour", "meeting", "budget", "deploy", "review"),
    *("kitchen", "bicycle", "sister", "concert", "flight", "museum", "recipe", "invoice"),
    *("library", "season", "weekend", "project", "friend", "market"),
]
PREFIXES = ("people/", "concepts/", "companies/", "originals/", "notes/")
NOW = datetime(2026, 11, 29, tzinfo=UTC)


def _body(rnd: random.Random, n: int) -> str:
    words = [rnd.choice(WORDS) for _ in range(230)]
    if n % 50 == 0:
        words.insert(3, f"mail{n}@example.org")  # inside the excerpt: left out
    return "# Page\n\n" + " ".join(words) + ".\n"


def _fill(home: Path, pages: int, seed: int) -> None:
    rnd = random.Random(seed)
    store = SqliteStore(home / "tether.db")
    try:
        for n in range(pages):
            store.put_page(
                Page(
                    slug=f"{PREFIXES[n % len(PREFIXES)]}p{n:06d}",
                    title=f"Page {n}",
                    body=_body(rnd, n),
                    tags=("compile-context",) if n % 500 == 0 else (),
                    visibility="world",
                    untrusted=False,
                    updated_at=NOW - timedelta(minutes=rnd.randrange(90 * 24 * 60)),
                )
            )
    finally:
        store.close()


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    for size in args.pages:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "home"
            init_home(home)
            _fill(home, size, args.seed)
            compile_s: list[float] = []
            read_s: list[float] = []
            report = None
            for _ in range(args.runs):
                store = SqliteStore(home / "tether.db")
                try:
                    start = time.perf_counter()
                    store.pages()
                    read_s.append(time.perf_counter() - start)
                    start = time.perf_counter()
                    report = compile_view(
                        home,
                        store,
                        target="claude-code",
                        path=Path(tmp) / "view.md",
                        budget=3000,
                        check=True,
                    )
                    compile_s.append(time.perf_counter() - start)
                finally:
                    store.close()
            assert report is not None
            result = {
                "benchmark": "compile_context",
                "pages": size,
                "runs": args.runs,
                "compile_ms": _median_ms(compile_s),
                "read_ms": _median_ms(read_s),
                "ratio": round(statistics.median(compile_s) / statistics.median(read_s), 2),
                "in_view": len(report.pages),
                "left_out_sensitive": sum(1 for x in report.left_out if x.reason == "sensitive"),
                "left_out_budget": sum(1 for x in report.left_out if x.reason == "budget"),
                "tokens": report.tokens,
            }
            print(json.dumps(result))
            print(
                f"{size} pages: compile {result['compile_ms']} ms, read {result['read_ms']} ms "
                f"(x{result['ratio']}); {result['in_view']} in the view",
                file=sys.stderr,
            )


if __name__ == "__main__":
    main()
