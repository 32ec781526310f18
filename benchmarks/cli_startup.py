"""How long a ``tether`` command takes to start and answer, as a script or a hook runs it.

Each figure is the median wall time of ``--runs`` child processes, run in turns so that
machine noise falls on all alike:

- ``python``: the interpreter alone (``python -c pass``), the floor;
- ``lazy``: the command as ``tether`` runs it (command modules imported on use);
- ``eager``: the same command after importing every command module first, which is what
  ``tether`` did before (the baseline).

Commands: ``--version``, and ``memory recall`` on a small home (init plus one imported
session, already indexed).

    .venv/bin/python benchmarks/cli_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tether.cli.main import COMMANDS, MEMORY_COMMANDS

_EAGER = "import importlib\nfor m in {modules!r}:\n    importlib.import_module('tether.cli.' + m)\n"
_RUN = "from tether.cli.main import main\nmain({argv!r})\n"


def _timed(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    modules = sorted({*COMMANDS.values(), *MEMORY_COMMANDS.values()})
    with tempfile.TemporaryDirectory(prefix="tether-startup-") as tmp:
        home = Path(tmp) / "home"
        src = Path(tmp) / "one.jsonl"
        line = {
            "session": "tea",
            "role": "user",
            "text": "I like oolong tea",
            "time": "2026-01-01T09:00:00Z",
        }
        src.write_text(json.dumps(line) + "\n")
        subprocess.run(
            [sys.executable, "-m", "tether.cli.main", "--home", str(home), "init"],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "tether.cli.main",
                "--home",
                str(home),
                "sessions",
                "import",
                str(src),
            ],
            check=True,
            capture_output=True,
        )
        commands = {
            "version": ["--version"],
            "memory_recall": ["--home", str(home), "memory", "recall", "which tea?"],
        }
        times: dict[str, list[float]] = {"python": []}
        for name in commands:
            times[f"{name}_lazy"] = []
            times[f"{name}_eager"] = []
        for _ in range(args.runs):
            times["python"].append(_timed("pass"))
            for name, argv in commands.items():
                run = _RUN.format(argv=argv)
                times[f"{name}_lazy"].append(_timed(run))
                times[f"{name}_eager"].append(_timed(_EAGER.format(modules=modules) + run))
    python_ms = statistics.median(times["python"]) * 1000
    for name in commands:
        lazy = statistics.median(times[f"{name}_lazy"]) * 1000
        eager = statistics.median(times[f"{name}_eager"]) * 1000
        print(
            json.dumps(
                {
                    "figure": f"cli_{name}_ms",
                    "value": round(lazy, 1),
                    "baseline": "every command module imported first (tether before lazy loading)",
                    "baseline_value": round(eager, 1),
                    "ratio": round(lazy / eager, 3),
                    "python_ms": round(python_ms, 1),
                    "runs": args.runs,
                }
            )
        )


if __name__ == "__main__":
    main()
