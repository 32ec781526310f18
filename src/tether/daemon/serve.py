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

import httpx
import uvicorn

from tether.config import Config
from tether.daemon.api import RUN_DIR, build_app, socket_path
from tether.daemon.compose import build_runtime
from tether.errors import BadInputError, TetherError

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
    if path.exists():
        try:
            with httpx.Client(transport=httpx.HTTPTransport(uds=str(path))) as c:
                c.get("http://tether/v1/health", timeout=1.0)
        except httpx.HTTPError:
            path.unlink()  # left by a daemon that died: nobody answers on it
        else:
            raise TetherError(f"a tether daemon is already serving {home} ({path})")
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


async def serve(home: Path, config: Config) -> None:
    path = prepare_run_dir(home)
    runtime = build_runtime(home, config)
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
    try:
        await server.serve()
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
