"""Claim files: one harvest of a segment at a time (``receipts/<segment>.claim``).

A claim names its holder: pid, the process's start time (``/proc/<pid>/stat`` field 22,
clock ticks since boot, so a pid the kernel gave to another process is not mistaken for
the holder), the boot id (``/proc/sys/kernel/random/boot_id``) and the host name. A claim
whose holder is gone is taken over at once: same host, and the machine rebooted since, or
no such process, or one that started at another time. Only a holder on another machine
(a home on a shared file system), or a claim that names no holder (written by an older
tether), is judged by age: ``CLAIM_STALE_S``.

A claim is made whole or not at all (written aside, then hard-linked into place: the link
fails when one is there), and the check-and-take-over runs under a lock on the folder, so
two processes never both take over one dead claim. It is released only by its holder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from tether.faults import crash_point

#: A claim older than this whose holder cannot be checked (another host) is taken over.
CLAIM_STALE_S = 300.0
#: The fault point just after a claim is taken (crash tests).
CRASH_CLAIMED = "harvest-after-claim"
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True)
class Holder:
    pid: int
    start: int | None
    boot: str | None
    host: str


def _boot_id() -> str | None:
    try:
        return _BOOT_ID.read_text().strip() or None
    except OSError:
        return None


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot; None when there is no such
    process (or no /proc to ask)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the name (field 2) may hold spaces
    try:
        return int(fields[19])  # field 22; the list starts at field 3
    except (IndexError, ValueError):
        return None


def me() -> Holder:
    pid = os.getpid()
    return Holder(pid, _start_time(pid), _boot_id(), socket.gethostname())


def _read(path: Path) -> Holder | None:
    try:
        doc = json.loads(path.read_bytes())
        return Holder(
            int(doc["pid"]),
            None if doc.get("start") is None else int(doc["start"]),
            doc.get("boot"),
            str(doc["host"]),
        )
    except (ValueError, KeyError, TypeError, OSError):
        return None  # an older tether's bare pid, or unreadable: judged by age


def gone(holder: Holder) -> bool | None:
    """True when the holder is dead, False when it runs, None when this machine cannot
    tell (another host)."""
    if holder.host != socket.gethostname():
        return None
    boot = _boot_id()
    if holder.boot and boot and holder.boot != boot:
        return True  # rebooted since: every process of the claim's time is gone
    start = _start_time(holder.pid)
    if start is not None:
        return holder.start is not None and start != holder.start
    if Path("/proc/self/stat").exists():
        return True  # /proc answers, and has no such process
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _place(path: Path, data: bytes, *, replace: bool) -> bool:
    """Put a whole claim at ``path``; False when one is there (and ``replace`` is off)."""
    aside = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    aside.write_bytes(data)
    try:
        if replace:
            os.replace(aside, path)
            return True
        try:
            os.link(aside, path)
        except FileExistsError:
            return False
        except OSError:  # no hard links here: create it exclusively (under the lock)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                return False
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        return True
    finally:
        aside.unlink(missing_ok=True)


def _take(path: Path, data: bytes) -> bool:
    with _folder_lock(path.parent):
        if _place(path, data, replace=False):
            return True
        holder = _read(path)
        dead = gone(holder) if holder is not None else None
        if dead is None:
            try:
                dead = time.time() - path.stat().st_mtime >= CLAIM_STALE_S
            except FileNotFoundError:
                dead = True
        if not dead:
            return False
        return _place(path, data, replace=True)


def _release(path: Path, data: bytes) -> None:
    with _folder_lock(path.parent), contextlib.suppress(OSError):
        if path.read_bytes() == data:  # never another's claim (one that took over ours)
            path.unlink()


@contextlib.contextmanager
def claim(path: Path) -> Iterator[Path | None]:
    """Hold ``path`` for this process, taking over a dead holder's at once; None when a
    live holder (or a fresh claim this machine cannot check) has it."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = json.dumps(asdict(me()), separators=(",", ":")).encode() + b"\n"
    if not _take(path, data):
        yield None
        return
    crash_point(CRASH_CLAIMED)
    try:
        yield path
    finally:
        _release(path, data)
