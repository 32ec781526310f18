"""``tether serve`` and ``tether chat``."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from tether.cli.context import Context, FreeTextCommand, pass_ctx
from tether.errors import BadInputError
from tether.ids import session_id

if TYPE_CHECKING:
    from tether.daemon.api import DaemonClient
    from tether.daemon.replies import CompactReply, TurnReply

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
        from tether.cli.commands_ui import ui_beside

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


class _InProcess:
    """Runs turns in this process when no daemon is serving the home, answering with the
    records the daemon would send (built by the same functions)."""

    def __init__(self, ctx: Context) -> None:
        from tether.daemon.compose import build_runtime

        self.runtime = build_runtime(ctx.home, ctx.config(), app=ctx.app)
        self.loop = asyncio.new_event_loop()
        self.due: set[str] = set()

    def turn(self, session: str, text: str) -> TurnReply:
        from tether.daemon.replies import turn_reply

        done = self.loop.run_until_complete(self.runtime.agent.run_turn(session, text))
        self.due.discard(session)
        if done.compact_due:
            self.due.add(session)
        return turn_reply(done)

    def after_turn(self, session: str) -> None:
        """Compact when the last turn said the session is due, as the daemon does after
        each turn, without re-reading the session's logs to find out. Apart from ``turn``
        so that the reply is printed before the compaction starts."""
        if session in self.due:
            self.loop.run_until_complete(self.runtime.agent.compact_if_due(session))

    def compact(self, session: str) -> CompactReply:
        from tether.daemon.replies import compact_reply

        done = self.loop.run_until_complete(self.runtime.agent.compact_now(session))
        return compact_reply(done)

    def close(self) -> None:
        self.loop.run_until_complete(self.runtime.aclose())
        self.loop.close()


if TYPE_CHECKING:
    #: Where the CLI's turns and compactions run: both answer with the records of
    #: ``daemon.replies``, and ``open_backend`` is the one place that picks one.
    Backend = DaemonClient | _InProcess


#: Where ``_note_cold_start`` remembers it has said its piece, in the home's run folder.
COLD_START_NOTED = "in-process-chat.noted"


def _note_cold_start(ctx: Context) -> None:
    """Say once per home why a chat without a daemon is slow: with the embedded backend each
    ``tether chat`` loads the model in its own process and starts cold (6 to 39 s a turn on
    2 cores, against about 2.6 s warm through ``tether serve``)."""
    marker = ctx.home / "run" / COLD_START_NOTED
    if marker.exists():
        return
    click.echo(
        "tether: note: no `tether serve` answers for this home, so this chat loads the "
        "embedded model in this process and every turn starts cold (seconds to tens of "
        "seconds); run `tether serve` in another terminal to keep it warm. "
        "(Said once for this home.)",
        err=True,
    )
    marker.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    marker.touch()


@contextmanager
def open_backend(ctx: Context) -> Iterator[Backend]:
    """The daemon if one serves the home, else this process: the one place that chooses."""
    from tether.daemon.api import DaemonClient

    config = ctx.config()
    client = DaemonClient(ctx.home, timeout_s=config.llm.timeout_s * config.tools.step_limit)
    backend: Backend
    if client.alive():
        backend = client
    else:
        client.close()
        if config.llm.backend == "embedded":
            _note_cold_start(ctx)
        backend = _InProcess(ctx)
    try:
        yield backend
    finally:
        backend.close()


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
