"""`tether doctor` finds damage, each kind by its runbook name, and the repair it names
works: a malformed tether.db, a missing or emptied full-text index, a lost write-ahead log
(a child process killed mid-life, its WAL deleted), a malformed log line (recall keeps the
session's other lines), a same-length edit of a log line (its checksum), and a torn tail
cut by the next append (recorded, not silent). Everything runs as a user runs it."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon_helpers import child_env, tether
from tether.testing.fake_llama import FakeLlama

pytestmark = pytest.mark.slow


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama(n_ctx=8192, parallel=2) as f:
        yield f


@pytest.fixture
def home(tmp_path: Path, fake: FakeLlama) -> Path:
    path = tmp_path / "home"
    assert tether(path, "init").returncode == 0
    (path / "tether.toml").write_text(
        f'[llm]\nurl = "{fake.url}"\n[expect]\nn_ctx = 8192\n[recall]\nvectors = false\n'
    )
    lines = [
        {"session": "birds", "role": "user", "text": text, "time": f"2026-01-01T00:00:0{n}Z"}
        for n, text in enumerate(
            ["the heron waits by the weir", "the kestrel hovers", "the wren sings at dusk"]
        )
    ]
    source = tmp_path / "birds.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert tether(path, "sessions", "import", str(source)).returncode == 0
    assert tether(path, "memory", "note", "the swift never lands").returncode == 0
    return path


def _doctor(home: Path) -> tuple[int, dict[str, Any]]:
    out = tether(home, "doctor", "--json")
    assert "Traceback" not in out.stderr
    return out.returncode, json.loads(out.stdout)


def _problems(report: dict[str, Any]) -> list[tuple[str, int | None]]:
    return [(p["name"], p["line"]) for p in report["problems"]]


def _recall(home: Path, query: str) -> tuple[list[str], str]:
    out = tether(home, "memory", "recall", query, "--json", "-k", "10")
    assert out.returncode == 0, out.stderr
    # What was written (the session's digest, a summary unit, may be found beside it).
    units = ("session-summary", "epoch-summary")
    return [h["text"] for h in json.loads(out.stdout) if h["kind"] not in units], out.stderr


def _log(home: Path) -> Path:
    return home / "sessions" / "birds" / "0.jsonl"


def _killed_writer(home: Path, note: str) -> None:
    """A process writes a note and is killed before it checkpoints: the note is in the
    WAL only (the WAL and its index stay behind)."""
    script = (
        "import os, signal\n"
        "from datetime import UTC, datetime\n"
        "from tether.memory.notes import write_note\n"
        "from tether.scan.screen import screen\n"
        "from tether.stores.sqlite import SqliteStore\n"
        f"store = SqliteStore({str(home / 'tether.db')!r})\n"
        f"text = screen({note!r}, what='n', allow=frozenset(), on_secret='refuse')\n"
        "write_note(store, text, untrusted=False, who='owner', session=None,"
        " time=datetime.now(UTC))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", script], env=child_env(), check=False)
    assert killed.returncode == -signal.SIGKILL


def test_a_healthy_home_has_no_problem(home: Path) -> None:
    _killed_writer(home, "the crane stands still")  # a crash, the WAL kept: no damage
    code, report = _doctor(home)
    assert code == 0, report
    assert report["problems"] == []
    assert not any("write-ahead" in w for w in report["warnings"])
    hits, _ = _recall(home, "crane")
    assert hits == ["the crane stands still"]  # the WAL's note survived the kill


def test_a_dropped_full_text_index_is_named_and_reindex_rebuilds_it(home: Path) -> None:
    with sqlite3.connect(home / "tether.db") as c:
        c.execute("DROP TABLE doc_fts")
    code, report = _doctor(home)
    assert code == 1
    assert _problems(report) == [("fts-missing", None)]
    assert report["problems"][0]["repair"] == "tether memory reindex"
    assert tether(home, "memory", "reindex").returncode == 0
    code, report = _doctor(home)
    assert (code, report["problems"]) == (0, [])
    hits, _ = _recall(home, "swift heron")
    assert set(hits) == {"the swift never lands", "the heron waits by the weir"}


def test_an_emptied_full_text_index_is_named_and_reindex_refills_it(home: Path) -> None:
    with sqlite3.connect(home / "tether.db") as c:
        c.execute("INSERT INTO doc_fts (doc_fts) VALUES ('delete-all')")
    code, report = _doctor(home)
    assert code == 1
    assert _problems(report) == [("fts-empty", None)]
    assert tether(home, "memory", "reindex").returncode == 0
    assert _doctor(home)[1]["problems"] == []
    hits, _ = _recall(home, "swift")
    assert hits == ["the swift never lands"]


def test_a_malformed_store_is_named(home: Path) -> None:
    with sqlite3.connect(home / "tether.db") as c:
        root = c.execute("SELECT rootpage FROM sqlite_master WHERE name = 'doc'").fetchone()[0]
        size = c.execute("PRAGMA page_size").fetchone()[0]
    with (home / "tether.db").open("r+b") as f:
        f.seek((root - 1) * size + 8)  # the b-tree page's cells: garbage
        f.write(b"\xff" * 64)
    code, report = _doctor(home)
    assert code == 1
    assert ("store-malformed", None) in _problems(report)


def test_a_lost_wal_is_named_and_recorded(home: Path) -> None:
    _killed_writer(home, "the lost owl note")
    (home / "tether.db-wal").unlink()
    code, report = _doctor(home)
    assert code == 1
    assert ("store-wal-lost", None) in _problems(report)
    # Opening the store hides the trace; it was recorded, and doctor says so from then on.
    _, report = _doctor(home)
    assert any("lost write-ahead log" in w for w in report["warnings"])
    hits, _ = _recall(home, "owl note")
    assert hits == []  # the note went with the WAL: the runbook says what to do


def test_a_malformed_line_is_named_and_recall_keeps_the_rest(home: Path) -> None:
    log = _log(home)
    lines = log.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"type": "User", "oops\n'  # the kestrel's line, shorter: garbage
    log.write_bytes(b"".join(lines))
    code, report = _doctor(home)
    assert code == 1
    assert ("session-log-corrupt", 3) in _problems(report)
    assert report["problems"][0]["where"] == str(log)
    # The log is shorter than what was indexed: the next recall indexes the session
    # again as it now is, reading past the malformed line and naming it.
    hits, err = _recall(home, "heron kestrel wren")
    assert "session birds: a log was rewritten since it was indexed" in err
    assert f"{log}:3: malformed record" in err
    assert set(hits) == {"the heron waits by the weir", "the wren sings at dusk"}
    out = tether(home, "memory", "reindex")
    assert out.returncode == 0, out.stderr
    assert f"{log}:3: malformed record" in out.stderr
    hits, _ = _recall(home, "heron kestrel wren")
    assert set(hits) == {"the heron waits by the weir", "the wren sings at dusk"}


def test_a_same_length_edit_is_caught_by_its_checksum(home: Path) -> None:
    log = _log(home)
    data = log.read_bytes()
    edited = data.replace(b"the kestrel hovers", b"the kestrel HOVERS")
    assert len(edited) == len(data)
    assert edited != data
    log.write_bytes(edited)
    code, report = _doctor(home)
    assert code == 1
    assert _problems(report) == [("session-log-changed", 3)]
    assert "line 3 was changed" in report["problems"][0]["detail"]


def test_a_log_without_checksums_is_accepted(home: Path) -> None:
    (home / "sessions" / "birds" / "0.sums").unlink()  # a log from before them
    code, report = _doctor(home)
    assert (code, report["problems"]) == (0, [])


def test_a_torn_tail_cut_is_recorded(home: Path, fake: FakeLlama) -> None:
    log = _log(home)
    torn = b'{"type": "User", "text": "half a wri'  # a crash mid-append
    with log.open("ab") as f:
        f.write(torn)
    out = tether(home, "chat", "--session", "birds", "and the owl?")
    assert out.returncode == 0, out.stderr
    code, report = _doctor(home)
    assert (code, report["problems"]) == (0, [])  # cut and checked again: whole
    [warning] = [w for w in report["warnings"] if "torn last line" in w]
    assert f"session birds epoch 0: a torn last line of {len(torn)} bytes" in warning
    assert not log.read_bytes().count(torn)
