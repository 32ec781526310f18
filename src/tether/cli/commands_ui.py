"""``tether ui``: the memory browser page on 127.0.0.1, behind a one-time login URL."""

from __future__ import annotations

import asyncio
import socket
import threading
import webbrowser
from typing import TYPE_CHECKING

import click

from tether.cli.context import Context, pass_ctx

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


@click.command("ui")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="TCP port on 127.0.0.1 (default 8431; 0 picks a free one).",
)
@click.option("--no-open", is_flag=True, help="Print the login URL only; open no browser.")
@pass_ctx
def ui_cmd(ctx: Context, port: int | None, no_open: bool) -> None:
    """Browse memory in a local page: sessions and their epochs, recall, identity and
    notes, facts, the journals, the sweep, jobs and usage; edit identity from it.

    Serves on 127.0.0.1 only and prints a login URL that works once (its token is stored
    hashed under <home>/ui/); the browser keeps a cookie session after. Stop with Ctrl-C."""
    from tether.ui.app import UiServices, build_app
    from tether.ui.server import DEFAULT_PORT, bind, login_url, server_for

    services = ui_services(ctx)
    assert isinstance(services, UiServices)
    sock = bind(DEFAULT_PORT if port is None else port)
    app = build_app(services, sock.getsockname()[1])
    url = login_url(ctx.home, sock)
    click.echo(f"tether ui for {ctx.home}: open {url}", err=False)
    click.echo("(the address works once; Ctrl-C stops the page)", err=True)
    if not no_open:
        webbrowser.open(url)
    try:
        asyncio.run(server_for(app).serve(sockets=[sock]))
    finally:
        if isinstance(services.vectors, HeldVectors):
            services.vectors.close()


COMMANDS = [ui_cmd]
