"""What an index pass had to leave out, said on stderr: shared by ``memory recall``,
``memory reindex``, ``sessions import`` and ``transcripts ingest``."""

from __future__ import annotations

from collections.abc import Sequence

import click

from tether.cli.context import shown


def warn_unindexed(
    errors: Sequence[tuple[str, str]],
    damaged: Sequence[tuple[str, str]] = (),
    rewritten: Sequence[str] = (),
) -> None:
    """One stderr line per session an index pass had to leave out, per malformed line
    it read past (the session's other lines are indexed), and per session whose log was
    rewritten since it was indexed (indexed again from the file as it is now)."""
    for sid in rewritten:
        click.echo(
            f"tether: note: session {sid}: a log was rewritten since it was indexed; "
            "its index was rebuilt from the files as they are now (`tether doctor` "
            "checks the logs against their checksums)",
            err=True,
        )
    for sid, problem in errors:
        click.echo(f"tether: warning: session {sid} not indexed: {shown(problem)}", err=True)
    for sid, problem in damaged:
        click.echo(
            f"tether: warning: session {sid}: a malformed line was left out of the index: "
            f"{shown(problem)} (runbook: session-log-corrupt)",
            err=True,
        )
