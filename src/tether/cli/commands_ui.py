"""``tether ui``: the memory browser page on 127.0.0.1, behind a one-time login URL."""

from __future__ import annotations

import asyncio
import webbrowser

import click

from tether.cli.context import Context, pass_ctx
from tether.cli.ui_page import ui_services


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
