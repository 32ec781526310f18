"""How long a ``tether`` command takes to start and answer, as a script or a hook runs it.

Each figure is the median wall time of ``--runs`` child processes, run in turns so that
machine noise falls on all alike:

- ``python``: the interpreter alone (``python -c pass``), the floor;
- ``lazy``: the command as ``tether`` runs it (command modules imported on use);
- ``eager``: the same command after importing every command module first, which is what
  ``tether`` did before (the baseline).

Commands: ``--version``, ``--help``, and on a small home (init plus one imported session,
already indexed) ``memory recall`` and ``session show`` (which opens a session's files).

``--against PYTHON`` also runs each command with another checkout's interpreter (say, a
worktree of the commit before a change, with its own venv), in the same turns, and prints
``before_ms`` beside each figure: a before/after measured in one run.

    .venv/bin/python benchmarks/cli_startup.py [--runs 15] [--against ../before/.venv/bin/python]
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


def _timed(code: str, python: str = sys.executable) -> float:
    start = time.perf_counter()
    subprocess.run([python, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--against", help="another checkout's python, measured in the same turns")
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
            "help": ["--help"],
            "memory_recall": ["--home", str(home), "memory", "recall", "which tea?"],
            "session_show": ["--home", str(home), "session", "show", "tea"],
        }
        times: dict[str, list[float]] = {"python": []}
        for name in commands:
            times[f"{name}_lazy"] = []
            times[f"{name}_eager"] = []
            times[f"{name}_before"] = []
        for _ in range(args.runs):
            times["python"].append(_timed("pass"))
            for name, argv in commands.items():
                run = _RUN.format(argv=argv)
                times[f"{name}_lazy"].append(_timed(run))
                times[f"{name}_eager"].append(_timed(_EAGER.format(modules=modules) + run))
                if args.against:
                    times[f"{name}_before"].append(_timed(run, args.against))
    python_ms = statistics.median(times["python"]) * 1000
    for name in commands:
        lazy = statistics.median(times[f"{name}_lazy"]) * 1000
        eager = statistics.median(times[f"{name}_eager"]) * 1000
        before = times[f"{name}_before"]
        against = {}
        if before:
            before_ms = statistics.median(before) * 1000
            against = {"before_ms": round(before_ms, 1), "before_ratio": round(lazy / before_ms, 3)}
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
                    **against,
                }
            )
        )


if __name__ == "__main__":
    main()
