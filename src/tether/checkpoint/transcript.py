"""A harness transcript as the checkpoint hooks read it: by byte offset, never whole.

A transcript only grows (the harness appends), so a byte offset names a line for good.
``TranscriptFile`` maps the file and finds compaction boundaries from its end with a
plain byte search for the harness's marker (``compact_boundary``; Codex's ``compacted``),
each hit confirmed by parsing its line (a tool's output that merely mentions the word is
no boundary); then it parses only the lines of the windows asked for. A 49 MB transcript
is mostly tool output: finding its last boundary costs a search, reading its last window
a parse of that window alone (the parse runs at hundreds of MB/s; the secret scan of
what is banked is the slower step).

Every turn gets an id: the harness's record id (Claude Code's ``uuid``), else
``@<byte offset of its line>`` (Codex has none), so banked ranges can be keyed by ids.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType

from tether.core.checkpoints.window import BoundaryMark, Entry, Turn, Window, split_windows
from tether.harnesses import claude_code, codex

READERS: dict[str, Callable[[bytes], Entry | str]] = {
    "claude-code": claude_code.window_entry,
    "codex": codex.window_entry,
}
MARKERS: dict[str, bytes] = {"claude-code": b"compact_boundary", "codex": b"compacted"}


@dataclass(frozen=True)
class Line:
    """A boundary line: ``start`` its first byte, ``end`` just past its newline."""

    start: int
    end: int


@dataclass(frozen=True)
class WindowRead:
    """A window and where it lies: ``start`` the byte after the boundary before it (or 0),
    ``end`` the first byte of the boundary after it (or the end of the read)."""

    window: Window
    start: int
    end: int


class TranscriptFile:
    """One transcript, mapped read-only at its size when opened."""

    def __init__(self, path: Path, harness: str) -> None:
        self.read_line = READERS[harness]
        self.marker = MARKERS[harness]
        self._handle = path.open("rb")
        self.size = self._handle.seek(0, 2)
        self._map: mmap.mmap | None = None
        if self.size:
            self._map = mmap.mmap(self._handle.fileno(), 0, access=mmap.ACCESS_READ)

    def __enter__(self) -> TranscriptFile:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
        self._handle.close()

    def boundaries_back(self, before: int | None = None) -> Iterator[Line]:
        """Every boundary line ending at or before ``before`` (default: the end), newest
        first; a line still being written (no newline yet) is none."""
        m = self._map
        if m is None:
            return
        end = self.size if before is None else before
        while True:
            hit = m.rfind(self.marker, 0, end)
            if hit < 0:
                return
            start = m.rfind(b"\n", 0, hit) + 1
            stop = m.find(b"\n", hit)
            if stop < 0 or stop + 1 > end:
                end = start
                continue
            if isinstance(self.read_line(m[start:stop]), BoundaryMark):
                yield Line(start, stop + 1)
            end = start

    def entries(self, start: int, end: int) -> list[Entry]:
        """The turns and boundaries of the whole lines in ``[start, end)`` (a last line
        without its newline is torn: left out)."""
        m = self._map
        out: list[Entry] = []
        if m is None:
            return out
        read = self.read_line
        pos = start
        while pos < end:
            stop = m.find(b"\n", pos, end)
            if stop < 0:
                break
            entry = read(m[pos:stop])
            if isinstance(entry, Turn) and not entry.uid:
                entry = replace(entry, uid=f"@{pos}")
            if not isinstance(entry, str):
                out.append(entry)
            pos = stop + 1
        return out

    def windows(self, start: int, end: int | None = None) -> list[Window]:
        """The windows of ``[start, end)``; ``start`` must be 0 or just past a boundary."""
        stop = self.size if end is None else end
        return split_windows(self.entries(start, stop), from_start=True)

    def window_at(self, start: int) -> WindowRead:
        """The window that begins at byte ``start``: up to the next boundary, or the end."""
        m = self._map
        end = self.size
        if m is not None:
            pos = start
            while True:
                hit = m.find(self.marker, pos, end)
                if hit < 0:
                    break
                a = m.rfind(b"\n", 0, hit) + 1
                b = m.find(b"\n", hit)
                if b < 0:
                    break
                if a >= start and isinstance(self.read_line(m[a:b]), BoundaryMark):
                    end = a
                    break
                pos = b + 1
        turns = tuple(e for e in self.entries(start, end) if isinstance(e, Turn))
        return WindowRead(Window(0, turns, end < self.size, True), start, end)

    def last_window(self) -> WindowRead:
        """What PreCompact banks: the window after the last boundary, or, when that one
        has no turn yet (the harness wrote its boundary first), the one it closed."""
        back = self.boundaries_back()
        last = next(back, None)
        read = self.window_at(last.end if last is not None else 0)
        if read.window.turns or last is None:
            return read
        before = next(back, None)
        return self.window_at(before.end if before is not None else 0)

    def tail_start(self, tail: int) -> int:
        """Where the windows of the newest ``tail`` bytes begin: just past the newest
        boundary ending at or before ``size - tail`` (0 when there is none), so that no
        window of the read is cut."""
        if self.size <= tail:
            return 0
        line = next(self.boundaries_back(self.size - tail), None)
        return line.end if line is not None else 0
