"""``tether serve``: run the daemon on the home's socket until SIGINT or SIGTERM.

uvicorn handles the signals: it stops accepting, lets in-flight turns finish (each
record of a turn is already durable when appended), then we close the runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from tether.config import Config
from tether.daemon.api import RUN_DIR, build_app, socket_accepts, socket_path
from tether.daemon.app import App
from tether.daemon.compose import build_runtime, build_scheduler, harvest_queue
from tether.daemon.home_lock import OwnSocket, home_lock
from tether.daemon.sweep_loop import SweepLoop
from tether.errors import BadInputError, TetherError
from tether.files import remove_stale_temps
from tether.ports import Clock
from tether.scan.urls import shown_url
from tether.scheduler import load_jobs

#: AF_UNIX paths are limited to 107 bytes on Linux.
MAX_SOCKET_PATH = 107


def prepare_run_dir(home: Path) -> Path:
    run = home / RUN_DIR
    run.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(run, 0o700)
    path = socket_path(home)
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise BadInputError(
            f"socket path {path} is longer than {MAX_SOCKET_PATH} bytes; use a shorter --home"
        )
    if socket_accepts(path):
        raise TetherError(f"a tether daemon is already serving {home} ({path})")
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # left by a daemon that died: nobody answers on it
    return path


class _Server(uvicorn.Server):
    """uvicorn re-raises a caught SIGTERM after shutdown (exit -15, skipping our cleanup);
    we handle the signals ourselves so a stop runs cleanup and exits 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stop, sig)
        try:
            yield
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    #: Called once when the stop begins: the scheduler starts nothing during the grace.
    on_stop: Callable[[], None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        # uvicorn makes its socket 0666; it is in a 0700 folder, and the owner's alone too.
        if self.config.uds is not None:
            os.chmod(self.config.uds, 0o600)

    def _stop(self, sig: int) -> None:
        if self.on_stop is not None:
            self.on_stop()
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: stop waiting for turns
        self.should_exit = True


@dataclass(frozen=True)
class Beside:
    """Another ASGI app served from this process on its own listening socket (the memory
    browser page of ``tether serve --ui``): started with the daemon, stopped with it."""

    app: Any
    sock: socket.socket


class _Quiet(uvicorn.Server):
    """A server beside the daemon's: the daemon's own server handles the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(
    home: Path,
    config: Config,
    *,
    clock: Clock | None = None,
    beside: Beside | None = None,
    application: App | None = None,
) -> None:
    """The daemon until stopped, over ``application`` (the one the page ``beside`` takes
    its stores from too; else one of its own at ``clock``), closed when it stops."""
    # The home's lock before anything else: a second daemon opens no store, binds no
    # socket and runs no cron minute (runbook: serve-home-locked).
    with home_lock(home):
        await _serve(home, config, clock=clock, beside=beside, application=application)


async def _serve(
    home: Path,
    config: Config,
    *,
    clock: Clock | None = None,
    beside: Beside | None = None,
    application: App | None = None,
) -> None:
    jobs = load_jobs(home)  # an invalid job file refuses the start (runbook: jobs-invalid)
    path = prepare_run_dir(home)
    runtime = build_runtime(home, config, clock=clock, app=application)
    try:
        scheduler = build_scheduler(runtime, jobs)
        scheduler.recover()  # we are the home's only daemon: close a dead one's runs
        # ... and the turns a killed process left open (a bare User): interrupted.
        await asyncio.to_thread(runtime.agent.close_interrupted_all)
        # ... and the temporaries of atomic writes a killed process left mid-write.
        await asyncio.to_thread(remove_stale_temps, home, time.time())
    except BaseException:
        await runtime.aclose()
        raise
    harvesting = contextlib.ExitStack()
    try:
        harvest = harvesting.enter_context(harvest_queue(runtime))
        own = OwnSocket(path)  # its inode: the file we may remove at the end
    except BaseException:
        harvesting.close()
        await runtime.aclose()
        raise
    app = build_app(runtime, harvest)
    server = _Server(
        uvicorn.Config(
            app, uds=str(path), log_level="warning", lifespan="off", timeout_graceful_shutdown=30
        )
    )
    server.on_stop = scheduler.halt
    log = logging.getLogger("tether.daemon")
    log.info(
        "serving home=%s socket=%s llm=%s backend=%s pid=%d",
        home,
        path,
        shown_url(config.llm.url),
        config.llm.backend,
        os.getpid(),
    )
    extra = None
    if beside is not None:
        quiet = _Quiet(
            uvicorn.Config(beside.app, log_level="warning", lifespan="off", access_log=False)
        )
        extra = asyncio.create_task(quiet.serve(sockets=[beside.sock]))
    sweep = SweepLoop(runtime)
    try:
        scheduler.start()
        harvest.start()
        sweep.start()  # closed by default: then it never starts
        await server.serve(sockets=[own.sock])
        if extra is not None:
            quiet.should_exit = True
            await extra
        await sweep.stop()
        await harvest.stop()
        # Scheduled turns and summaries get the same grace as turns from the socket.
        await scheduler.stop(grace_s=30)
        # Let compactions started after the last turns finish (they hold no socket).
        pending = list(app.state.background)
        if pending:
            await asyncio.wait(pending, timeout=60)
    finally:
        await harvest.stop()
        harvesting.close()
        await runtime.aclose()
        own.close()  # removes our socket file, never another daemon's
        log.info("stopped")


def run(home: Path, config: Config, beside: Beside | None = None, app: App | None = None) -> None:
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(message)s"
    )
    # httpx logs every request at INFO; the daemon's own line per turn is the log.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    asyncio.run(serve(home, config, beside=beside, application=app))
