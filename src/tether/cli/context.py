"""What every command gets: the home it works on, its application (config, stores,
vectors, each opened once) and the clock."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click
import msgspec

from tether.config import Config
from tether.daemon.app import App, SystemClock
from tether.home import resolve_home

if TYPE_CHECKING:  # every command imports this module: what only some need loads on use
    from tether.memory.vectors import Vectors
    from tether.ports import Clock, Store, SweepStore
    from tether.scan.screen import Screened


@dataclass
class Context:
    """The home a command works on, and its application (``daemon.app.App``): the one
    place its config, stores and vectors are opened, each once on first use, and closed
    when the command ends (``cli.main`` closes it); and its clock."""

    home_option: str | None
    #: The time every command reads (``now``): the wall clock, or the one a test's child
    #: process runs at (``tether.testing.cli``).
    clock: Clock = field(default_factory=SystemClock)
    _app: App | None = field(default=None, init=False, repr=False)

    @property
    def home(self) -> Path:
        home = resolve_home(self.home_option)
        if home.exists() and not home.is_dir():
            from tether.errors import BadInputError

            raise BadInputError(
                f"{home}: not a folder (the home is named by --home, else TETHER_HOME, "
                "else ~/.tether)"
            )
        return home

    @property
    def app(self) -> App:
        """The home's application, made on first use (it opens nothing until asked)."""
        if self._app is None:
            self._app = App(self.home, clock=self.clock)
        return self._app

    def now(self) -> datetime:
        """The time (UTC), as every command reads it."""
        return self.clock.now()

    def config(self) -> Config:
        return self.app.config

    @contextlib.contextmanager
    def store(self) -> Iterator[Store]:
        """The home's store, opened as ``[store]`` says (once: the application keeps it
        until the command ends)."""
        yield self.app.store()

    def sweep_reader(self) -> AbstractContextManager[SweepStore]:
        """The home's sweep store as a reader, for what recall and the memory scan read of
        the sweep (its facts, its cells): a home the sweep never ran in is left without the
        sweep's tables."""
        return self.sweep_store(migrate=False)

    @contextlib.contextmanager
    def sweep_store(self, *, migrate: bool = True) -> Iterator[SweepStore]:
        """The home's sweep store (its tables made when ``migrate``), kept by the
        application until the command ends."""
        yield self.app.sweep(migrate=migrate)

    def vectors(self) -> Vectors | None:
        """Recall's vectors as ``[recall] vectors`` says (None: lexical), opened once."""
        return self.app.vectors()

    def close(self) -> None:
        """Close what the command opened (``cli.main``, when the command ends)."""
        if self._app is not None:
            self._app.close()

    def screen(self, text: str, *, what: str, redact: bool) -> Screened:
        """``text`` on its way into durable memory: refused (exit 2) when it holds a
        secret the home's allow-list does not allow, or, with ``redact``, redacted with
        a line on stderr saying so."""
        from tether.scan.allow import ALLOW_FILE, load_allow_file
        from tether.scan.screen import screen

        path = self.home / ALLOW_FILE
        out = screen(
            text,
            what=what,
            allow=load_allow_file(path),
            on_secret="redact" if redact else "refuse",
            allow_file=str(path),
        )
        if out.redacted:
            click.echo(f"{what}: {out.note()}", err=True)
        return out


pass_ctx = click.make_pass_decorator(Context)


def shown(text: str) -> str:
    """``text`` as tether prints it when it quotes what it was given (an error, a warning, a
    usage line): every secret redacted, so a key pasted in the wrong place never reaches a
    terminal's scrollback, a hook log or a CI log in clear; a URL's userinfo too."""
    from tether.scan.urls import shown_url  # on use: only a command that fails pays for it

    return shown_url(text)


class FreeTextCommand(click.Command):
    """A command whose argument is free text (a message, a note, a question).

    Text that starts with ``-`` but holds white space (a pasted PEM key, "- a list item")
    is taken as the text, never as an option: it is moved behind a ``--``. A word that
    starts with ``-`` and is no option of the command gets an error saying to put ``--``
    before it. Options, and the values they take, are left where they are.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        takes_value = set()
        known = set()
        for param in self.get_params(ctx):
            if isinstance(param, click.Option):
                names = [*param.opts, *param.secondary_opts]
                known.update(names)
                if not param.is_flag and not param.count:
                    takes_value.update(param.opts)
        kept: list[str] = []
        texts: list[str] = []
        value_next = False
        for i, arg in enumerate(args):
            if arg == "--":
                kept.extend(args[i:])
                break
            if value_next:
                kept.append(arg)
                value_next = False
            elif (
                arg.startswith("-")
                and arg.split("=", 1)[0] not in known
                and any(ch.isspace() for ch in arg)
            ):
                texts.append(arg)
            else:
                kept.append(arg)
                value_next = arg in takes_value
        if texts:
            kept = [*kept, *([] if "--" in kept else ["--"]), *texts]
        try:
            return super().parse_args(ctx, kept)
        except click.NoSuchOption as exc:
            raise click.UsageError(
                f"{exc.format_message()} (for text that starts with '-', put -- before it)",
                ctx,
            ) from exc


#: ``--redact`` for the commands that write durable memory (see ``Context.screen``).
redact_option = click.option(
    "--redact",
    is_flag=True,
    help="Store secrets found in the text as [REDACTED:<rule>] instead of refusing it.",
)


def counted(count: int, one: str, many: str | None = None) -> str:
    """``count`` with the noun agreeing: "1 entry", "2 entries" (``many`` defaults to one + s)."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


def utc_stamp(time: datetime) -> str:
    """A time as commands print it: UTC to the second, ``2026-11-01T12:00:00Z``."""
    return time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def echo_change(before: str | None, after: str | None) -> None:
    """The indented before/after lines under a journal entry (each only when it exists)."""
    if before is not None:
        click.echo(f"    before: {before}")
    if after is not None:
        click.echo(f"    after:  {after}")


def echo_json(value: object) -> None:
    """``--json`` output: one JSON document on stdout."""
    click.echo(msgspec.json.encode(value).decode())
