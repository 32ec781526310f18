"""``tether setup claude-code|codex``: the hooks and the MCP server, in one command.

The work is ``harnesses.setup``; this prints what changed, file by file, and how to undo
it. Every file is checked before any is written: a refusal (exit 2) leaves all of them as
they were.
"""

from __future__ import annotations

import shlex

import click

from tether.cli.context import Context, pass_ctx
from tether.cli.install import CODEX_NOTE, explicit_home, project_dir


@click.group("setup")
def setup_group() -> None:
    """Connect a harness to tether: its hooks (banking at PreCompact, the backstop at
    PostCompact, the context pack at SessionStart, SessionEnd's capture) and `tether mcp`
    as its MCP server. Twice changes nothing; --uninstall removes exactly what it added."""


def _options(func: click.decorators.FC) -> click.decorators.FC:
    func = click.option(
        "--uninstall", is_flag=True, help="Remove exactly the hooks and the server it added."
    )(func)
    func = click.option("--user", is_flag=True, help="The user's files instead of a project's.")(
        func
    )
    return click.option(
        "--project", metavar="DIR", help="The project's files (default: this folder)."
    )(func)


def _run(ctx: Context, harness: str, project: str | None, user: bool, uninstall: bool) -> None:
    from tether.harnesses.setup import setup

    edits = setup(harness, project_dir(project, user), explicit_home(ctx), uninstall=uninstall)
    for edit in edits:
        if not edit.changed:
            click.echo(f"{edit.what}: nothing to change in {edit.path}")
        elif edit.data is None:
            click.echo(f"{edit.what}: removed {edit.path} (nothing else was in it)")
        else:
            verb = "removed from" if uninstall else "set in"
            click.echo(f"{edit.what}: {verb} {edit.path}")
    if uninstall:
        return
    scope = "--user" if user else f"--project {shlex.quote(str(project_dir(project, user)))}"
    click.echo(f"undo with: tether setup {harness} {scope} --uninstall")
    if harness == "codex":
        click.echo(CODEX_NOTE, err=True)
    else:
        click.echo(
            "claude-code: restart Claude Code; a project's .mcp.json server is approved once"
            " (claude's /mcp)",
            err=True,
        )


@setup_group.command("claude-code")
@_options
@pass_ctx
def setup_claude_code(ctx: Context, project: str | None, user: bool, uninstall: bool) -> None:
    """Claude Code: hooks in .claude/settings.json, the server in .mcp.json (with --user:
    ~/.claude/settings.json and ~/.claude.json)."""
    _run(ctx, "claude-code", project, user, uninstall)


@setup_group.command("codex")
@_options
@pass_ctx
def setup_codex(ctx: Context, project: str | None, user: bool, uninstall: bool) -> None:
    """Codex: hooks in .codex/hooks.json, the server as [mcp_servers.tether] in
    .codex/config.toml (with --user: $CODEX_HOME, else ~/.codex)."""
    _run(ctx, "codex", project, user, uninstall)


COMMANDS = [setup_group]
