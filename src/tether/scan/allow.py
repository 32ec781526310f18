"""The home's allow-list of reviewed false positives, ``<home>/.tether-scan-allow``.

One file serves every place tether scans for secrets (banked windows, summaries, and
what becomes durable memory), so a fingerprint allowed once is allowed everywhere.
"""

from __future__ import annotations

from pathlib import Path

from tether.scan.secrets import load_allow

ALLOW_FILE = ".tether-scan-allow"


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
