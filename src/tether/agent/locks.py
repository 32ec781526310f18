"""The busy set and the slot gates.

A session runs one turn at a time: a second turn for a busy session waits, turns of other
sessions do not. Within a process an asyncio lock per session does it; across processes
(two ``tether chat`` in-process runs on one home) a flock on ``sessions/<id>/.turn.lock``
does, polled so that waiting stays cancellable. A slot gate serialises requests on one
server slot so that priorities, not the server's queue, decide who goes next.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import AsyncIterator
from pathlib import Path

from tether.ids import session_id

_POLL_S = 0.02


class BusySet:
    def __init__(self, sessions_root: Path) -> None:
        self.root = sessions_root
        self._locks: dict[str, asyncio.Lock] = {}

    def is_busy(self, sid: str) -> bool:
        lock = self._locks.get(sid)
        return lock is not None and lock.locked()

    @contextlib.asynccontextmanager
    async def hold(self, sid: str) -> AsyncIterator[None]:
        session_id(sid)
        lock = self._locks.setdefault(sid, asyncio.Lock())
        async with lock:
            directory = self.root / sid
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(directory / ".turn.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        await asyncio.sleep(_POLL_S)
                yield
            finally:
                os.close(fd)


class SlotGates:
    def __init__(self) -> None:
        self._gates: dict[int, asyncio.Lock] = {}

    @contextlib.asynccontextmanager
    async def hold(self, slot: int) -> AsyncIterator[None]:
        async with self._gates.setdefault(slot, asyncio.Lock()):
            yield
