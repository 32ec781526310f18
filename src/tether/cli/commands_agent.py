"""``tether serve`` and ``tether chat``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from tether.cli.backend import open_backend
from tether.cli.context import Context, FreeTextCommand, pass_ctx
from tether.errors import BadInputError
from tether.ids import session_id

if TYPE_CHECKING:
    from tether.daemon.replies import TurnReply

DEFAULT_SESSION = "chat"


@click.command("serve")
@click.option("--ui", is_flag=True, help="Serve the memory browser page too (see `tether ui`).")
@click.option(
    "--ui-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="With --ui: its port on 127.0.0.1 (default 8431; 0 picks a free one).",
)
@pass_ctx
def serve_cmd(ctx: Context, ui: bool, ui_port: int | None) -> None:
    """Run the daemon: owns inference, the busy set and the slot gates; answers a local
    API on <home>/run/tether.sock. Stop it with Ctrl-C or SIGTERM."""
    from tether.daemon.serve import Beside, run
    from tether.home import ensure_private

    _say_tightened(ctx, ensure_private(ctx.home))  # a lax home: as `tether init` would
    beside = None
    if ui:
        from tether.cli.ui_page import ui_beside

        beside = Beside(*ui_beside(ctx, ui_port))
    elif ui_port is not None:
        raise click.UsageError("--ui-port goes with --ui")
    run(ctx.home, ctx.config(), beside, app=ctx.app)  # one application: the daemon's, the page's


def _say_tightened(ctx: Context, changed: int) -> None:
    if changed:
        click.echo(
            f"tether: made {changed} path{'s' if changed != 1 else ''} of {ctx.home} private "
            "(folders 0700, files 0600)",
            err=True,
        )


def _utf8(text: str) -> bool:
    """Whether ``text`` came in as UTF-8 (stdin keeps other bytes as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _print_turn(reply: TurnReply, verbose: bool) -> None:
    click.echo(reply.reply)
    if verbose:
        usage = reply.usage
        cache_n = None if usage is None else usage.cache_n
        prompt_n = None if usage is None else usage.prompt_n
        click.echo(
            f"[session {reply.session} turn {reply.turn} epoch {reply.epoch} "
            f"slot {reply.slot} cache_n {cache_n} prompt_n "
            f"{prompt_n}{' untrusted' if reply.untrusted else ''}]",
            err=True,
        )


@click.command("chat", cls=FreeTextCommand)
@click.option(
    "--session",
    "sid",
    default=DEFAULT_SESSION,
    show_default=True,
    help="Session id ([a-z0-9-]{1,64}); created on first use.",
)
@click.option("-v", "--verbose", is_flag=True, help="Print epoch, slot and cache use per turn.")
@click.argument("text", required=False)
@pass_ctx
def chat_cmd(ctx: Context, sid: str, verbose: bool, text: str | None) -> None:
    """Chat with the agent. With TEXT, one turn; without, a REPL (Ctrl-D or /exit ends it).

    Goes through the daemon when one serves this home, otherwise runs in this process. A
    turn on a session that is busy waits for it.
    """
    session_id(sid)
    from tether.home import ensure_private

    _say_tightened(ctx, ensure_private(ctx.home))
    with open_backend(ctx) as backend:
        if text is not None:
            _print_turn(backend.turn(sid, text), verbose)
            backend.after_turn(sid)
            return
        # Prompts only for a person at a terminal: piped input gets replies alone on stdout.
        prompt = "you> " if sys.stdin.isatty() else ""
        if prompt:
            click.echo(f"tether chat: session {sid}. Ctrl-D or /exit to leave.", err=True)
        number = 0
        while True:
            try:
                line = input(prompt)
            except EOFError:
                click.echo("", err=True)
                return
            number += 1
            if not _utf8(line):
                raise BadInputError(f"<stdin>: line {number} is not UTF-8 text")
            if line.strip() in {"/exit", "/quit"}:
                return
            if not line.strip():
                continue
            _print_turn(backend.turn(sid, line), verbose)
            backend.after_turn(sid)


COMMANDS = [serve_cmd, chat_cmd]
