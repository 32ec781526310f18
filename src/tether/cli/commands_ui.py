"""``tether ui``: the memory browser page on 127.0.0.1, behind a one-time login URL."""

from __future__ import annotations

import asyncio
import socket
import webbrowser
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from tether.cli.context import Context, pass_ctx

if TYPE_CHECKING:
    pass


def ui_services(ctx: Context) -> object:
    """What the page is given: the home, its config, the usage zone, and from the
    command's application (``daemon.app.App``) its clock, its stores and recall's vectors,
    each opened by the first request that needs it (the page starts without loading a
    model) and closed when the command ends; and, where this tether has ``session
    discard``, that command (run as the CLI runs it)."""
    from tether.daemon.compose import home_zone
    from tether.ui.app import UiServices

    app = ctx.app
    return UiServices(
        home=ctx.home,
        config=ctx.config(),
        zone=home_zone,
        now=ctx.now,
        store=app.store,
        sweep=lambda migrate: app.sweep(migrate=migrate),
        discard=discard_command(ctx),
        vectors=app.vectors,
    )


def discard_command(ctx: Context) -> Callable[[str], str] | None:
    """``tether session discard ID`` as a function, or None where it does not exist."""
    from tether.cli.commands_session import session_group

    command = session_group.commands.get("discard")
    if command is None:
        return None

    def discard(sid: str) -> str:
        out = command.main(
            [sid], obj=ctx, standalone_mode=False, prog_name="tether session discard"
        )
        return str(out or "")

    return discard


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
    url = login_url(ctx.home, sock, ctx.now())
    click.echo(f"tether ui for {ctx.home}: open {url}", err=False)
    click.echo("(the address works once; Ctrl-C stops the page)", err=True)
    if not no_open:
        webbrowser.open(url)
    asyncio.run(server_for(app).serve(sockets=[sock]))  # the application closes at the end


COMMANDS = [ui_cmd]
