"""What ``tether memory recall`` pays for its index pass on an up-to-date home of many
sessions, and that the pass costs what changed.

Every recall first brings the index up to date (``memory.indexer.index_home``). The pass
loads every cursor in one query and stats each log: a log whose size, mtime and inode
are its cursor's is not opened. The baseline, measured in the same run on the same home,
is a pass that reads instead of stats: every log opened, read whole, split into lines and
decoded (``files.decode_lenient``, what the indexer decodes a log with; nothing written),
which is the least a pass that does not trust the stat pays.

The home: ``--sessions`` sessions holding ``--turns`` turns between them, imported
(``imports.jsonl``) from the pseudo-English of ``recall_latency.py``, lexical recall
(vectors are not what is measured). Figures, median of ``--repeat``:

- ``index_pass_ms``: the pass alone, nothing new (``stat``), against the baseline;
- ``recall_in_process_ms``: ``tether memory recall QUERY --json`` in this process
  (click's runner), the command as it is (``stat``) and with the baseline's read before
  it (``baseline_read_every_log``): what the command cost if its pass read the logs
  (both figures in turns, so they see the same moments of a shared machine);
- ``one_append``: a turn appended to one session, then the pass (it reads that log);
- ``one_rewritten``: one session's log replaced by a copy (another inode), then the pass
  (it drops the session's rows and indexes it whole).

    nice -n 10 .venv/bin/python benchmarks/recall_pass.py [--sessions 1000]
        [--turns 200000] [--repeat 5] [--keep DIR]

``--keep DIR`` builds the home there once and reuses it on the next run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner

from benchmarks.recall_latency import T0, Corpus, write_import
from tether import files
from tether.cli.main import cli
from tether.config import Config
from tether.home import init_home
from tether.imports.jsonl import import_jsonl
from tether.memory.indexer import index_home
from tether.records import Assistant, User
from tether.sessions import Session
from tether.stores.sqlite import SqliteStore

QUESTION = "what did we say about the garden budget"


def build(home: Path, sessions: int, turns: int) -> float:
    """The home, imported and indexed; seconds it took."""
    start = time.perf_counter()
    init_home(home)
    with (home / "tether.toml").open("a") as f:
        f.write("\n[recall]\nvectors = false\n")
    src = home.parent / "import.jsonl"
    write_import(src, Corpus(7), turns, max(1, turns // sessions))
    store = SqliteStore(home / "tether.db")
    try:
        import_jsonl(home, src, now=T0, config=Config(), store=lambda: nullcontext(store))
    finally:
        store.close()
    src.unlink()
    return time.perf_counter() - start


def logs(home: Path) -> list[str]:
    root = home / "sessions"
    return sorted(
        f"{root}/{d.name}/{e.name}"
        for d in os.scandir(root)
        if d.is_dir()
        for e in os.scandir(d.path)
        if e.name.endswith(".jsonl")
    )


def read_every_log(paths: list[str]) -> tuple[int, int]:
    """The baseline: every log read whole and decoded; the records and turns read."""
    n = turns = 0
    for path in paths:
        with open(path, "rb") as f:
            lines, _ = files.split_complete(f.read())
        records, _ = files.decode_lenient(lines)
        n += len(records)
        turns += sum(isinstance(r, User) for r in records)
    return n, turns


def median_ms(run: Callable[[], object], repeat: int, before: Callable[[], None]) -> float:
    times = []
    for _ in range(repeat):
        before()
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 2)


def paired(
    ours: Callable[[], object], baseline: Callable[[], object], repeat: int
) -> dict[str, float]:
    """Medians of ``ours`` and ``baseline`` run in turns, so both see the same moments
    of a shared machine."""
    times: dict[str, list[float]] = {"stat": [], "baseline_read_every_log": []}
    for _ in range(repeat):
        for name, run in (("stat", ours), ("baseline_read_every_log", baseline)):
            start = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - start) * 1000)
    return {name: round(statistics.median(t), 2) for name, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", type=Path, default=None, help="build the home here, reuse it")
    args = ap.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="recall-pass-")
        if args.keep is None
        else nullcontext(str(args.keep))
    ) as tmp:
        home = Path(tmp) / "home"
        built_s = None
        if not (home / "tether.db").exists():
            Path(tmp).mkdir(parents=True, exist_ok=True)
            built_s = round(build(home, args.sessions, args.turns), 1)
        paths = logs(home)
        store = SqliteStore(home / "tether.db")
        try:
            index_home(home, store)  # the states learnt once (a home kept from before)
            report = index_home(home, store)
            assert report.files == 0, report
            records, turns = read_every_log(paths)
            index_ms = paired(
                lambda: index_home(home, store), lambda: read_every_log(paths), args.repeat
            )
        finally:
            store.close()

        runner = CliRunner()
        words = ["--home", str(home), "memory", "recall", QUESTION, "-k", "5", "--json"]

        def recall() -> None:
            done = runner.invoke(cli, words)
            assert done.exit_code == 0, done.output

        def read_then_recall() -> None:
            read_every_log(paths)
            recall()

        recall()  # imports and caches warmed alike for both
        recall_ms = paired(recall, read_then_recall, args.repeat)

        sids = sorted(os.listdir(home / "sessions"))
        store = SqliteStore(home / "tether.db")
        try:
            appended = iter(range(args.repeat))

            def append_one() -> None:
                i = next(appended)
                when = T0 + timedelta(days=3650, seconds=i)
                Session.open(home, sids[i]).append(
                    User(time=when, text=f"a new turn number {i}"),
                    Assistant(time=when, text="noted"),
                )

            one_append = median_ms(lambda: index_home(home, store), args.repeat, append_one)
            replaced = iter(range(args.repeat))

            def replace_one() -> None:
                log = home / "sessions" / sids[-1 - next(replaced)] / "0.jsonl"
                shutil.copyfile(log, log.with_suffix(".copy"))
                os.replace(log.with_suffix(".copy"), log)

            one_rewritten = median_ms(lambda: index_home(home, store), args.repeat, replace_one)
            after = index_home(home, store)
        finally:
            store.close()
        print(
            json.dumps(
                {
                    "benchmark": "recall_pass",
                    "sessions": len(sids),
                    "logs": len(paths),
                    "turns": turns,
                    "records": records,
                    "log_mb": round(sum(os.path.getsize(p) for p in paths) / 2**20, 1),
                    "repeat": args.repeat,
                    "build_s": built_s,
                    "cpus": os.cpu_count(),
                    "load": [round(x, 2) for x in os.getloadavg()],
                    "index_pass_ms": index_ms,
                    "recall_in_process_ms": recall_ms,
                    "one_append_pass_ms": one_append,
                    "one_rewritten_pass_ms": one_rewritten,
                    "after_files_read": after.files,
                }
            )
        )


if __name__ == "__main__":
    main()
