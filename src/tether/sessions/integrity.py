"""Is a session log still what tether wrote? Checksums beside each log, a note of every
torn tail cut, and the check ``tether doctor`` runs over a home's logs.

**Checksums.** Every record appended to ``<n>.jsonl`` gets one line in
``<n>.sums``: ``<start> <end> <crc32 as 8 hex digits>`` over the log's bytes
``[start, end)``, its line and newline. An append's lines are written in one ``write``
after the log's fsync, under the log's lock, with no fsync of their own: an append costs
one more small write (the sidecar may lose its last lines in a power cut, which leaves
those bytes unchecked, never wrongly flagged), and the sidecar is about 25 bytes a record.
A record whose bytes no longer match was edited after it was written, even when the edit
kept every length (a run of them is one finding: a line that changed length moves the
ones after it); a range past the log's end was cut off. Bytes no line covers are accepted
as they are: the ``SessionStart`` written with the epoch's files, logs from before
checksums, and a sidecar that lost lines. A sidecar line that does not parse is ignored.

**Torn tails.** A crash mid-append leaves a last line without its newline; the next
append cuts it (``files.repair_torn_tail``). The cut is recorded as one line of
``<home>/telemetry/sessions.jsonl`` (time, session, epoch, bytes cut: counts, never
content), so it is not silent; ``tether doctor`` lists them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import zlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import msgspec

from tether import files

SUM_SUFFIX = ".sums"
TELEMETRY = Path("telemetry") / "sessions.jsonl"
log = logging.getLogger("tether.sessions")


def sum_path(log_path: Path) -> Path:
    """``<n>.sums`` beside ``<n>.jsonl`` (not ``.jsonl.*``: globs for a session's
    ``*.json*`` epoch files must not take it for one)."""
    return log_path.with_suffix(SUM_SUFFIX)


def record_sum(log_path: Path, start: int, data: bytes) -> None:
    """Add the checksum of each line of ``data``, just appended at ``start``, to the
    log's sidecar.
    Never fails the append it follows: a sidecar that cannot be written leaves the range
    unchecked, with one warning."""
    sums = []
    at = start
    for record in data.splitlines(keepends=True):
        sums.append(f"{at} {at + len(record)} {zlib.crc32(record):08x}\n")
        at += len(record)
    line = "".join(sums).encode()
    try:
        fd = os.open(sum_path(log_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("%s: checksum not recorded (the range stays unchecked): %s", log_path, exc)


class TornTail(msgspec.Struct, frozen=True):
    """A torn last line cut off a log before an append (``telemetry/sessions.jsonl``)."""

    time: datetime
    session: str
    epoch: int
    bytes: int
    event: str = "torn_tail_cut"


_torn = msgspec.json.Decoder(TornTail)


def note_torn_tail(home: Path, cut: TornTail) -> None:
    """Record a torn tail that was cut; a note that cannot be written is a warning."""
    path = home / TELEMETRY
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, msgspec.json.encode(cut) + b"\n")
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("cannot record a torn tail cut: %s", exc)
    log.warning(
        "session=%s epoch=%d: cut a torn last line of %d bytes (a write a crash cut short; "
        "runbook: session-torn-tail)",
        cut.session,
        cut.epoch,
        cut.bytes,
    )


def torn_tails(home: Path) -> list[TornTail]:
    """Every torn tail cut in the home, oldest first (unreadable lines are skipped)."""
    try:
        data = (home / TELEMETRY).read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in data.splitlines():
        with contextlib.suppress(msgspec.DecodeError):
            out.append(_torn.decode(line))
    return out


@dataclass(frozen=True)
class LogProblem:
    """What is wrong with a log: ``name`` is the runbook entry (``session-log-corrupt``,
    ``session-log-changed``, ``session-log-cut``); ``line`` the first line concerned."""

    name: str
    path: Path
    line: int
    detail: str


def _sums(path: Path) -> list[tuple[int, int, int]]:
    try:
        text = sum_path(path).read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        try:
            start, end, crc = int(parts[0]), int(parts[1]), int(parts[2], 16)
        except ValueError:
            continue
        if 0 <= start <= end:
            out.append((start, end, crc))
    return out


def check_log(path: Path) -> list[LogProblem]:
    """The malformed lines of one log, and the ranges its checksums no longer match."""
    data = path.read_bytes()
    lines, _ = files.split_complete(data)
    problems = [
        LogProblem("session-log-corrupt", path, line, f"malformed record: {problem}")
        for line, problem in files.decode_lenient(lines)[1]
    ]
    # Consecutive records that fail are one finding: a line that changed length moves
    # every line after it, and those are not edits of their own.
    failed: list[tuple[int, int]] = []  # (start, end) of a run of failing records
    for start, end, crc in _sums(path):
        if end <= len(data) and zlib.crc32(data[start:end]) == crc:
            continue
        if failed and failed[-1][1] == start:
            failed[-1] = (failed[-1][0], end)
        else:
            failed.append((start, end))
    for start, end in failed:
        first = data.count(b"\n", 0, start) + 1
        if start >= len(data):
            problems.append(
                LogProblem(
                    "session-log-cut",
                    path,
                    first,
                    f"bytes {start}-{end} were written and are gone (the log is {len(data)} bytes)",
                )
            )
            continue
        last = data.count(b"\n", 0, min(end, len(data)))
        where = f"line {first} was" if last <= first else f"lines {first}-{last} were"
        problems.append(
            LogProblem(
                "session-log-changed",
                path,
                first,
                f"{where} changed after being written (checksum)",
            )
        )
    return problems
