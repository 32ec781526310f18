"""The home's scan files: the allow-list of reviewed false positives,
``<home>/.tether-scan-allow``, and the owner's blocklist, ``<home>/.tether-scan-blocklist``.

One allow-list serves every place tether scans (banked windows, summaries, what becomes
durable memory, compiled views), so a fingerprint allowed once is allowed everywhere.
"""

from __future__ import annotations

from pathlib import Path

from tether.scan.secrets import load_allow
from tether.scan.sensitive import Blocklist, parse_blocklist

ALLOW_FILE = ".tether-scan-allow"
BLOCKLIST_FILE = ".tether-scan-blocklist"


def load_allow_file(path: Path) -> frozenset[str]:
    """The fingerprints in an allow file; none if it is absent."""
    try:
        content = path.read_text()
    except FileNotFoundError:
        return frozenset()
    return load_allow(content, source=str(path))


def home_allow(home: Path) -> frozenset[str]:
    """The fingerprints in ``<home>/.tether-scan-allow``."""
    return load_allow_file(home / ALLOW_FILE)


def home_blocklist(home: Path) -> Blocklist:
    """The owner's blocklist (``sensitive.parse_blocklist``); empty if the file is absent."""
    path = home / BLOCKLIST_FILE
    try:
        content = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Blocklist()
    return parse_blocklist(content, source=str(path))
