"""The memory browser page as the CLI starts it, for ``tether ui`` and ``tether serve
--ui``: what the page is given, and its app on a bound loopback socket."""

from __future__ import annotations

import socket
import threading
from typing import TYPE_CHECKING

import click

from tether.cli.context import Context

if TYPE_CHECKING:
    from tether.memory.vectors import Vectors


def ui_services(ctx: Context) -> object:
    """What the page is given: the home, its config and recall's vectors
    (``HeldVectors``)."""
    from tether.ui.app import UiServices

    return UiServices(home=ctx.home, config=ctx.config(), vectors=HeldVectors(ctx))


class HeldVectors:
    """Recall's vectors for the page, as ``[recall] vectors`` says: opened by the first
    recall (the page starts without loading a model), then held until ``close``. A
    failure to open is the request's error, and the next recall tries again."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._lock = threading.Lock()
        self._vectors: Vectors | None = None
        self._opened = False

    def __call__(self) -> Vectors | None:
        from tether.daemon.vectors import open_vectors

        with self._lock:
            if not self._opened:
                self._vectors = open_vectors(self._ctx.home, self._ctx.config())
                self._opened = True
            return self._vectors

    def close(self) -> None:
        with self._lock:
            if self._vectors is not None:
                self._vectors.index.close()
            self._vectors, self._opened = None, False


def ui_beside(ctx: Context, port: int | None) -> tuple[object, socket.socket]:
    """The page's app and its bound loopback socket, for ``tether serve --ui``; prints the
    login URL."""
    from tether.ui.app import UiServices, build_app
    from tether.ui.server import DEFAULT_PORT, bind, login_url

    services = ui_services(ctx)
    assert isinstance(services, UiServices)
    sock = bind(DEFAULT_PORT if port is None else port)
    click.echo(f"tether ui for {ctx.home}: open {login_url(ctx.home, sock)}")
    return build_app(services, sock.getsockname()[1]), sock
