"""``<home>/telemetry/heartbeat.jsonl``: one line per hook run and per harvest outcome.

Counts and reason codes only, never content: a line holds the time, the event
(``pre-compact``, ``session-start``, ``session-end``, ``harvest``, ``maintenance``), the
harness, the codes (``segment``, ``flush``, ``mode``, ``backstop``, ``outcome``), counters
(bytes, redactions, inserted, duplicate, links, ms) and, for a hard failure, ``error``: the
exception's class name. Session ids are kept (they name files in ``corpus/``), words never.

A line is appended with one ``write`` on an ``O_APPEND`` descriptor (a line is far below
``PIPE_BUF``): concurrent hooks and the daemon never interleave, and no lock is taken on
the hook's path. ``tether doctor`` reads the tail (``hard_error_rate``): typed degrades
(a skip, a deadline, an absent daemon) are not errors; only ``error`` lines are.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

TELEMETRY_FILE = "telemetry/heartbeat.jsonl"
#: Values a line may hold: codes, names and counts.
Value = str | int | float | bool | None


def heartbeat_path(home: Path) -> Path:
    return home / TELEMETRY_FILE


def append_line(home: Path, time: datetime, event: str, **fields: Value) -> None:
    """Append one line; a failure to write telemetry never fails the caller."""
    doc: dict[str, Value] = {"time": time.isoformat().replace("+00:00", "Z"), "event": event}
    doc.update((k, v) for k, v in fields.items() if v is not None)
    line = json.dumps(doc, separators=(",", ":")).encode() + b"\n"
    path = heartbeat_path(home)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError:
        return


def read_tail(home: Path, max_bytes: int = 1 << 20) -> list[dict[str, Value]]:
    """The newest lines (within ``max_bytes``), oldest first; unreadable lines skipped."""
    path = heartbeat_path(home)
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except OSError:
        return []
    lines = data.split(b"\n")
    if size > max_bytes:
        lines = lines[1:]  # the first is cut
    out = []
    for raw in lines:
        try:
            doc = json.loads(raw)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


@dataclass(frozen=True)
class ErrorRate:
    runs: int
    errors: int
    #: The error names seen, most frequent first.
    names: tuple[str, ...] = ()

    @property
    def rate(self) -> float:
        return self.errors / self.runs if self.runs else 0.0


def hard_error_rate(home: Path, now: datetime, window: timedelta) -> ErrorRate:
    """Hook runs and harvest outcomes of the last ``window``, and how many were hard
    errors (an ``error`` field); typed degrades do not count."""
    runs = errors = 0
    names: dict[str, int] = {}
    for doc in read_tail(home):
        stamp = doc.get("time")
        try:
            when = datetime.fromisoformat(str(stamp))
        except ValueError:
            continue
        if when.tzinfo is None or now - when > window:
            continue
        runs += 1
        if doc.get("error"):
            errors += 1
            names[str(doc["error"])] = names.get(str(doc["error"]), 0) + 1
    ranked = tuple(sorted(names, key=lambda name: (-names[name], name)))
    return ErrorRate(runs, errors, ranked)
