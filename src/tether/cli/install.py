"""What ``tether hook install`` and ``tether setup`` share: the home to name in a
harness's settings, the project folder, and the note on how Codex turns hooks on."""

from __future__ import annotations

import os
from pathlib import Path

from tether.cli.context import Context

CODEX_NOTE = (
    "codex: Codex runs a new hook once you trust it (its /hooks); a Codex from before hooks "
    "were on by default also needs `[features] hooks = true` in its config.toml"
)


def explicit_home(ctx: Context) -> Path | None:
    """The home to name in a harness's settings: None when it is the default one (no
    ``--home``, no ``TETHER_HOME``: the harness's environment may not have it)."""
    if ctx.home_option is None and not os.environ.get("TETHER_HOME"):
        return None
    return ctx.home


def project_dir(project: str | None, user: bool) -> Path | None:
    """The project folder (default: this one), or None for the user scope."""
    from tether.errors import BadInputError

    if project and user:
        raise BadInputError("--project and --user name different files: give one")
    return None if user else Path(project or ".").absolute()
