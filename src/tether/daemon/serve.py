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
import sys
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from tether.config import Config
from tether.daemon.api import RUN_DIR, build_app, socket_accepts, socket_path
from tether.daemon.compose import build_runtime, build_scheduler
from tether.daemon.sweep_loop import SweepLoop
from tether.errors import BadInputError, TetherError
from tether.ports import Clock
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

    def _stop(self, sig: int) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: stop waiting for turns
        self.should_exit = True


async def serve(home: Path, config: Config, *, clock: Clock | None = None) -> None:
    jobs = load_jobs(home)  # an invalid job file refuses the start (runbook: jobs-invalid)
    path = prepare_run_dir(home)
    runtime = build_runtime(home, config, clock=clock)
    try:
        scheduler = build_scheduler(runtime, jobs)
        scheduler.recover()  # we are the home's only daemon: close a dead one's runs
        # ... and the turns a killed process left open (a bare User): interrupted.
        await asyncio.to_thread(runtime.agent.close_interrupted_all)
    except BaseException:
        await runtime.aclose()
        raise
    app = build_app(runtime)
    server = _Server(
        uvicorn.Config(
            app, uds=str(path), log_level="warning", lifespan="off", timeout_graceful_shutdown=30
        )
    )
    log = logging.getLogger("tether.daemon")
    log.info(
        "serving home=%s socket=%s llm=%s backend=%s pid=%d",
        home,
        path,
        config.llm.url,
        config.llm.backend,
        os.getpid(),
    )
    sweep = SweepLoop(runtime)
    try:
        scheduler.start()
        sweep.start()  # closed by default: then it never starts
        await server.serve()
        await sweep.stop()
        # Scheduled turns and summaries get the same grace as turns from the socket.
        await scheduler.stop(grace_s=30)
        # Let compactions started after the last turns finish (they hold no socket).
        pending = list(app.state.background)
        if pending:
            await asyncio.wait(pending, timeout=60)
    finally:
        await runtime.aclose()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        log.info("stopped")


def run(home: Path, config: Config) -> None:
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(message)s"
    )
    # httpx logs every request at INFO; the daemon's own line per turn is the log.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    asyncio.run(serve(home, config))
