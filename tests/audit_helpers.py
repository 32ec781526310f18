"""Which files this test process opens inside a block: an audit hook (``sys.addaudithook``),
installed once for every test module that asks. A hook cannot be removed, so it stays
installed and records only while a block (``opened_files``) is open."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: The open block's (which paths, how each is written down, the list they go into).
_RECORDING: list[tuple[Callable[[str], bool], Callable[[str], str], list[str]]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _RECORDING and event == "open" and args and isinstance(args[0], str | Path):
        wanted, shown, opened = _RECORDING[0]
        path = str(args[0])
        if wanted(path):
            opened.append(shown(path))


sys.addaudithook(_audit)


@contextlib.contextmanager
def opened_files(
    wanted: Callable[[str], bool], shown: Callable[[str], str] = str
) -> Iterator[list[str]]:
    """The paths this process opens inside the block that ``wanted`` picks, each as
    ``shown`` writes it, in the order opened."""
    opened: list[str] = []
    _RECORDING.append((wanted, shown, opened))
    try:
        yield opened
    finally:
        _RECORDING.clear()
