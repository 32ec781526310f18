"""The busy set and the slot gates.

A session runs one turn at a time: a second turn for a busy session waits, turns of other
sessions do not. Within a process an asyncio lock per session does it; across processes
(two ``tether chat`` in-process runs on one home) a flock on ``sessions/<id>/.turn.lock``
does, polled so that waiting stays cancellable. A slot gate serialises requests on one
server slot so that priorities, not the server's queue, decide who goes next: on the
background slot a compaction summary, then a due cron run, then heartbeat, then a
tool-output summary (``tether.core.timing.scheduling.Priority``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tether.core.timing.scheduling import Priority
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
            fd = os.open(directory / ".turn.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
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

    @contextlib.contextmanager
    def try_hold(self, sid: str) -> Iterator[bool]:
        """Hold the session's cross-process lock if it is free now, without waiting;
        yields whether it is held. Sync, for start-up, before this process runs turns."""
        session_id(sid)
        directory = self.root / sid
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / ".turn.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)


#: A waiter's priority: fixed, or asked again each time the gate picks who goes next
#: (a tool summary that a compaction is waiting for is raised to the compaction's level).
PriorityOf = Priority | Callable[[], Priority]


@dataclass(eq=False)
class _Waiter:
    priority: PriorityOf
    seq: int
    future: asyncio.Future[None]

    def key(self) -> tuple[int, int]:
        p = self.priority() if callable(self.priority) else self.priority
        return (int(p), self.seq)


class _PriorityGate:
    """One slot: a holder, and waiters served lowest priority first, then in arrival
    order. Release hands the gate straight to the chosen waiter, so nobody barges in."""

    def __init__(self) -> None:
        self._held = False
        self._waiters: list[_Waiter] = []
        self._seq = 0

    async def acquire(self, priority: PriorityOf) -> None:
        if not self._held and not self._waiters:
            self._held = True
            return
        self._seq += 1
        waiter = _Waiter(priority, self._seq, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            await waiter.future
        except asyncio.CancelledError:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif waiter.future.done() and not waiter.future.cancelled():
                self.release()  # handed to us as we were cancelled: pass it on
            raise

    def release(self) -> None:
        if not self._waiters:
            self._held = False
            return
        nxt = min(self._waiters, key=_Waiter.key)
        self._waiters.remove(nxt)
        nxt.future.set_result(None)  # still held: ownership moves to ``nxt``


class SlotGates:
    """One gate per server slot. On the background slot, waiting work is served in
    ``Priority`` order; a main-slot gate only ever sees LIVE turns, so it is FIFO."""

    def __init__(self) -> None:
        self._gates: dict[int, _PriorityGate] = {}

    @contextlib.asynccontextmanager
    async def hold(self, slot: int, priority: PriorityOf = Priority.LIVE) -> AsyncIterator[None]:
        gate = self._gates.setdefault(slot, _PriorityGate())
        await gate.acquire(priority)
        try:
            yield
        finally:
            gate.release()


class InFlight:
    """Background work running against a session's log that compaction must wait for
    (tool-output summaries). ``urgent`` is true while something waits for the session,
    so its in-flight work can be raised to that waiter's priority."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._idle: dict[str, asyncio.Event] = {}
        self._waiting: dict[str, int] = {}

    def begin(self, sid: str) -> None:
        self._counts[sid] = self._counts.get(sid, 0) + 1
        self._idle.setdefault(sid, asyncio.Event()).clear()

    def end(self, sid: str) -> None:
        left = self._counts.get(sid, 0) - 1
        if left > 0:
            self._counts[sid] = left
            return
        self._counts.pop(sid, None)
        event = self._idle.pop(sid, None)
        if event is not None:
            event.set()

    def count(self, sid: str) -> int:
        return self._counts.get(sid, 0)

    def urgent(self, sid: str) -> bool:
        return self._waiting.get(sid, 0) > 0

    async def settled(self, sid: str) -> None:
        """Return once nothing is in flight for ``sid`` (at once if nothing is)."""
        while self._counts.get(sid, 0) > 0:
            event = self._idle[sid]
            self._waiting[sid] = self._waiting.get(sid, 0) + 1
            try:
                await event.wait()
            finally:
                self._waiting[sid] -= 1
                if not self._waiting[sid]:
                    del self._waiting[sid]
