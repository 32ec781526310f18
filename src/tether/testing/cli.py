"""``python -m tether.testing.cli ARGS``: ``tether ARGS`` as a test's (or a benchmark's)
child process runs it, at the time ``TETHER_TEST_NOW`` names (an RFC 3339 time with a
zone: "the next day" for a crash test) instead of the wall clock; without it, exactly
``tether ARGS``.

The clock goes in through ``tether.cli.main.main(clock=)`` to the command's application
(``daemon.app.App``), so every time the command reads is that one. The installed ``tether``
reads no such variable: a test clock never reaches production by the environment.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime

from tether.cli.main import main as tether_main
from tether.testing.clock import StoppedClock

#: The variable a test sets for its child: the time the command runs at.
NOW_ENV = "TETHER_TEST_NOW"


def clock_from(value: str | None) -> StoppedClock | None:
    """The clock ``TETHER_TEST_NOW`` names, None when it is unset or empty; a value that is
    no RFC 3339 time with a zone is a test's mistake: one line, exit 2."""
    if not value:
        return None
    try:
        time = datetime.fromisoformat(value)
    except ValueError:
        time = None
    if time is None or time.tzinfo is None:
        sys.stderr.write(
            f"tether: error: {NOW_ENV}={value!r} is not an RFC 3339 time with a zone\n"
        )
        sys.exit(2)
    return StoppedClock(time.astimezone(UTC))


def main(argv: list[str] | None = None) -> None:
    tether_main(argv, clock=clock_from(os.environ.get(NOW_ENV)))


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
