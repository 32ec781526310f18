"""One ``tether serve`` per home: an exclusive lock held for the daemon's life, and a
socket that is unlinked only by the daemon that bound it.

Two daemons on one home run every cron minute twice and race on the socket (asyncio
replaces a socket file it finds at the path, and a stopping daemon used to unlink
whatever was there). So the daemon takes ``<home>/run/serve.lock`` with ``flock``
before it opens anything else, and writes its pid there for the next one to name. The
lock is the kernel's: a killed daemon's lock goes with its process, so nothing stale
is ever left to clear by hand. The lock file itself is never removed (removing it would
let a third daemon lock a new file while a second still holds the old one).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from tether.checkpoint.ipc import RUN_DIR
from tether.errors import HomeLockedError

LOCK_FILE = "serve.lock"
#: How long a daemon that lost the lock waits for the winner to write its pid (the
#: winner writes it just after locking: this only covers starts in the same instant).
_PID_WAIT_S = 1.0


def lock_path(home: Path) -> Path:
    return home / RUN_DIR / LOCK_FILE


def _holder(fd: int) -> int | None:
    deadline = time.monotonic() + _PID_WAIT_S
    while True:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return int(text)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


@contextlib.contextmanager
def home_lock(home: Path) -> Iterator[None]:
    """Hold the home's serve lock for the block; HomeLockedError (exit 2, naming the
    holder's pid) when another process holds it."""
    run = home / RUN_DIR
    run.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = lock_path(home)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HomeLockedError(home, path, _holder(fd)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class OwnSocket:
    """A listening Unix socket this daemon bound, and the inode it made at its path:
    ``close`` removes the file only while it is still that inode, never a socket
    another process put there since."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.bind(str(path))
            # The owner's alone whatever the umask (uvicorn's own bind made it 0666).
            os.chmod(path, 0o600)
            self.sock.listen(2048)
            self.inode = os.stat(path).st_ino
        except BaseException:
            self.sock.close()
            raise

    def close(self) -> bool:
        """Stop listening and remove our socket file; True if it was still ours."""
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path).st_ino == self.inode:
                self.path.unlink()
                return True
        return False
