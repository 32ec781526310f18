"""Serving the page: a socket bound to 127.0.0.1 only (there is no option for another
address), the login URL printed once it listens, uvicorn in this process (``tether ui``)
or beside the daemon's socket in ``tether serve``'s process."""

from __future__ import annotations

import socket
from datetime import datetime
from pathlib import Path

import uvicorn

from tether.errors import BadInputError
from tether.ui.auth import UiAuth

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8431


def bind(port: int) -> socket.socket:
    """A listening TCP socket on the loopback address (``port`` 0: any free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
    except OSError as exc:
        sock.close()
        raise BadInputError(
            f"cannot listen on {LOOPBACK}:{port} ({exc.strerror}); give another --port"
        ) from None
    sock.listen(64)
    return sock


def login_url(home: Path, sock: socket.socket, now: datetime) -> str:
    """The address that logs one browser in, once: a fresh token whose hash is stored
    (issued at ``now``)."""
    port = sock.getsockname()[1]
    token = UiAuth(home).issue_login(now)
    return f"http://{LOOPBACK}:{port}/login?token={token}"


def server_for(app: object, *, quiet: bool = True) -> uvicorn.Server:
    return uvicorn.Server(
        uvicorn.Config(
            app,  # type: ignore[arg-type]  # an ASGI app
            log_level="warning" if quiet else "info",
            lifespan="off",
            access_log=False,
        )
    )
