"""The home folder: where it is, and what ``tether init`` puts in it."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tether.config import CONFIG_FILE
from tether.files import write_atomic

#: (path in the home, starter resource) for every file ``tether init`` writes.
STARTER_FILES: tuple[tuple[str, str], ...] = (
    (CONFIG_FILE, "tether.toml"),
    ("config/system.md", "system.md"),
    ("config/compact.md", "compact.md"),
    ("config/heartbeat.md", "heartbeat.md"),
    ("config/summarise.md", "summarise.md"),
    ("config/jobs/tier.toml.example", "jobs/tier.toml.example"),
    ("memory/memory.md", "memory.md"),
)
HOME_DIRS = ("sessions", "memory", "jobs", "corpus")

#: The umask of every tether process (``cli.main``): what it creates in the home is the
#: owner's alone (folders 0700, files 0600). The database holds notes, private pages and
#: the journal; a session log holds every word said.
PRIVATE_UMASK = 0o077


def resolve_home(option: str | None) -> Path:
    """``--home``, else ``TETHER_HOME``, else ``~/.tether``."""
    if option:
        return Path(option).expanduser().absolute()
    env = os.environ.get("TETHER_HOME")
    if env:
        return Path(env).expanduser().absolute()
    return Path.home() / ".tether"


def starter_text(name: str) -> bytes:
    return resources.files("tether.starter").joinpath(name).read_bytes()


@dataclass(frozen=True)
class InitReport:
    created: tuple[str, ...]
    kept: tuple[str, ...]
    #: Paths of an existing home made private (see ``tighten``).
    tightened: int = 0


def tighten(home: Path) -> int:
    """Make ``home`` and everything in it the owner's alone (group and other bits off:
    folders 0700, files 0600), as a home made before tether did so needs; the number of
    paths changed. Symbolic links are neither changed nor followed."""
    changed = 0
    paths = [home]
    for root, dirs, files in os.walk(home):
        paths.extend(Path(root, name) for name in (*dirs, *files))
    for path in paths:
        try:
            info = path.lstat()
        except FileNotFoundError:  # gone since the walk (a lock, a temporary file)
            continue
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISLNK(info.st_mode) or not mode & 0o077:
            continue
        os.chmod(path, mode & 0o700, follow_symlinks=False)
        changed += 1
    return changed


def ensure_private(home: Path) -> int:
    """``tighten`` a home whose folder is open to others (a home from before tether made
    homes private, or a copy made with a lax umask); a home folder that is the owner's
    alone keeps everything in it from others, so that costs one stat, not a walk."""
    try:
        mode = stat.S_IMODE(home.lstat().st_mode)
    except FileNotFoundError:
        return 0
    return tighten(home) if mode & 0o077 else 0


def init_home(home: Path) -> InitReport:
    """Create the home's folders and starter files, never overwriting an existing file,
    and make the home private (``tighten``)."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    for d in HOME_DIRS:
        (home / d).mkdir(mode=0o700, exist_ok=True)
    created: list[str] = []
    kept: list[str] = []
    for rel, resource in STARTER_FILES:
        target = home / rel
        if target.exists():
            kept.append(rel)
            continue
        write_atomic(target, starter_text(resource))
        created.append(rel)
    return InitReport(tuple(created), tuple(kept), tighten(home))
