"""How far a long command got, drawn on a terminal (``rich``), and nothing when piped.

The jobs report through the ``ports.Progress`` port; this is its one implementation. The
bar goes to stderr and is cleared when the command ends, so what a command prints on
stdout is the same on a terminal, in a pipe and in a hook's log.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import rich.progress

    from tether.ports import Progress


class _Bar:
    """One rich task per stage; a new stage hides the one before."""

    def __init__(self, bar: rich.progress.Progress) -> None:
        self.bar = bar
        self.task: rich.progress.TaskID | None = None

    def stage(self, what: str, total: int | None = None) -> None:
        if self.task is not None:
            self.bar.update(self.task, visible=False)
        self.task = self.bar.add_task(what, total=total)

    def advance(self, count: int = 1) -> None:
        if self.task is not None:
            self.bar.advance(self.task, count)


@contextlib.contextmanager
def terminal_meter() -> Iterator[Progress | None]:
    """A progress bar on stderr while the block runs when stderr is a terminal; None (say
    nothing) when it is a pipe or a file."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.progress import Progress as RichProgress

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with RichProgress(*columns, console=Console(stderr=True), transient=True) as bar:
        yield _Bar(bar)
