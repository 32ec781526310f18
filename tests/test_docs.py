"""The docs keep up with the code: every config key documented, every runbook name real."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from tether.config import Config

ROOT = Path(__file__).resolve().parents[1]


def test_every_config_key_is_documented() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    sections = re.split(r"^## ", doc, flags=re.M)
    by_name = {}
    for part in sections[1:]:
        m = re.match(r"`\[(\w+)\]`", part)
        if m:
            by_name[m.group(1)] = part
    for section in msgspec.structs.fields(Config):
        assert section.name in by_name, f"[{section.name}] is not in docs/configuration.md"
        for key in msgspec.structs.fields(section.type):
            assert f"| `{key.name}` |" in by_name[section.name], (
                f"{section.name}.{key.name} is not documented"
            )


def test_every_runbook_name_in_the_code_has_an_entry() -> None:
    runbook = (ROOT / "docs" / "runbook.md").read_text()
    entries = set(re.findall(r"^## ([a-z0-9-]+)$", runbook, flags=re.M))
    named: set[str] = set()
    for path in (ROOT / "src" / "tether").rglob("*.py"):
        text = path.read_text()
        named |= set(re.findall(r"runbook\s*=\s*\"([a-z0-9-]+)\"", text))
        named |= set(re.findall(r"\"([a-z0-9-]+)\" if kind == ", text))
        named |= set(re.findall(r"runbook[ :`]+([a-z][a-z0-9]*(?:-[a-z0-9]+)+)", text))
    missing = named - entries
    assert not missing, f"runbook entries missing from docs/runbook.md: {sorted(missing)}"
    assert "session-compact-failed" in entries
