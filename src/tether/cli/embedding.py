"""Vectors where they are on: the commands that add rows embed them, so recall is never
silently lexical.

- ``embed_added``: after ``sessions import`` or ``transcripts ingest`` indexed what it
  added, embed every row still without a vector (the progress bar on a terminal), with
  the command's vectors (its application's, ``App.vectors``); the rows embedded, or None
  when vectors are off (``[recall] vectors``, or the extra absent under "auto"). A
  failure (the model's file damaged, a full disk) is one warning: the rows are imported,
  and recall says it is lexical for them.

(The hooks' embedding within their deadline is ``recall.banked``; recall's own step
before it searches is ``recall.home.prepare``.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from tether.cli.context import counted, shown
from tether.errors import TetherError

if TYPE_CHECKING:
    from tether.daemon.app import App
    from tether.ports import Progress

#: Where a test fills the disk between an import's indexing and its embedding.
PAUSE_BEFORE_EMBED = "import-before-embed"


def embed_added(app: App, meter: Progress | None) -> int | None:
    """Embed the rows still without a vector (see the module's doc); None: vectors off, or
    the embedding failed (warned)."""
    from tether.faults import pause_point
    from tether.memory.vectors import embed_missing

    pause_point(PAUSE_BEFORE_EMBED)
    try:
        vectors = app.vectors()
        if vectors is None:
            return None
        return embed_missing(vectors, progress=meter)
    except (TetherError, OSError) as exc:
        click.echo(
            f"tether: warning: the rows were imported but not embedded, recall is lexical "
            f"for them until `tether memory reindex --vectors`: {shown(str(exc))}",
            err=True,
        )
        return None  # the warning said it: the summary line says nothing of vectors


def embedded_words(embedded: int | None) -> str:
    """What an import says about its vectors (nothing when they are off)."""
    return "" if embedded is None else f"; {counted(embedded, 'row')} embedded"
