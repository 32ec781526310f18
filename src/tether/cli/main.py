"""``tether``: the command-line entry point.

Exit codes: 0 done, 1 failed, 2 bad usage or bad input. A TetherError is printed as one
line on stderr, never as a traceback; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from tether.cli import (
    commands_agent,
    commands_demo,
    commands_doctor,
    commands_home,
    commands_index,
    commands_jobs,
    commands_llm,
    commands_memory,
    commands_session,
    commands_sweep,
)
from tether.cli.context import Context
from tether.errors import TetherError


class TetherGroup(click.Group):
    """A group that turns TetherError, and a command line click cannot parse, into one
    line on stderr and its exit code."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:  # the top level's own options (`tether --hmoe`)
            _usage_error(exc, info_name or "tether")
            sys.exit(exc.exit_code)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TetherError as exc:
            click.echo(f"tether: error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except click.UsageError as exc:
            _usage_error(exc, ctx.command_path)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("tether: interrupted", err=True)
            ctx.exit(130)


#: click >= 8.2 raises this when a group is given no command (8.1 prints the help itself).
_NO_ARGS_IS_HELP: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _usage_error(exc: click.UsageError, command_path: str) -> None:
    """One line for a command line click cannot parse (click's own is four: usage, hint,
    blank, error), saying where the help is."""
    if isinstance(exc, _NO_ARGS_IS_HELP):  # `tether` or `tether sweep` alone: the help
        exc.show()
        return
    where = exc.ctx.command_path if exc.ctx is not None else command_path
    click.echo(f"tether: error: {exc.format_message()} (see '{where} --help')", err=True)


@click.group(cls=TetherGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home",
    "home_option",
    metavar="DIR",
    help="The tether home (default: $TETHER_HOME, else ~/.tether).",
)
@click.version_option(package_name="tether")
@click.pass_context
def cli(ctx: click.Context, home_option: str | None) -> None:
    """tether: a memory for long-lived LLM agents."""
    ctx.obj = Context(home_option)


@click.group("memory")
def memory_group() -> None:
    """Search and edit the agent's memory."""


# A module exports COMMANDS (top level) and may export MEMORY_COMMANDS (under `memory`).
for _module in (
    commands_home,
    commands_session,
    commands_agent,
    commands_index,
    commands_memory,
    commands_llm,
    commands_jobs,
    commands_sweep,
    commands_doctor,
    commands_demo,
):
    for _command in _module.COMMANDS:
        cli.add_command(_command)
    for _command in getattr(_module, "MEMORY_COMMANDS", ()):
        memory_group.add_command(_command)
cli.add_command(memory_group)


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="tether")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
