"""Clocks for tests: time is passed in, never read from the wall."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class StepClock:
    """Starts at ``start`` and moves ``step`` forward on every read."""

    def __init__(
        self, start: datetime | None = None, step: timedelta = timedelta(seconds=1)
    ) -> None:
        self.current = start or datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
        self.step = step

    def now(self) -> datetime:
        self.current += self.step
        return self.current

    def advance(self, delta: timedelta) -> None:
        self.current += delta


class StoppedClock:
    """Always ``time``: a child process that runs at one moment (``tether.testing.cli``)."""

    def __init__(self, time: datetime) -> None:
        self.time = time

    def now(self) -> datetime:
        return self.time
