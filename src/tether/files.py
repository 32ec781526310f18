"""File primitives: atomic writes, durable appends under a lock, strict JSONL reads, and
reading a text file the user named."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

import msgspec

from tether.errors import BadInputError, CorruptLogError, DiskFullError, UnsafeHomePathError
from tether.records import LogRecord

_encoder = msgspec.json.Encoder()
_line_decoder: msgspec.json.Decoder[LogRecord] = msgspec.json.Decoder(LogRecord)
_batch_decoder: msgspec.json.Decoder[list[LogRecord]] = msgspec.json.Decoder(list[LogRecord])


#: errno values that mean the file system (or the owner's quota) has no room left.
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in NO_SPACE


@contextlib.contextmanager
def disk_full_as_error(path: Path | str) -> Iterator[None]:
    """An OSError saying the disk is full becomes DiskFullError naming ``path``."""
    try:
        yield
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskFullError(path) from None
        raise


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def user_file(path: Path) -> Iterator[BinaryIO | None]:
    """A file the user named, open for reading; None when there is none. Anything else
    that keeps it from being opened or read is one BadInputError naming the path."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        yield None
        return
    except IsADirectoryError:
        raise BadInputError(f"{path}: is a directory") from None
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with handle:
        try:
            yield handle
        except OSError as exc:
            raise BadInputError(f"{path}: cannot read: {exc.strerror or exc}") from None


#: The most a text file the user names is read (``read_user_text``): a file past it (or a
#: device such as /dev/zero, which never ends) is refused while reading, never loaded.
USER_TEXT_BYTES = 16 * 1024 * 1024
#: The longest line of a JSONL file the user names (an import, a transcript): one turn or
#: one transcript entry; a tool's output in a transcript can run to megabytes.
MAX_LINE_BYTES = 64 * 1024 * 1024


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"


def read_bounded(handle: BinaryIO, limit: int, name: object) -> bytes:
    """All of ``handle`` (a file, a pipe, a device), read in blocks and refused with a
    BadInputError naming ``name`` and the limit as soon as it passes ``limit`` bytes."""
    out = bytearray()
    while True:
        block = handle.read(min(1024 * 1024, limit + 1 - len(out)))
        if not block:
            return bytes(out)
        out += block
        if len(out) > limit:
            raise BadInputError(f"{name}: larger than {_size(limit)}, the most tether reads")


def bounded_lines(handle: BinaryIO, name: object, limit: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of ``handle`` (each with its newline, the last maybe without), read one
    at a time; a line longer than ``limit`` bytes is a BadInputError naming ``name``, the
    line and the limit, found after reading ``limit`` bytes of it, not all of it."""
    number = 0
    while True:
        line = handle.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit:
            raise BadInputError(
                f"{name}: line {number} is longer than {_size(limit)}, the most tether reads"
            )
        yield line


def decode_utf8(data: bytes, name: object) -> str:
    """``data`` as UTF-8 text; BadInputError naming ``name`` (exit 2) when it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{name}: not UTF-8 text (byte {exc.start})") from None


def read_user_text(path: Path, *, limit: int = USER_TEXT_BYTES) -> str | None:
    """A UTF-8 text file the user named (``user_file``), decoded; None when there is none.
    More than ``limit`` bytes is refused while reading (``read_bounded``)."""
    with user_file(path) as handle:
        if handle is None:
            return None
        data = read_bounded(handle, limit, path)
    return decode_utf8(data, path)


# -- files inside the home: never through a link -----------------------------------------


def open_home(path: Path, flags: int, mode: int = 0o600) -> int:
    """``os.open`` of a file inside the home that refuses a symbolic link as its last
    component (``O_NOFOLLOW``) and anything but a regular file (a FIFO would block, a
    device never ends): UnsafeHomePathError naming the path. FileNotFoundError passes."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeHomePathError(path, "a symbolic link") from None
        if exc.errno == errno.ENXIO:  # a FIFO opened for writing with no reader
            raise UnsafeHomePathError(path, "not a regular file") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeHomePathError(path, "not a regular file")
    os.set_blocking(fd, True)
    return fd


def read_home_bytes(path: Path) -> bytes:
    """A home file's bytes (``open_home``): never through a link."""
    with os.fdopen(open_home(path, os.O_RDONLY), "rb") as handle:
        return handle.read()


def read_home_text(path: Path) -> str:
    """A home file's UTF-8 text (``open_home``); bad UTF-8 is a BadInputError naming the
    file and line."""
    data = read_home_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BadInputError(f"{path}: line {line} is not UTF-8 text") from None


def append_home(path: Path, data: bytes) -> None:
    """Append ``data`` to a home file (made 0600 if absent), never through a link."""
    fd = open_home(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: all or nothing.

    The file is private (0600, as ``mkstemp`` makes it) unless ``mode`` is given. A full
    disk is DiskFullError naming ``path``; the file is then as it was."""
    with disk_full_as_error(path):
        _write_atomic(path, data, mode)


def _write_atomic(path: Path, data: bytes, mode: int | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


#: A write_atomic temporary older than this is a killed writer's leftover (a live one
#: lasts milliseconds), safe to remove.
STALE_TEMP_S = 300.0


def remove_stale_temps(root: Path, now: float) -> list[Path]:
    """Remove ``write_atomic`` temporaries (``.<name>.<random>.tmp``) under ``root`` last
    modified more than ``STALE_TEMP_S`` before ``now`` (epoch seconds): a process killed
    between writing one and renaming it leaves it behind (the real file is intact)."""
    removed = []
    for tmp in root.rglob(".*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            if tmp.is_file() and now - tmp.stat().st_mtime > STALE_TEMP_S:
                tmp.unlink()
                removed.append(tmp)
    return removed


def encode_records(records: Sequence[LogRecord]) -> bytes:
    return b"".join(_encoder.encode(r) + b"\n" for r in records)


def split_complete(data: bytes) -> tuple[list[bytes], int]:
    """Lines ended by a newline, and the length of those bytes; a torn tail is left out."""
    end = data.rfind(b"\n") + 1
    if end == 0:
        return [], 0
    return data[: end - 1].split(b"\n"), end


def decode_lines(path: Path, lines: list[bytes], first_line: int = 1) -> list[LogRecord]:
    """Decode complete JSONL lines strictly; a bad one raises CorruptLogError (file, line)."""
    if not lines:
        return []
    try:
        # One decode of the whole file is several times faster than a call per line;
        # only on failure do we go line by line to name the culprit.
        return _batch_decoder.decode(b"[" + b",".join(lines) + b"]")
    except msgspec.DecodeError:
        pass
    out: list[LogRecord] = []
    for offset, line in enumerate(lines):
        try:
            out.append(_line_decoder.decode(line))
        except msgspec.DecodeError as exc:
            raise CorruptLogError(path, first_line + offset, str(exc)) from None
    # The batch failed but every line decodes alone: an empty line joined to nothing.
    raise CorruptLogError(path, first_line, "unreadable log")


def decode_lenient(
    lines: list[bytes], first_line: int = 1
) -> tuple[list[LogRecord], list[tuple[int, str]]]:
    """Decode complete JSONL lines, reading past the malformed ones: the records, and
    (line number, problem) of each line left out (recall keeps a session's intact lines
    when one is damaged; ``tether doctor`` names the damaged one)."""
    if not lines:
        return [], []
    try:
        return _batch_decoder.decode(b"[" + b",".join(lines) + b"]"), []
    except msgspec.DecodeError:
        pass
    out: list[LogRecord] = []
    bad: list[tuple[int, str]] = []
    for offset, line in enumerate(lines):
        try:
            out.append(_line_decoder.decode(line))
        except msgspec.DecodeError as exc:
            bad.append((first_line + offset, str(exc)))
    return out, bad


def read_log(path: Path) -> tuple[list[LogRecord], int]:
    """Every complete record of ``path`` and the byte length they span (torn tail ignored)."""
    data = read_home_bytes(path)
    lines, end = split_complete(data)
    return decode_lines(path, lines), end


@contextlib.contextmanager
def locked(path: Path) -> Iterator[int]:
    """Open ``path`` read-write with an exclusive flock held for the block (never
    through a link: ``open_home``)."""
    fd = open_home(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def locked_within(path: Path, wait_s: float | None, poll_s: float = 0.01) -> Iterator[bool]:
    """Hold an exclusive flock on ``path`` (made 0600 if absent, never through a link)
    for the block; yields True once held. ``wait_s`` None waits for it; else it is tried
    until ``wait_s`` has passed, then False is yielded (the caller does without)."""
    fd = open_home(path, os.O_RDWR | os.O_CREAT)
    try:
        if wait_s is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield True
            return
        give_up = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= give_up:
                    yield False
                    return
                time.sleep(poll_s)
        yield True
    finally:
        os.close(fd)  # closing releases the lock


def repair_torn_tail(fd: int) -> int:
    """Cut a torn last line (bytes after the last newline) off; return the new size."""
    size = os.fstat(fd).st_size
    if size == 0:
        return 0
    if os.pread(fd, 1, size - 1) == b"\n":
        return size
    pos = size
    chunk = 4096
    while pos > 0:
        start = max(0, pos - chunk)
        block = os.pread(fd, pos - start, start)
        idx = block.rfind(b"\n")
        if idx >= 0:
            new_size = start + idx + 1
            os.ftruncate(fd, new_size)
            return new_size
        pos = start
    os.ftruncate(fd, 0)
    return 0


def read_from(fd: int, offset: int, size: int) -> bytes:
    out = bytearray()
    while offset + len(out) < size:
        block = os.pread(fd, size - offset - len(out), offset + len(out))
        if not block:
            break
        out += block
    return bytes(out)


def append_durable(fd: int, data: bytes, path: Path | str | None = None) -> int:
    """Append ``data`` at the end of the locked file, fsync, and return the new size.

    A write that fails part way (a full disk) is cut back off, so the file ends where it
    did; a full disk is then DiskFullError naming ``path``."""
    size = os.fstat(fd).st_size
    written = 0
    try:
        while written < len(data):
            written += os.pwrite(fd, data[written:], size + written)
        os.fsync(fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)  # shrinking needs no room
        if is_disk_full(exc) and path is not None:
            raise DiskFullError(path) from None
        raise
    return size + written
