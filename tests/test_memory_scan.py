"""`tether memory scan [--redact]`: secrets already in durable memory (written by hand, or
by a version that did not screen) are found by place and, on request, redacted where they
sit, with nothing of them left in tether's files. Real SQLite, real child processes."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from daemon_helpers import tether
from sweep_helpers import day_packet, fact, pending_receipt
from tether.core.sweep.packet import DailySweepInput, digest, encode_packet
from tether.core.sweep.state import Cursor, Fact, StagedPacket
from tether.core.sweep.windows import window_for
from tether.memory.identity import MEMORY_FILE
from tether.records import JournalEntry, Page
from tether.scan.secrets import fingerprint
from tether.stores.sqlite import SqliteStore
from tether.stores.sqlite.sweep import SqliteSweepStore
from tether.sweep import owners

T = datetime(2026, 11, 1, 9, tzinfo=UTC)
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8"
OPENAI = "sk-proj-" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp" + "T3BlbkFJ" + "a1B2c3D4e5F6g7H8i9J0"
D0, D1 = date(2026, 10, 30), date(2026, 10, 31)


def stage(day: date, window_id: str, p: DailySweepInput) -> StagedPacket:
    return StagedPacket(
        owner="alice",
        local_date=day,
        source_generation=1,
        window_id=window_id,
        digest=digest(p),
        packet=encode_packet(p),
        created_at=T,
    )


def old_memory(home: Path) -> None:
    """What a home written before secrets were screened holds: a hand-edited memory.md, a
    note, a page, journal rows, a sweep fact, its journal row and its staged packet."""
    md = home / MEMORY_FILE
    md.write_text(md.read_text() + f"- the CI deploy key is {GITHUB}\n")
    with SqliteStore(home / "tether.db") as st:
        st.add_note(f"openai key for the bot: {OPENAI}", untrusted=False, session=None, time=T)
        st.add_note("the owner likes green tea", untrusted=False, session=None, time=T)
        st.put_page(
            Page(
                slug="ops/deploy",
                title="Deploy",
                body=f"# Deploy\n\nsteps:\n1. export GH={GITHUB}\n2. run make deploy\n",
                tags=(),
                visibility="private",
                untrusted=False,
                updated_at=T,
            )
        )
        st.journal_append(JournalEntry(T, "agent", None, "note", "note:1", None, f"key {OPENAI}"))
    with SqliteSweepStore(home / "tether.db") as sw:
        owners.add(sw, "alice", "UTC", T)
        o = owners.get(sw, "alice")
        p = day_packet(o, D0, (fact("deploy", text=f"deploys with {GITHUB}"),))
        w = window_for("UTC", D0)
        with sw.transaction() as tx:
            tx.put_stage(stage(D0, w.window_id, p))
            tx.put_fact(
                Fact(
                    owner="alice",
                    subject="owner",
                    entity="deploy",
                    text=f"deploys with {GITHUB}",
                    authority="sweep_inference",
                    refs="[]",
                    origin_receipt=None,
                    created_at=T,
                    updated_at=T,
                )
            )
            tx.put_cursor(
                Cursor(
                    owner="alice",
                    timezone_name="UTC",
                    local_date=D0,
                    window_id=w.window_id,
                    window_start_utc=w.start_utc,
                    window_end_utc=w.end_utc,
                    updated_at=T,
                )
            )


def files_holding(home: Path, secret: str) -> list[str]:
    return sorted(
        str(p.relative_to(home))
        for p in home.rglob("*")
        if p.is_file() and secret.encode() in p.read_bytes()
    )


def test_scan_names_every_place_and_shows_no_secret(home: Path) -> None:
    old_memory(home)
    out = tether(home, "memory", "scan")
    assert out.returncode == 1, out.stderr
    assert GITHUB not in out.stdout + out.stderr
    assert OPENAI not in out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("memory.md line ") and "github-token" in line for line in lines)
    for where in (
        "note 1 line 1: openai-key",
        "index note:1 line 1: openai-key",
        "index page:ops/deploy line 5: github-token",
        "page ops/deploy (body) line 4: github-token",
        "journal 1 (after) line 1: openai-key",
        "fact 1 line 1: github-token",
        "stage alice/2026-10-30 line 1: github-token",
    ):
        assert any(line.startswith(where) for line in lines), (where, lines)
    assert f"fingerprint {fingerprint(GITHUB)}" in out.stdout
    assert "8 secrets in durable memory" in out.stdout
    assert "green tea" not in out.stdout
    # A scan without --redact changes nothing.
    assert "tether.db" in files_holding(home, GITHUB) or "tether.db-wal" in files_holding(
        home, GITHUB
    )


def test_redact_rewrites_every_place_and_leaves_no_byte_behind(home: Path) -> None:
    old_memory(home)
    out = tether(home, "memory", "scan", "--redact", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["redacted"], doc["left"], doc["log_truncated"]) == (8, 0, True)
    assert all(s["redacted"] and s["left"] is None for s in doc["secrets"])
    assert files_holding(home, GITHUB) == []
    assert files_holding(home, OPENAI) == []
    # What was around the secrets is still there, and still found.
    assert "the CI deploy key is [REDACTED:github-token]" in (home / MEMORY_FILE).read_text()
    shown = tether(home, "page", "show", "ops/deploy")
    assert "export GH=[REDACTED:github-token]" in shown.stdout
    hits = json.loads(tether(home, "memory", "recall", "openai key bot", "--json").stdout)
    assert [h["text"] for h in hits if h["kind"] == "note"] == [
        "openai key for the bot: [REDACTED:openai-key]"
    ]
    facts = json.loads(tether(home, "sweep", "facts", "alice", "--json").stdout)
    assert [f["text"] for f in facts] == ["deploys with [REDACTED:github-token]"]
    # The scan says what it did in the journal, without the secrets.
    journal = json.loads(tether(home, "memory", "journal", "--json").stdout)
    assert [(j["action"], j["target"]) for j in journal[-2:]] == [
        ("redact", "identity"),
        ("redact", "memory"),
    ]
    again = tether(home, "memory", "scan")
    assert (again.returncode, again.stdout) == (0, "no secret in durable memory\n")


def test_an_allowed_fingerprint_is_not_reported(home: Path) -> None:
    (home / MEMORY_FILE).write_text(f"# memory\n- the demo key is {GITHUB}\n")
    (home / ".tether-scan-allow").write_text(f"{fingerprint(GITHUB)}  # the public demo key\n")
    out = tether(home, "memory", "scan")
    assert (out.returncode, out.stdout) == (0, "no secret in durable memory\n")


def test_a_broken_allow_file_is_named_and_nothing_changes(home: Path) -> None:
    old_memory(home)
    (home / ".tether-scan-allow").write_text("deadbeef\n")
    before = (home / MEMORY_FILE).read_text()
    out = tether(home, "memory", "scan", "--redact")
    assert out.returncode == 2
    assert ".tether-scan-allow:1" in out.stderr
    assert "Traceback" not in out.stderr
    assert (home / MEMORY_FILE).read_text() == before


def test_a_day_the_sweep_is_in_the_middle_of_is_left_with_its_reason(home: Path) -> None:
    old_memory(home)
    with SqliteSweepStore(home / "tether.db") as sw:
        o = owners.get(sw, "alice")
        p = day_packet(o, D1, (fact("ci", text=f"ci uses {GITHUB}"),))
        w = window_for("UTC", D1)
        with sw.transaction() as tx:
            tx.put_stage(stage(D1, w.window_id, p))
            tx.put_receipt(
                pending_receipt(D1, digest(p.candidates[0]), claimant="dead-runner", at=T)
            )
    out = tether(home, "memory", "scan", "--redact")
    assert out.returncode == 1, out.stderr
    assert "stage alice/2026-10-31 line 1: github-token" in out.stdout
    assert "left (the sweep is in the middle of this day" in out.stdout
    assert "8 of 9 secrets redacted." in out.stdout
    assert "stage alice/2026-10-30 line 1: github-token" in out.stdout  # a swept day: redacted


@pytest.mark.parametrize("flag", [(), ("--redact",)])
def test_a_clean_home_is_clean(home: Path, flag: tuple[str, ...]) -> None:
    out = tether(home, "memory", "scan", *flag, "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout) == {
        "secrets": [],
        "redacted": 0,
        "left": 0,
        "log_truncated": None,
    }


def test_what_cannot_be_rewritten_in_place_is_left_with_its_reason(home: Path) -> None:
    with SqliteSweepStore(home / "tether.db") as sw:
        owners.add(sw, "alice", "UTC", T)
    with sqlite3.connect(home / "tether.db") as c:
        c.executemany(
            "INSERT INTO sweep_trigger (owner, id, condition, authority, provenance, active,"
            " updated_at) VALUES ('alice', ?, ?, 'direct_user_statement', 'standing_trigger',"
            " 1, '2026-11-01T09:00:00.000000Z')",
            [
                ("broken", f'{{"schema": "tether_trigger.v1", "when": {GITHUB}'),
                ("keyed", json.dumps({"schema": "tether_trigger.v1", GITHUB: 1})),
            ],
        )
    out = tether(home, "memory", "scan", "--redact", "--json")
    assert out.returncode == 1, out.stderr
    left = {s["where"]: s["left"] for s in json.loads(out.stdout)["secrets"]}
    assert left == {
        "trigger alice/broken": (
            "it is not valid JSON of its kind, so it cannot be rewritten in place"
        ),
        # Rewritten, it would still not be a trigger (the key is outside the schema).
        "trigger alice/keyed": (
            "the redacted condition is not a valid trigger (bad_trigger_condition)"
        ),
    }


def test_cells_past_the_first_batches_are_read_once_each(tmp_path: Path) -> None:
    """The cells are read a batch at a time, each batch after the last key seen: a store
    with more notes than two batches hold gives each note exactly once, in order."""
    from tether.stores.dialect import TEXT_BATCH

    n = 2 * TEXT_BATCH + 7
    with SqliteStore(tmp_path / "tether.db") as st:
        for i in range(n):
            st.add_note(f"note {i}", untrusted=False, session=None, time=T)
        seen: list[str] = []
        st.read_cells(lambda cell: seen.append(f"{cell.kind}:{cell.column}:{cell.text}"))
    notes = [s for s in seen if s.startswith("note:text:")]
    assert notes == [f"note:text:note {i}" for i in range(n)]
    index = [s for s in seen if s.startswith("index:")]
    assert sorted(index) == sorted(f"index:text:note {i}" for i in range(n))
