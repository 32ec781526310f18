"""``tether init`` and ``tether config check``."""

from __future__ import annotations

import click

from tether.cli.context import Context, counted, pass_ctx
from tether.config import CONFIG_FILE
from tether.core.sweep.state import Owner
from tether.errors import TetherError
from tether.home import init_home
from tether.scan.allow import ALLOW_FILE, BLOCKLIST_FILE, home_allow, home_blocklist


@click.command("init")
@pass_ctx
def init_cmd(ctx: Context) -> None:
    """Create the home with tether.toml and the starter prompts (never overwrites)."""
    home = ctx.home
    report = init_home(home)
    for rel in report.created:
        click.echo(f"created {home / rel}")
    for rel in report.kept:
        click.echo(f"kept    {home / rel} (exists; not overwritten)")
    if report.tightened:
        click.echo(f"made {counted(report.tightened, 'path')} private (folders 0700, files 0600)")
    owner = _home_owner(ctx)
    click.echo(f"home owner {owner.id} ({owner.timezone_name}; `tether owner set-tz` changes it)")
    _context_warning(ctx)
    click.echo(f"home ready: {home}")


def _home_owner(ctx: Context) -> Owner:
    """The home's owner, made with this machine's zone when there is none yet."""
    from tether.sweep.owners import home_owner

    with ctx.sweep_store() as store:
        return home_owner(store, ctx.now())


def _context_warning(ctx: Context) -> None:
    """Warn (stderr, exit unchanged) when ``[expect] n_ctx`` is past what the embedded
    model was trained on."""
    from tether.llm.gguf import config_warning

    try:
        warning = config_warning(ctx.config())
    except TetherError:
        return  # a broken tether.toml is `config check`'s to report
    if warning:
        click.echo(f"warning: {warning}", err=True)


@click.group("config")
def config_group() -> None:
    """Inspect the configuration."""


@config_group.command("check")
@pass_ctx
def config_check(ctx: Context) -> None:
    """Validate tether.toml (unknown keys, wrong types and bad values exit 2), and the
    scan files .tether-scan-allow and .tether-scan-blocklist when they exist."""
    ctx.config()
    click.echo(f"ok: {ctx.home / CONFIG_FILE}")
    _context_warning(ctx)
    home = ctx.home
    for name, load in ((ALLOW_FILE, home_allow), (BLOCKLIST_FILE, home_blocklist)):
        if (home / name).exists():
            load(home)
            click.echo(f"ok: {home / name}")


COMMANDS = [init_cmd, config_group]
