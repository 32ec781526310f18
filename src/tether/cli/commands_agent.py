"""``tether serve`` and ``tether chat``."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import click

from tether.cli.context import Context, pass_ctx
from tether.ids import session_id

DEFAULT_SESSION = "chat"


@click.command("serve")
@pass_ctx
def serve_cmd(ctx: Context) -> None:
    """Run the daemon: owns inference, the busy set and the slot gates; answers a local
    API on <home>/run/tether.sock. Stop it with Ctrl-C or SIGTERM."""
    from tether.daemon.serve import run

    run(ctx.home, ctx.config())


def _print_turn(body: dict[str, Any], verbose: bool) -> None:
    click.echo(body["reply"])
    if verbose:
        usage = body.get("usage") or {}
        click.echo(
            f"[session {body['session']} turn {body['turn']} epoch {body['epoch']} "
            f"slot {body['slot']} cache_n {usage.get('cache_n')} prompt_n "
            f"{usage.get('prompt_n')}{' untrusted' if body['untrusted'] else ''}]",
            err=True,
        )


class _InProcess:
    """Runs turns in this process when no daemon is serving the home."""

    def __init__(self, ctx: Context) -> None:
        from tether.daemon.compose import build_runtime

        self.runtime = build_runtime(ctx.home, ctx.config())
        self.loop = asyncio.new_event_loop()
        self.due: set[str] = set()

    def turn(self, session: str, text: str) -> dict[str, Any]:
        from tether.daemon.api import turn_json

        done = self.loop.run_until_complete(self.runtime.agent.run_turn(session, text))
        self.due.discard(session)
        if done.compact_due:
            self.due.add(session)
        return turn_json(done)

    def compact_if_due(self, sid: str) -> None:
        """After a turn: compact when that turn said the session is due (the daemon does
        the same), without re-reading the session's logs to find out."""
        if sid in self.due:
            self.loop.run_until_complete(self.runtime.agent.compact_if_due(sid))

    def compact(self, sid: str) -> dict[str, Any]:
        from tether.daemon.api import compaction_json

        return compaction_json(self.loop.run_until_complete(self.runtime.agent.compact_now(sid)))

    def close(self) -> None:
        self.loop.run_until_complete(self.runtime.aclose())
        self.loop.close()


def with_backend(ctx: Context, action: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """Run ``action`` against the daemon if one serves the home, else in this process."""
    from tether.daemon.api import DaemonClient

    config = ctx.config()
    client = DaemonClient(ctx.home, timeout_s=config.llm.timeout_s * config.tools.step_limit)
    try:
        if client.alive():
            return action(client)
        in_process = _InProcess(ctx)
        try:
            return action(in_process)
        finally:
            in_process.close()
    finally:
        client.close()


@click.command("chat")
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
    from tether.daemon.api import DaemonClient

    session_id(sid)
    config = ctx.config()
    client = DaemonClient(ctx.home, timeout_s=config.llm.timeout_s * config.tools.step_limit)
    in_process: _InProcess | None = None
    try:
        if client.alive():
            turn = client.turn
        else:
            in_process = _InProcess(ctx)
            turn = in_process.turn
        if text is not None:
            _print_turn(turn(sid, text), verbose)
            if in_process is not None:
                in_process.compact_if_due(sid)  # the daemon does this after each turn
            return
        # Prompts only for a person at a terminal: piped input gets replies alone on stdout.
        prompt = "you> " if sys.stdin.isatty() else ""
        if prompt:
            click.echo(f"tether chat: session {sid}. Ctrl-D or /exit to leave.", err=True)
        while True:
            try:
                line = input(prompt)
            except EOFError:
                click.echo("", err=True)
                return
            if line.strip() in {"/exit", "/quit"}:
                return
            if not line.strip():
                continue
            _print_turn(turn(sid, line), verbose)
            if in_process is not None:
                in_process.compact_if_due(sid)
    finally:
        client.close()
        if in_process is not None:
            in_process.close()


COMMANDS = [serve_cmd, chat_cmd]
