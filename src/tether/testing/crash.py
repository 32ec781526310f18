"""Named crash points, for crash tests that kill a real child process at a known place.

Production code calls ``crash_point("name")`` at the places a crash matters (between two
appends, between an append and a file write). When the environment variable
``TETHER_CRASH_AT`` names that point, the process kills itself with SIGKILL: no cleanup, no
flush, exactly like a power cut at that line. Otherwise the call is one dict lookup.
"""

from __future__ import annotations

import os
import signal

ENV = "TETHER_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
