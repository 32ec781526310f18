"""Named pause points, for tests that interleave two real processes deterministically.

Production code calls ``pause_point("name")`` where a race matters (between a claim and
the canonical write, before a receipt completes). When ``TETHER_PAUSE_AT`` names that
point and ``TETHER_PAUSE_DIR`` names a folder, the process creates ``<dir>/<name>.reached``
and waits until the test creates ``<dir>/<name>.go`` (at most ``TETHER_PAUSE_S`` seconds,
default 60), then carries on. Otherwise the call is one dict lookup.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "TETHER_PAUSE_AT"
DIR_ENV = "TETHER_PAUSE_DIR"


def pause_point(name: str) -> None:
    if os.environ.get(ENV) != name or not os.environ.get(DIR_ENV):
        return
    folder = Path(os.environ[DIR_ENV])
    (folder / f"{name}.reached").touch()
    deadline = time.monotonic() + float(os.environ.get("TETHER_PAUSE_S", "60"))
    go = folder / f"{name}.go"
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def wait_reached(folder: Path, name: str, timeout: float = 30.0) -> bool:
    """For the test side: wait until a paused process has reached ``name``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (folder / f"{name}.reached").exists():
            return True
        time.sleep(0.01)
    return False


def release(folder: Path, name: str) -> None:
    (folder / f"{name}.go").touch()
