"""The home's scan files: the allow-list of reviewed false positives,
``<home>/.tether-scan-allow``, and the owner's blocklist, ``<home>/.tether-scan-blocklist``.

One allow-list serves every place tether scans (banked windows, summaries, what becomes
durable memory, compiled views), so a fingerprint allowed once is allowed everywhere.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from tether.errors import AllowListError, BlocklistError, ScanFileError, UnsafeHomePathError
from tether.scan.secrets import load_allow
from tether.scan.sensitive import Blocklist, parse_blocklist

ALLOW_FILE = ".tether-scan-allow"
BLOCKLIST_FILE = ".tether-scan-blocklist"


def read_home_bytes(path: Path) -> bytes:
    """A scan file's bytes, never through a link nor from a FIFO or device (as
    ``tether.files.open_home``, which this layer may not import)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeHomePathError(path, "a symbolic link") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeHomePathError(path, "not a regular file")
        os.set_blocking(fd, True)
        return handle.read()


def _utf8(data: bytes, path: Path, error: type[ScanFileError]) -> str:
    """A scan file's text; bad UTF-8 is an error naming the file and line (exit 2)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(path, data.count(b"\n", 0, exc.start) + 1, "not UTF-8 text") from None


def load_allow_file(path: Path) -> frozenset[str]:
    """The fingerprints in an allow file; none if it is absent."""
    try:
        data = read_home_bytes(path)
    except FileNotFoundError:
        return frozenset()
    content = _utf8(data, path, AllowListError)
    return load_allow(content, source=str(path))


def home_allow(home: Path) -> frozenset[str]:
    """The fingerprints in ``<home>/.tether-scan-allow``."""
    return load_allow_file(home / ALLOW_FILE)


def home_blocklist(home: Path) -> Blocklist:
    """The owner's blocklist (``sensitive.parse_blocklist``); empty if the file is absent."""
    path = home / BLOCKLIST_FILE
    try:
        data = read_home_bytes(path)
    except FileNotFoundError:
        return Blocklist()
    content = _utf8(data, path, BlocklistError)
    return parse_blocklist(content, source=str(path))
