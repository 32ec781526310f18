"""Where the CLI's turns and compactions run (``tether chat``, ``tether session
compact``): the daemon when one serves the home, else this process; ``open_backend`` is
the one place that chooses."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from tether.cli.context import Context

if TYPE_CHECKING:
    from tether.daemon.api import DaemonClient
    from tether.daemon.replies import CompactReply, TurnReply


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
