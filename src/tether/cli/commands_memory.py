"""``tether memory show|journal|add|remove|note`` (the owner's view and edits)."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from tether.cli.context import (
    Context,
    counted,
    echo_change,
    echo_json,
    pass_ctx,
    redact_option,
    utc_stamp,
)
from tether.memory.identity import Identity
from tether.memory.notes import write_note


def _now() -> datetime:
    return datetime.now(UTC)


@click.command("show")
@pass_ctx
def show_cmd(ctx: Context) -> None:
    """Identity entries (with the [id]s edits use) and notes."""
    with ctx.store() as store:
        identity = Identity(ctx.home, store)
        entries = identity.entries()
        click.echo(f"identity ({identity.path}): {counted(len(entries), 'entry', 'entries')}")
        for e in entries:
            click.echo(f"  [{e.id}] {e.text}")
        notes = store.notes()
        click.echo(f"notes: {len(notes)}")
        for n in notes:
            trust = "untrusted" if n.untrusted else "trusted"
            origin = f" from {n.session}" if n.session else ""
            click.echo(f"  {n.id:>4} {trust:<9} {n.time:%Y-%m-%d}{origin}: {n.text}")


@click.command("journal")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@click.option("-n", "limit", type=click.IntRange(1), default=None, help="Only the newest N.")
@pass_ctx
def journal_cmd(ctx: Context, as_json: bool, limit: int | None) -> None:
    """Every memory write: when, who, from which session, before and after."""
    with ctx.store() as store:
        entries = store.journal(limit)
    if as_json:
        echo_json(entries)
        return
    for j in entries:
        where = f" session={j.session}" if j.session else ""
        click.echo(f"{utc_stamp(j.time)} {j.who}{where} {j.action} {j.target}")
        echo_change(j.before, j.after)


@click.command("add")
@click.argument("text")
@redact_option
@pass_ctx
def add_cmd(ctx: Context, text: str, redact: bool) -> None:
    """Add an identity entry (lands in each session's baseline at its next epoch).

    TEXT holding a secret (an API key, a private key, a password assignment) is refused
    unless --redact is given."""
    screened = ctx.screen(text, what="identity entry", redact=redact)
    with ctx.store() as store:
        e = Identity(ctx.home, store).add(screened, who="owner", session=None, time=_now())
    click.echo(f"added [{e.id}] {e.text}")


@click.command("remove")
@click.argument("ids", nargs=-1, required=True)
@pass_ctx
def remove_cmd(ctx: Context, ids: tuple[str, ...]) -> None:
    """Remove identity entries by [id] (see `tether memory show`)."""
    with ctx.store() as store:
        gone = Identity(ctx.home, store).remove(list(ids), who="owner", session=None, time=_now())
    for e in gone:
        click.echo(f"removed [{e.id}] {e.text}")


@click.command("note")
@click.argument("text")
@redact_option
@pass_ctx
def note_cmd(ctx: Context, text: str, redact: bool) -> None:
    """Write a trusted note (found by recall; the tiering job may promote it).

    TEXT holding a secret is refused unless --redact is given."""
    if not text.strip():
        raise click.BadParameter("a note needs some text", param_hint="TEXT")
    screened = ctx.screen(text, what="note", redact=redact)
    with ctx.store() as store:
        now = _now()
        note = write_note(store, screened, untrusted=False, who="owner", session=None, time=now)
    click.echo(f"wrote note {note.id}")


MEMORY_COMMANDS = [show_cmd, journal_cmd, add_cmd, remove_cmd, note_cmd]
COMMANDS: list[click.Command] = []
