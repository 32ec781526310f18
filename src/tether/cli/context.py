"""What every command gets: the home it works on and a way to load its config."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import click
import msgspec

from tether.config import Config, load_config
from tether.home import resolve_home


@dataclass
class Context:
    home_option: str | None

    @property
    def home(self) -> Path:
        return resolve_home(self.home_option)

    def config(self) -> Config:
        return load_config(self.home)


pass_ctx = click.make_pass_decorator(Context)


def counted(n: int, one: str, many: str | None = None) -> str:
    """``n`` with the noun agreeing: "1 entry", "2 entries" (``many`` defaults to one + s)."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def utc_stamp(t: datetime) -> str:
    """A time as commands print it: UTC to the second, ``2026-11-01T12:00:00Z``."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def echo_change(before: str | None, after: str | None) -> None:
    """The indented before/after lines under a journal entry (each only when it exists)."""
    if before is not None:
        click.echo(f"    before: {before}")
    if after is not None:
        click.echo(f"    after:  {after}")


def echo_json(value: object) -> None:
    """``--json`` output: one JSON document on stdout."""
    click.echo(msgspec.json.encode(value).decode())
