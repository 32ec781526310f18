"""The test side of named pause points (``tether.faults.pause_point``): wait until a
paused child process has reached a point, then let it go on."""

from __future__ import annotations

import time
from pathlib import Path


def wait_reached(folder: Path, name: str, timeout: float = 30.0) -> bool:
    """Wait until a paused process has reached ``name``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (folder / f"{name}.reached").exists():
            return True
        time.sleep(0.01)
    return False


def release(folder: Path, name: str) -> None:
    (folder / f"{name}.go").touch()
