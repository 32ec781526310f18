"""The commands' clock: the wall clock, or ``TETHER_TEST_NOW`` (an RFC 3339 time with a
zone), which crash tests use for "the next day"; it is not a user setting. Read by the
sweep's and owner's commands, ``tether init`` (the home's owner) and ``session discard``."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from tether.errors import BadInputError

TEST_NOW_ENV = "TETHER_TEST_NOW"


def now() -> datetime:
    """The wall clock, or ``TETHER_TEST_NOW`` (tests only)."""
    fixed = os.environ.get(TEST_NOW_ENV)
    if not fixed:
        return datetime.now(UTC)
    try:
        value = datetime.fromisoformat(fixed)
    except ValueError:
        raise BadInputError(f"{TEST_NOW_ENV}={fixed!r} is not an RFC 3339 time") from None
    if value.tzinfo is None:
        raise BadInputError(f"{TEST_NOW_ENV}={fixed!r} has no zone")
    return value.astimezone(UTC)
