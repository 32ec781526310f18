"""``sessions import`` run again: after it finished it writes nothing; after a crash (a real
child killed at a named point) it writes what is missing and nothing twice."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon_helpers import child_env, tether
from test_import import TWO_SESSIONS, import_file, line, users, write
from tether.records import Baseline
from tether.sessions import Session, list_sessions
from tether.stores.sqlite import SqliteStore

NOW = datetime(2026, 12, 1, tzinfo=UTC)
TRIP = ["We booked the Lantern restaurant in Lisbon", "Flight leaves at 9"]
CAT = ["I adopted a cat named Milo"]


def imports_journaled(home: Path) -> int:
    with SqliteStore(home / "tether.db") as store:
        return sum(1 for j in store.journal() if j.action == "import")


def killed_import(home: Path, src: Path, point: str, *, batch_chars: int | None = None) -> None:
    """Import ``src`` in a child that kills itself (SIGKILL) at ``point``."""
    if batch_chars is None:
        argv = ["-m", "tether.cli.main", "--home", str(home), "sessions", "import", str(src)]
    else:
        code = (
            "from datetime import UTC, datetime\nfrom pathlib import Path\n"
            "from tether.imports.jsonl import import_jsonl\n"
            "from contextlib import closing\n"
            "from tether.stores.sqlite import SqliteStore\n"
            f"home = Path({str(home)!r})\n"
            f"import_jsonl(home, Path({str(src)!r}), now=datetime.now(UTC), "
            f"store=lambda: closing(SqliteStore(home / 'tether.db')), batch_chars={batch_chars})\n"
        )
        argv = ["-c", code]
    child = subprocess.run(
        [sys.executable, *argv],
        check=False,
        env=child_env({"TETHER_CRASH_AT": point}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == -9, child.stderr


def test_an_import_run_again_writes_nothing(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path / "in.jsonl", TWO_SESSIONS)
    first = import_file(home, src, now=NOW)
    before = {sid: Session.open(home, sid).records for sid in ("trip", "cat")}
    again = import_file(home, src, now=NOW)
    assert first.already is None
    assert again.already == NOW
    assert again.ledger == first.ledger
    assert {sid: Session.open(home, sid).records for sid in ("trip", "cat")} == before
    assert imports_journaled(home) == 1
    # Another file (one more line) is another import.
    more = write(tmp_path / "more.jsonl", [*TWO_SESSIONS, line("cat", "user", "Milo sleeps")])
    assert import_file(home, more, now=NOW).already is None
    assert users(home, "cat") == [*CAT, *CAT, "Milo sleeps"]


@pytest.mark.slow
def test_the_cli_says_when_it_was_imported(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path / "in.jsonl", TWO_SESSIONS)
    assert tether(home, "sessions", "import", str(src)).returncode == 0
    again = tether(home, "sessions", "import", str(src))
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("already imported at ")
    assert "nothing written" in again.stdout
    assert str(home / "imports") in again.stdout


@pytest.mark.slow
def test_killed_after_a_session_the_next_run_finishes_it(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path / "in.jsonl", TWO_SESSIONS)
    killed_import(home, src, "import-after-session")
    assert list_sessions(home) == ["trip"]  # the first session in the file, whole
    out = tether(home, "sessions", "import", str(src))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(
        "finished an interrupted import of this file: 3 records were already in"
    )
    # What this run wrote, not the whole file again (issue 17: reports that read as success).
    assert "imported 2 more records (of the file's 5, 3 turns): 2 sessions created" in out.stdout
    assert users(home, "trip") == TRIP
    assert users(home, "cat") == CAT
    assert imports_journaled(home) == 1


@pytest.mark.slow
def test_killed_inside_a_session_the_next_run_writes_only_the_rest(
    home: Path, tmp_path: Path
) -> None:
    src = write(tmp_path / "in.jsonl", TWO_SESSIONS)
    killed_import(home, src, "import-between-batches", batch_chars=1)
    assert users(home, "trip") == TRIP[:1]  # one record appended, then the kill
    out = tether(home, "sessions", "import", str(src))
    assert out.returncode == 0, out.stderr
    assert "1 record were already in" in out.stdout
    assert users(home, "trip") == TRIP
    assert len(Session.open(home, "trip").records) == 4  # start + 3, none twice
    assert users(home, "cat") == CAT


@pytest.mark.slow
def test_an_interrupted_import_into_an_existing_session_resumes_after_its_records(
    home: Path, tmp_path: Path
) -> None:
    mine = Session.create(home, "trip", baseline=Baseline(system="s", memory=""), slot=0, time=NOW)
    write(tmp_path / "own.jsonl", [line("trip", "user", "my own line")])
    import_file(home, tmp_path / "own.jsonl", now=NOW)
    assert mine.epoch == 0
    src = write(tmp_path / "in.jsonl", TWO_SESSIONS)
    killed_import(home, src, "import-between-batches", batch_chars=1)
    assert tether(home, "sessions", "import", str(src)).returncode == 0
    assert users(home, "trip") == ["my own line", *TRIP]


@pytest.mark.slow
def test_a_session_compacted_since_the_interruption_stops_the_resume(
    home: Path, tmp_path: Path
) -> None:
    src = write(tmp_path / "in.jsonl", TWO_SESSIONS)
    killed_import(home, src, "import-between-batches", batch_chars=1)
    trip = Session.open(home, "trip")
    trip.end_epoch(summary="s", baseline=trip.baseline, time=NOW)
    out = tether(home, "sessions", "import", str(src))
    assert out.returncode == 1
    assert "moved to epoch 1 after an interrupted import wrote to epoch 0" in out.stderr
    assert Session.open(home, "trip").turns() == 1  # nothing more written
    assert "cat" not in list_sessions(home)


def test_an_empty_file_imports_nothing_each_time(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path / "empty.jsonl", ["", "   "])
    for _ in range(2):
        report = import_file(home, src, now=NOW)
        assert (report.records, report.already, report.ledger) == (0, None, None)
    assert not (home / "imports").exists()
    assert list_sessions(home) == []
