"""The home folder: where it is, and what ``tether init`` puts in it."""

from __future__ import annotations

import os
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


def init_home(home: Path) -> InitReport:
    """Create the home's folders and starter files; never overwrite an existing file."""
    home.mkdir(parents=True, exist_ok=True)
    for d in HOME_DIRS:
        (home / d).mkdir(exist_ok=True)
    created: list[str] = []
    kept: list[str] = []
    for rel, resource in STARTER_FILES:
        target = home / rel
        if target.exists():
            kept.append(rel)
            continue
        write_atomic(target, starter_text(resource))
        created.append(rel)
    return InitReport(tuple(created), tuple(kept))
