"""The memory browser page as the CLI starts it, for ``tether ui`` and ``tether serve
--ui``: what the page is given, and its app on a bound loopback socket."""

from __future__ import annotations

import socket

import click

from tether.cli.context import Context


def ui_services(ctx: Context) -> object:
    """What the page is given: the home, its config, and from the command's application
    (``daemon.app.App``) its clock, its stores and recall's vectors, each opened by the
    first request that needs it (the page starts without loading a model) and closed when
    the command ends."""
    from tether.ui.app import UiServices

    app = ctx.app
    return UiServices(
        home=ctx.home,
        config=ctx.config(),
        now=ctx.now,
        store=app.store,
        sweep=lambda migrate: app.sweep(migrate=migrate),
        vectors=app.vectors,
    )


def ui_beside(ctx: Context, port: int | None) -> tuple[object, socket.socket]:
    """The page's app and its bound loopback socket, for ``tether serve --ui``; prints the
    login URL."""
    from tether.ui.app import UiServices, build_app
    from tether.ui.server import DEFAULT_PORT, bind, login_url

    services = ui_services(ctx)
    assert isinstance(services, UiServices)
    sock = bind(DEFAULT_PORT if port is None else port)
    click.echo(f"tether ui for {ctx.home}: open {login_url(ctx.home, sock, ctx.now())}")
    return build_app(services, sock.getsockname()[1]), sock
