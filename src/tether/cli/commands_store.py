"""``tether store migrate``: bring the store (SQLite in the home, or the owner's schema in
PostgreSQL) to the schema this tether knows.

Idempotent: a store already there is left as it is. Two processes migrating at once take
turns (SQLite's write lock; PostgreSQL's advisory lock on the owner's schema) and the
second finds nothing to do. A store migrated by a newer tether is refused unchanged
(exit 2).
"""

from __future__ import annotations

import click
import msgspec

from tether.cli.context import Context, echo_json, pass_ctx


@click.group("store")
def store_group() -> None:
    """The store: SQLite in the home, or a shared PostgreSQL database ([store] url)."""


@store_group.command("migrate")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_ctx
def migrate_cmd(ctx: Context, as_json: bool) -> None:
    """Apply the store's numbered migrations (idempotent; safe when two run at once)."""
    info = ctx.app.store_info()
    if as_json:
        echo_json(msgspec.to_builtins(info))
        return
    owner = f" (owner {info.owner})" if info.owner else ""
    click.echo(f"store: {info.backend} {info.where}{owner}, server {info.server_version}")
    click.echo(f"schema: level {info.level} of {info.known}")
    if info.sweep_level is not None:
        click.echo(f"sweep schema: level {info.sweep_level} of {info.sweep_known}")


COMMANDS = [store_group]
