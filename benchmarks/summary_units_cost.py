"""What summary units (``core.recall.summaries``) cost the indexer: a whole re-index of a home, and
the pass after one turn is appended to a long session (what the agent runs after a turn),
with units and, in the same run, without them (``indexer._units`` replaced by a function
making none: the baseline).

The home is a copy of one the long-horizon benchmark built (``--keep DIR``; its
``history-N``), so the figures are for ~1M tokens, ~350 sessions, ~1,800 turns.

    PYTHONPATH=src:. python benchmarks/summary_units_cost.py HOME [--rounds 5]

Output: one JSON line per (case, system).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Any

from tether.memory import indexer
from tether.records import Assistant, User
from tether.sessions import Session
from tether.stores.sqlite import SqliteStore


@contextmanager
def without_units() -> Iterator[None]:
    made = indexer._units

    def none(*_args: Any, **_kwargs: Any) -> tuple[list[Any], list[str]]:
        return [], []

    indexer._units = none
    try:
        yield
    finally:
        indexer._units = made


def _timed(run: Callable[[], object], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        run()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path, help="a home long_horizon.py built (--keep)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tether-units-") as tmp:
        home = Path(tmp) / "home"
        shutil.copytree(args.home, home)
        longest = max(
            (p.name for p in (home / "sessions").iterdir() if p.is_dir()),
            key=lambda sid: Session.open(home, sid).turns(),
        )
        session = Session.open(home, longest)
        with closing(SqliteStore(home / "tether.db")) as store:
            last = [r for _, rs in session.epoch_records() for r in rs][-1].time
            times: dict[tuple[str, str], list[float]] = {}

            def one_turn() -> None:
                nonlocal last
                last += timedelta(seconds=10)
                session.append(
                    User(time=last, text="one more question about the garden hose"),
                    Assistant(time=last + timedelta(seconds=1), text="Noted."),
                )
                indexer.index_home(home, store, only=[longest])

            # Rounds alternate the two systems, so a busy machine weighs on both alike.
            for _ in range(args.rounds):
                for system in ("units", "none"):
                    with nullcontext() if system == "units" else without_units():
                        times.setdefault(("reindex", system), []).extend(
                            _timed(lambda: indexer.reindex(home, store), 1)
                        )
                        times.setdefault(("turn_appended", system), []).extend(_timed(one_turn, 4))
            for (case, system), ms in times.items():
                print(
                    json.dumps(
                        {
                            "figure": "index_ms",
                            "case": case,
                            "system": system,
                            "median_ms": round(statistics.median(ms), 2),
                            "runs": len(ms),
                            "session_turns": session.turns(),
                            "rows": store.row_count(),
                        }
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    main()
