"""Vectors where they are on: the commands that add rows embed them, so recall is never
silently lexical.

- ``embed_added``: after ``sessions import`` or ``transcripts ingest`` indexed what it
  added, embed every row still without a vector (the progress bar on a terminal); the
  rows embedded, or None when vectors are off (``[recall] vectors``, or the extra absent
  under "auto"). A failure (the model's file damaged, a full disk) is one warning: the
  rows are imported, and recall says it is lexical for them.
- ``ready_for_recall``: ``memory recall``'s step before it searches: the rule every
  recall front end shares (``memory.readiness``: up to ``RECALL_EMBED_ROWS`` missing rows
  embedded first, else lexical), its notice printed once on stderr.
- ``embed_within``: the hooks' step after indexing a banked window: embed while the
  deadline leaves time for another batch (keeping ``RESERVE_S``); "embedded", "deferred"
  (left for the next recall), "off", or "error" for the hook's telemetry.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tether.cli.context import counted, shown
from tether.errors import TetherError

if TYPE_CHECKING:
    from tether.config import Config
    from tether.memory.vectors import Vectors
    from tether.ports import Progress

#: What the hooks count on to load the model (~0.55 s here) before they start.
LOAD_S = 0.6
#: Where a test fills the disk between an import's indexing and its embedding.
PAUSE_BEFORE_EMBED = "import-before-embed"
#: Rows a hook embeds per batch: small, so the deadline is checked often (a batch of the
#: longest rows, four parts each, is 64 parts: about 1 s on two cores).
HOOK_BATCH_ROWS = 16
#: A high estimate of one such batch's time.
BATCH_S = 1.0


def embed_added(home: Path, config: Config, meter: Progress | None) -> int | None:
    """Embed the rows still without a vector (see the module's doc); None: vectors off, or
    the embedding failed (warned)."""
    from tether.daemon.vectors import open_vectors
    from tether.faults import pause_point
    from tether.memory.vectors import embed_missing

    pause_point(PAUSE_BEFORE_EMBED)
    try:
        vectors = open_vectors(home, config)
        if vectors is None:
            return None
        try:
            return embed_missing(vectors, progress=meter)
        finally:
            vectors.index.close()
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


def ready_for_recall(vectors: Vectors | None, meter: Progress | None) -> None:
    """Embed a few missing rows before recall searches (``memory.readiness``), or warn
    once on stderr that it is lexical."""
    from tether.memory.readiness import ready_for_recall as ready

    notice = ready(vectors, progress=meter).notice
    if notice is not None:
        click.echo(f"tether: warning: {shown(notice)}", err=True)


def embed_within(home: Path, config: Config, left: Callable[[], float], reserve: float) -> str:
    """The hooks' embedding of what they indexed, within the time ``left()`` says remains."""
    from tether.daemon.vectors import open_vectors
    from tether.llm import embedder
    from tether.memory.vectors import embed_missing

    if config.recall.vectors is False or not embedder.available():
        return "off"
    if left() - reserve < LOAD_S + BATCH_S:
        return "deferred"
    started = time.monotonic()
    try:
        vectors = open_vectors(home, config)
        if vectors is None:
            return "off"
        try:
            load_s = time.monotonic() - started
            embed_missing(
                vectors,
                batch=HOOK_BATCH_ROWS,
                stop=lambda: left() - reserve < max(BATCH_S, load_s),
            )
            return "embedded" if vectors.complete else "deferred"
        finally:
            vectors.index.close()
    except (TetherError, OSError):
        return "error"
