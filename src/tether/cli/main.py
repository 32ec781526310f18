"""``tether``: the command-line entry point.

Exit codes: 0 done, 1 failed, 2 bad usage or bad input. A TetherError is printed as one
line on stderr, never as a traceback; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from tether.cli.context import Context, shown
from tether.errors import DiskFullError, TetherError
from tether.home import PRIVATE_UMASK

if TYPE_CHECKING:
    from tether.ports import Clock

#: Where each command is: its name -> the module of ``tether.cli`` that has it in
#: ``COMMANDS`` (top level) or ``MEMORY_COMMANDS`` (under ``memory``): one module per
#: group of the command tree (``memory recall`` and ``reindex`` are in ``commands_recall``, the
#: other ``memory ...`` commands in ``commands_memory``).
#: A module is imported when one of its commands runs (or for ``--help``), so a command
#: loads what it needs and no more: ``tether memory recall`` starts in half the time it
#: took with every module imported (benchmarks/cli_startup.py).
COMMANDS: Mapping[str, str] = {
    "init": "commands_home",
    "config": "commands_home",
    "session": "commands_session",
    "serve": "commands_agent",
    "chat": "commands_agent",
    "sessions": "commands_sessions",
    "fake-llm": "commands_llm",
    "jobs": "commands_jobs",
    "owner": "commands_sweep",
    "sweep": "commands_sweep",
    "doctor": "commands_doctor",
    "page": "commands_page",
    "compile-context": "commands_views",
    "demo": "commands_demo",
    "usage": "commands_usage",
    "hook": "commands_hook",
    "context-pack": "commands_hook",
    "transcripts": "commands_hook",
    "ui": "commands_ui",
    "mcp": "commands_mcp",
    "store": "commands_store",
    "setup": "commands_setup",
}
MEMORY_COMMANDS: Mapping[str, str] = {
    "recall": "commands_recall",
    "reindex": "commands_recall",
    "show": "commands_memory",
    "journal": "commands_memory",
    "add": "commands_memory",
    "remove": "commands_memory",
    "note": "commands_memory",
    "scan": "commands_memory",
    "tiers": "commands_memory",
}


#: What ``--help`` lists for each command before its module is imported: the first
#: paragraph of its help, which click shortens to the terminal the same way. So ``tether
#: --help`` imports no command module (tests/test_cli_foundation.py checks these against
#: the commands and the output against the help with every module imported).
SUMMARIES: Mapping[str, str] = {
    "chat": "Chat with the agent. With TEXT, one turn; without, a REPL (Ctrl-D or /exit ends it).",
    "compile-context": (
        "Compile the owner's world-visible pages into a context file another harness loads."
    ),
    "config": "Inspect the configuration.",
    "context-pack": (
        "Print the context pack (what SessionStart injects) for the pull protocol: Codex,"
        " opencode, any harness that reads it after a compaction."
    ),
    "demo": (
        "Watch tether work with no server: owner turns, a memory edit, compaction into epoch 1,"
        " a heartbeat on the background slot, and a recall from epoch 0 (needs tether[local];"
        " well under a minute)."
    ),
    "doctor": (
        "Check the inference backend: model, per-slot context, whether it answers. Exits 1 when"
        " the backend is unusable."
    ),
    "fake-llm": (
        "Run a fake llama-server (slots, cache accounting, context-full errors) for trying"
        " tether with no model. Replies are deterministic echoes unless scripted."
    ),
    "hook": (
        "Harness hooks: install them, and the hooks themselves (stdin: the harness's JSON;"
        " they always exit 0 and never block the harness)."
    ),
    "init": "Create the home with tether.toml and the starter prompts (never overwrites).",
    "jobs": "Cron jobs: <home>/jobs/<name>.toml, run by `tether serve`.",
    "mcp": (
        "Serve the memory to an MCP client: stdio (the trusted local lane) or, with --http,"
        " streamable HTTP for remote clients with a bearer token (world-visibility pages and"
        " facts only)."
    ),
    "owner": "Owners of memory: zone, generations, deletion.",
    "page": (
        "Memory pages: longer notes under a slug (people/ada), found by recall and read by the"
        " agent with page_read tether://SLUG."
    ),
    "serve": (
        "Run the daemon: owns inference, the busy set and the slot gates; answers a local API on"
        " <home>/run/tether.sock. Stop it with Ctrl-C or SIGTERM."
    ),
    "session": "Inspect sessions.",
    "sessions": "Bring sessions in from elsewhere.",
    "store": "The store: SQLite in the home, or a shared PostgreSQL database ([store] url).",
    "setup": (
        "Connect a harness to tether: its hooks (banking at PreCompact, the backstop at"
        " PostCompact, the context pack at SessionStart, SessionEnd's capture) and `tether mcp`"
        " as its MCP server. Twice changes nothing; --uninstall removes exactly what it added."
    ),
    "sweep": "The daily memory sweep.",
    "transcripts": (
        "Harness transcripts into the corpus, and their facts (the owner's explicit lane)."
    ),
    "ui": (
        "Browse memory in a local page: sessions and their epochs, recall, identity and notes,"
        " facts, the journals, the sweep, jobs and usage; edit identity from it."
    ),
    "usage": (
        "Tokens and estimated cost of model calls per job kind, day or session, with the main"
        " slot's cache hit share."
    ),
}
MEMORY_SUMMARIES: Mapping[str, str] = {
    "add": "Add an identity entry (lands in each session's baseline at its next epoch).",
    "journal": "Every memory write, the sweep's too: when, which journal, who, before and after.",
    "note": "Write a trusted note (found by recall; the tiering job may promote it).",
    "recall": "Search memory (every epoch of every session, notes, pages, identity, facts).",
    "reindex": "Drop the index of session logs and build it again from the files.",
    "remove": "Remove identity entries by [id] (see `tether memory show`).",
    "scan": (
        "Find secrets already in durable memory: memory.md, notes, pages, the journals, sweep"
        " facts, triggers and staged packets. Exit 1 while any is left in clear."
    ),
    "show": "Identity entries (with the [id]s edits use) and notes.",
    "tiers": (
        "Identity entries and the most recalled notes with how often recall found each and"
        " when last (what the tiering job reads); untrusted notes are marked, and a last line"
        " says how many notes were left out."
    ),
}


def lazy_command(module: str, name: str, table: str) -> click.Command:
    """The command ``name`` from ``tether.cli.<module>``'s list ``table``."""
    commands = getattr(importlib.import_module(f"tether.cli.{module}"), table)
    found = [c for c in commands if c.name == name]
    if len(found) != 1:  # the tables above and the module disagree: a bug, not a user's
        raise LookupError(f"tether.cli.{module}.{table} has no single command {name!r}")
    command: click.Command = found[0]
    return command


class LazyGroup(click.Group):
    """A group whose commands, named in ``lazy`` (name -> module), are imported on use."""

    def __init__(
        self,
        *args: Any,
        lazy: Mapping[str, str],
        table: str,
        summaries: Mapping[str, str],
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy
        self.table = table
        self.summaries = summaries

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(lazy_command(self.lazy[cmd_name], cmd_name, self.table))
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing of the commands, with a command whose module is not loaded yet
        shown by its summary (shortened as click shortens a help) instead of importing it."""
        rows: list[tuple[str, str | None]] = []
        for name in self.list_commands(ctx):
            loaded = self.commands.get(name)
            if loaded is None and name in self.summaries:
                rows.append((name, self.summaries[name]))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, None))
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        shown = []
        for name, summary in rows:
            if summary is None:
                command = self.get_command(ctx, name)
                assert command is not None  # listed just above
                shown.append((name, command.get_short_help_str(limit)))
            else:  # a stand-in with the same help, so click shortens it as it would the real one
                shown.append((name, click.Command(name, help=summary).get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(shown)


class TetherGroup(LazyGroup):
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
            click.echo(f"tether: error: {shown(str(exc))}", err=True)
            ctx.exit(exc.exit_code)
        except OSError as exc:
            from tether.files import is_disk_full  # on use: only a failed command pays

            if not is_disk_full(exc):
                raise  # anything else is a bug: its traceback is kept
            where = exc.filename or (ctx.obj.home_option if ctx.obj is not None else None)
            full = DiskFullError(where or "the home's disk")
            click.echo(f"tether: error: {shown(str(full))}", err=True)
            ctx.exit(full.exit_code)
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
    message = shown(exc.format_message())
    click.echo(f"tether: error: {message} (see '{where} --help')", err=True)


@click.group(
    cls=TetherGroup,
    lazy=COMMANDS,
    table="COMMANDS",
    summaries=SUMMARIES,
    context_settings={"help_option_names": ["-h", "--help"]},
)
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
    # ``main(clock=)`` hands a clock in as the root's obj (``tether.testing.cli``).
    clock = ctx.obj
    ctx.obj = Context(home_option) if clock is None else Context(home_option, clock=clock)
    ctx.call_on_close(ctx.obj.close)  # what the command opened, closed once at its end


@cli.group(
    "memory",
    cls=LazyGroup,
    lazy=MEMORY_COMMANDS,
    table="MEMORY_COMMANDS",
    summaries=MEMORY_SUMMARIES,
)
def memory_group() -> None:
    """Search and edit the agent's memory."""


def _not_utf8(args: list[str]) -> int | None:
    """The 1-based position of the first argument that is not UTF-8 (Python keeps its
    bytes as lone surrogates, which no text tether stores can hold), or None."""
    for n, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            return n
    return None


def main(argv: list[str] | None = None, *, clock: Clock | None = None) -> None:
    """The command line ``argv`` (else ``sys.argv``); ``clock``: the time its command
    reads instead of the wall clock (tests' child processes, ``tether.testing.cli``)."""
    os.umask(PRIVATE_UMASK)  # what any command creates in the home is the owner's alone
    args = sys.argv[1:] if argv is None else argv
    bad = _not_utf8(args)
    if bad is not None:  # the argument itself is not echoed: it may be half a secret
        click.echo(f"tether: error: argument {bad} is not UTF-8 text", err=True)
        sys.exit(2)
    cli.main(args=args, prog_name="tether", obj=clock)


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
