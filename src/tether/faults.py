"""Named fault points: where crash and race tests stop a real process.

Production code calls ``crash_point("name")`` at the places a crash matters (between two
appends, between an append and a file write) and ``pause_point("name")`` where a race
matters (between a claim and the canonical write). Both are one environment lookup unless
a test asked for that point; this module imports nothing of tether, so a fault point costs
no start-up and never pulls the test helpers (``tether.testing``) into production.

- ``TETHER_CRASH_AT=<name>``: the process kills itself with SIGKILL at that point: no
  cleanup, no flush, exactly like a power cut at that line.
- ``TETHER_PAUSE_AT=<name>`` with ``TETHER_PAUSE_DIR=<folder>``: the process creates
  ``<folder>/<name>.reached`` and waits until the test creates ``<folder>/<name>.go`` (at
  most ``TETHER_PAUSE_S`` seconds, default 60), then carries on. The test side is
  ``tether.testing.pause``.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

CRASH_ENV = "TETHER_CRASH_AT"
PAUSE_ENV = "TETHER_PAUSE_AT"
PAUSE_DIR_ENV = "TETHER_PAUSE_DIR"
PAUSE_S_ENV = "TETHER_PAUSE_S"


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def pause_point(name: str) -> None:
    if os.environ.get(PAUSE_ENV) != name or not os.environ.get(PAUSE_DIR_ENV):
        return
    folder = Path(os.environ[PAUSE_DIR_ENV])
    (folder / f"{name}.reached").touch()
    deadline = time.monotonic() + float(os.environ.get(PAUSE_S_ENV, "60"))
    go = folder / f"{name}.go"
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
