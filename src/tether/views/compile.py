"""``compile-context``: select, scan and pack the pages (``core.views.compiled``), then write the
target's file, or compare it (``check``).

Nothing is written unless the whole view was built: a store that cannot be read, a
malformed managed block or an unreadable target file stops the run first. The file is
written through a rename (a reader never sees half of it), through a symbolic link to
its target (AGENTS.md is often linked as CLAUDE.md), keeping an existing file's mode
(0644 for a new one: it is meant to be read and committed), and only when its bytes
change, so an unchanged view keeps its mtime.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tether.core.context import tokens
from tether.core.views import compiled as views
from tether.core.views.compiled import Target
from tether.errors import BadInputError
from tether.files import read_user_text, write_atomic
from tether.ports import PageStore
from tether.scan.allow import ALLOW_FILE, home_allow, home_blocklist
from tether.scan.sensitive import Sensitive, first_sensitive

Status = Literal["written", "unchanged", "current", "stale"]
NEW_FILE_MODE = 0o644
#: A folder compile-context creates in a project (``.claude/``, ``.tether/``): readable by
#: all, like the file, whatever the private umask of tether's own process.
NEW_FOLDER_MODE = 0o755


def _project_folder(folder: Path) -> None:
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for created in reversed(missing):
        created.mkdir()
        os.chmod(created, NEW_FOLDER_MODE)


@dataclass(frozen=True)
class LeftOut:
    """A selected page that is not in the view: ``reason`` is ``sensitive`` (with the
    rule and the fingerprint that would allow it) or ``budget``. Only pages the budget
    had room for are scanned, so a page past it is ``budget`` whatever it holds."""

    slug: str
    reason: Literal["sensitive", "budget"]
    rule: str | None = None
    fingerprint: str | None = None


@dataclass(frozen=True)
class ViewReport:
    target: Target
    path: Path
    status: Status
    budget: int
    tokens: int
    pages: tuple[str, ...]
    left_out: tuple[LeftOut, ...]
    allow_file: Path


def compile_view(
    home: Path,
    store: PageStore,
    *,
    target: Target,
    path: Path,
    budget: int,
    check: bool,
) -> ViewReport:
    """Build the ``target`` view of the home's pages into ``path`` (or, with ``check``,
    only say whether ``path`` already holds it)."""
    allow, blocklist = home_allow(home), home_blocklist(home)

    def refuse(entry: str) -> Sensitive | None:
        return first_sensitive(entry, allow=allow, blocklist=blocklist)

    room = budget - tokens.count(views.managed("")) if target == "codex" else budget
    packed = views.pack(views.select(store.pages()), target, room, refuse)
    left = [LeftOut(slug, "sensitive", hit.rule, hit.fingerprint) for slug, hit in packed.refused]
    left.extend(LeftOut(slug, "budget") for slug in packed.over_budget)

    real = Path(os.path.realpath(path))
    before = read_user_text(real)
    if target == "codex":
        new = views.splice(before, packed.text, str(path))
        used = tokens.count(views.managed(packed.text))
    else:
        new, used = packed.text, packed.tokens
    if check:
        status: Status = "current" if before == new else "stale"
    elif before == new:
        status = "unchanged"
    else:
        try:
            mode = NEW_FILE_MODE if before is None else real.stat().st_mode & 0o777
            _project_folder(real.parent)
            write_atomic(real, new.encode("utf-8"), mode=mode)
        except OSError as exc:
            raise BadInputError(
                f"{path}: cannot write: {exc.strerror or exc}; the file was not changed"
            ) from None
        status = "written"
    return ViewReport(
        target=target,
        path=path,
        status=status,
        budget=budget,
        tokens=used,
        pages=packed.included,
        left_out=tuple(left),
        allow_file=home / ALLOW_FILE,
    )
