"""Page tags are memory text like a page's body (issue 34, item 3): ``page write --tag``
refuses (or, with --redact, redacts) a secret in a tag before anything is stored or
indexed, and ``memory scan`` finds and redacts one a home already holds. Real SQLite,
real child processes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from daemon_helpers import tether
from tether.records import Page
from tether.stores.sqlite import SqliteStore

KEY = "AKIA" + "Q3EGRDLRT5NDWX7P"
PASSWORD_URL = "postgres://deploy:Tr0ub4dor9@db.internal/app"


def files_holding(home: Path, secret: str) -> list[str]:
    return sorted(
        p.name for p in home.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()
    )


def test_a_tag_holding_a_secret_is_refused_and_nothing_is_stored(home: Path) -> None:
    for tag in (KEY, PASSWORD_URL):
        out = tether(
            home, "page", "write", "ops/db", "--tag", "ops", "--tag", tag, input="# DB\n\nnotes"
        )
        assert out.returncode == 2, out.stderr
        assert "--tag 2" in out.stderr  # which tag
        assert KEY not in out.stderr
        assert "Tr0ub4dor9" not in out.stderr
        assert tether(home, "page", "list").stdout == "no pages\n"
    assert files_holding(home, KEY) == []


def test_with_redact_the_tag_is_stored_and_indexed_redacted(home: Path) -> None:
    out = tether(
        home, "page", "write", "ops/db", "--tag", f"key {KEY}", "--redact", input="# DB\n\nnotes"
    )
    assert out.returncode == 0, out.stderr
    page = json.loads(tether(home, "page", "show", "ops/db", "--json").stdout)
    assert page["tags"] == ["key [REDACTED:aws-access-key]"]
    hits = json.loads(tether(home, "memory", "recall", "DB notes", "--json").stdout)
    assert hits
    assert KEY not in json.dumps(hits)
    assert files_holding(home, KEY) == []


def test_memory_scan_finds_and_redacts_a_secret_in_an_old_pages_tags(home: Path) -> None:
    with SqliteStore(home / "tether.db") as st:  # written by a tether that did not screen tags
        st.put_page(
            Page(
                slug="ops/db",
                title="DB",
                body="# DB\n\nnotes",
                tags=("ops", f"key {KEY}"),
                visibility="private",
                untrusted=False,
                updated_at=datetime(2026, 11, 1, tzinfo=UTC),
            )
        )
    found = tether(home, "memory", "scan")
    assert found.returncode == 1, found.stderr
    assert any(line.startswith("page ops/db (tags)") for line in found.stdout.splitlines())
    assert KEY not in found.stdout
    done = tether(home, "memory", "scan", "--redact")
    assert done.returncode == 0, done.stderr
    page = json.loads(tether(home, "page", "show", "ops/db", "--json").stdout)
    assert page["tags"] == ["ops", "key [REDACTED:aws-access-key]"]
    assert files_holding(home, KEY) == []
    assert tether(home, "memory", "scan").returncode == 0
