"""What any job is handed: where the time comes from, and where it says how far it got."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class Progress(Protocol):
    """Where a long job (an import, a reindex, a memory scan) says how far it got: the CLI
    draws a bar on a terminal and says nothing when piped. A job calls ``stage`` when it
    starts a part (``total`` None: not known ahead), then ``advance`` as items are done."""

    def stage(self, what: str, total: int | None = None) -> None: ...

    def advance(self, count: int = 1) -> None: ...


class Clock(Protocol):
    """Where the daemon gets the time; tests pass a fixed or stepping clock."""

    def now(self) -> datetime: ...
