"""``sessions import``: a JSONL of history becomes sessions, all or nothing, and is found."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import closing, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import Ticker
from daemon_helpers import spawn, tether
from tether.errors import ImportFormatError, NotFoundError
from tether.home import init_home
from tether.imports.jsonl import ImportReport, import_jsonl
from tether.memory.recall import recall
from tether.records import Assistant, Baseline, SessionStart, User
from tether.sessions import Session, list_sessions
from tether.stores.sqlite import SqliteStore
from tether.testing.pause import release, wait_reached

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def line(
    session: str, role: str, text: str, time: str = "2024-03-02T10:00:00Z", **more: Any
) -> str:
    return json.dumps({"session": session, "role": role, "text": text, "time": time, **more})


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


def users(home: Path, sid: str) -> list[str]:
    return [r.text for r in Session.open(home, sid).records if isinstance(r, User)]


def import_file(home: Path, src: Path, **options: Any) -> ImportReport:
    """``import_jsonl`` with the home's own store, opened (only when there is something to
    write) and closed by the import, as the CLI does it."""
    return import_jsonl(
        home, src, store=lambda: closing(SqliteStore(home / "tether.db")), **options
    )


@pytest.fixture
def store(home: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(home / "tether.db")
    yield s
    s.close()


TWO_SESSIONS = [
    line(
        "trip",
        "user",
        "We booked the Lantern restaurant in Lisbon",
        "2024-03-02T10:00:00+01:00",
        speaker="ann",
    ),
    line("cat", "user", "I adopted a cat named Milo", "2024-03-05T08:00:00Z"),
    line("trip", "assistant", "Enjoy the Lantern!", "2024-03-02T10:00:04+01:00"),
    line("cat", "assistant", "Milo is a fine name", "2024-03-05T08:00:03Z"),
    line("trip", "user", "Flight leaves at 9", "2024-03-02T10:05:00+01:00"),
]


def test_two_sessions_are_created_in_order_and_found(
    home: Path, tmp_path: Path, store: SqliteStore
) -> None:
    src = write(tmp_path / "in.jsonl", TWO_SESSIONS)
    report = import_jsonl(home, src, now=NOW, store=lambda: nullcontext(store))
    assert (report.sessions_created, report.sessions_appended) == (2, 0)
    assert (report.turns, report.records, report.indexed_rows) == (3, 5, 5)
    assert list_sessions(home) == ["cat", "trip"]

    trip = Session.open(home, "trip")
    assert trip.turns() == 2
    start, *records = trip.records
    assert isinstance(start, SessionStart)
    assert start.time == datetime(2024, 3, 2, 9, 0, tzinfo=UTC)  # the first line's time, UTC
    assert records == [
        User(
            time=datetime(2024, 3, 2, 9, 0, tzinfo=UTC),
            text="We booked the Lantern restaurant in Lisbon",
            speaker="ann",
        ),
        Assistant(time=datetime(2024, 3, 2, 9, 0, 4, tzinfo=UTC), text="Enjoy the Lantern!"),
        User(time=datetime(2024, 3, 2, 9, 5, tzinfo=UTC), text="Flight leaves at 9"),
    ]
    # The baseline's system prompt is the home's config/system.md.
    assert trip.baseline.system == (home / "config" / "system.md").read_text()

    [hit] = recall(store, "Which restaurant did we book?", 1, time=NOW)
    assert (hit.session, hit.turn) == ("trip", 1)
    assert [(h.session, h.turn) for h in recall(store, "cat name", 1, time=NOW)] == [("cat", 1)]
    assert store.journal()[-1].who == "import"


def test_import_into_an_existing_session_appends(
    home: Path, tmp_path: Path, tick: Ticker, store: SqliteStore
) -> None:
    s = Session.create(
        home, "cat", baseline=Baseline(system="mine", memory=""), slot=0, time=tick()
    )
    s.append(User(time=tick(), text="hello"), Assistant(time=tick(), text="hi"))
    s.end_epoch(summary="greetings", baseline=Baseline(system="mine", memory=""), time=tick())
    src = write(tmp_path / "in.jsonl", [line("cat", "user", "Milo chased a moth")])
    report = import_jsonl(home, src, now=NOW, store=lambda: nullcontext(store))
    assert (report.sessions_created, report.sessions_appended) == (0, 1)
    again = Session.open(home, "cat")
    assert again.epoch == 1
    assert again.turns() == 2
    assert again.baseline.system == "mine"
    assert [r.text for r in again.records if isinstance(r, User)] == ["Milo chased a moth"]
    [hit] = recall(store, "moth", 1, time=NOW)
    assert (hit.session, hit.turn) == ("cat", 2)


def test_a_malformed_line_in_the_middle_names_file_and_line_and_writes_nothing(
    home: Path, tmp_path: Path
) -> None:
    src = write(
        tmp_path / "in.jsonl",
        [*TWO_SESSIONS[:3], '{"session": "trip", "role": ', *TWO_SESSIONS[3:]],
    )
    with pytest.raises(ImportFormatError) as info:
        import_file(home, src, now=NOW)
    assert info.value.line == 4
    assert str(info.value).startswith(f"{src}:4:")
    assert list_sessions(home) == []
    assert not any((home / "sessions").iterdir())
    assert not (home / "tether.db").exists()


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        (line("s", "user", "x", "2024-03-02T10:00:00"), "timezone"),
        (line("s", "bot", "x"), "role"),
        (line("s", "user", "x", mood="fine"), "unknown field `mood`"),
        (line("Not An Id", "user", "x"), "is not an id"),
        (line("s", "assistant", "x", speaker="ann"), "speaker is only for role user"),
        (json.dumps({"session": "s", "role": "user", "time": "2024-03-02T10:00:00Z"}), "text"),
        (line("s", "user", "x", "yesterday"), "datetime"),
    ],
)
def test_bad_lines_are_refused(home: Path, tmp_path: Path, bad: str, needle: str) -> None:
    src = write(tmp_path / "in.jsonl", [line("s", "user", "fine"), bad])
    with pytest.raises(ImportFormatError, match=needle) as info:
        import_file(home, src, now=NOW)
    assert info.value.line == 2
    assert info.value.exit_code == 2
    assert list_sessions(home) == []


def test_blank_lines_are_skipped_and_a_missing_file_is_not_found(
    home: Path, tmp_path: Path, store: SqliteStore
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("\n" + line("s", "user", "kept") + "\n\n   \n")
    assert import_jsonl(home, src, now=NOW, store=lambda: nullcontext(store)).records == 1
    with pytest.raises(NotFoundError, match="no import file"):
        import_jsonl(home, tmp_path / "missing.jsonl", now=NOW, store=lambda: nullcontext(store))


def test_batches_write_what_one_pass_writes(home: Path, tmp_path: Path) -> None:
    # Sessions interleaved line by line, appended a record at a time: each session still
    # gets its records in file order, created at its first line's time.
    src = write(tmp_path / "in.jsonl", TWO_SESSIONS)
    import_file(home, src, now=NOW, batch_chars=1)
    other = tmp_path / "other"
    init_home(other)
    import_file(other, src, now=NOW)
    for sid in ("trip", "cat"):
        assert Session.open(home, sid).records == Session.open(other, sid).records
    assert Session.open(home, "trip").turns() == 2


@pytest.mark.slow
def test_an_import_from_a_pipe(home: Path) -> None:
    out = tether(home, "sessions", "import", "/dev/stdin", input="\n".join(TWO_SESSIONS))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("imported 5 records (3 turns): 2 sessions created")


@pytest.fixture
def pause_dir(tmp_path: Path) -> Path:
    d = tmp_path / "pause"
    d.mkdir()
    return d


def import_while(
    home: Path, src: Path, pause_dir: Path, change: Callable[[], object]
) -> tuple[int, str, str]:
    """Import ``src`` in a child paused between the check and the write, ``change`` the
    file there; the child's exit code and outputs."""
    child = spawn(
        home,
        "sessions",
        "import",
        str(src),
        env={"TETHER_PAUSE_AT": "import-after-check", "TETHER_PAUSE_DIR": str(pause_dir)},
    )
    assert wait_reached(pause_dir, "import-after-check")
    change()
    release(pause_dir, "import-after-check")
    out, err = child.communicate(timeout=60)
    return child.returncode, out, err


@pytest.mark.slow
def test_lines_appended_during_an_import_wait_for_the_next(
    home: Path, tmp_path: Path, pause_dir: Path
) -> None:
    src = write(tmp_path / "in.jsonl", TWO_SESSIONS)

    def append() -> None:
        with src.open("a", encoding="utf-8") as f:
            f.write(line("late", "user", "written while the import ran") + "\n")

    code, out, err = import_while(home, src, pause_dir, append)
    assert code == 0, err
    assert out.startswith("imported 5 records (3 turns): 2 sessions created")
    assert list_sessions(home) == ["cat", "trip"]


@pytest.mark.slow
def test_a_file_replaced_by_rename_during_an_import_is_read_as_checked(
    home: Path, tmp_path: Path, pause_dir: Path
) -> None:
    src = write(tmp_path / "in.jsonl", TWO_SESSIONS)
    save = write(tmp_path / "new.jsonl", ["not json at all"])
    code, out, err = import_while(home, src, pause_dir, lambda: save.replace(src))
    assert code == 0, err
    assert out.startswith("imported 5 records (3 turns)")
    assert users(home, "trip") == [
        "We booked the Lantern restaurant in Lisbon",
        "Flight leaves at 9",
    ]


@pytest.mark.slow
def test_a_file_rewritten_in_place_during_an_import_says_what_was_written(
    home: Path, tmp_path: Path, pause_dir: Path
) -> None:
    src = write(tmp_path / "in.jsonl", TWO_SESSIONS)
    data = bytearray(src.read_bytes())
    fourth = data.index(b'{"session": "cat", "role": "assistant"')
    data[fourth : fourth + 3] = b"###"  # same size, the fourth line broken

    def overwrite() -> None:
        with src.open("r+b") as f:
            f.write(data)

    code, _, err = import_while(home, src, pause_dir, overwrite)
    assert code == 2
    assert err.startswith(f"tether: error: {src}:4: ")
    # Sessions are written whole, in order of appearance: "trip" (lines 1, 3, 5) was.
    assert "the file changed after it was checked; 3 of its 5 records were imported" in err
    assert list_sessions(home) == ["trip"]
    assert users(home, "trip") == [
        "We booked the Lantern restaurant in Lisbon",
        "Flight leaves at 9",
    ]


# -- the command line, as a user runs it ------------------------------------------------


@pytest.mark.slow
def test_cli_counts_agree_with_one(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path / "one.jsonl", [line("solo", "user", "just one line")])
    out = tether(home, "sessions", "import", str(src))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("imported 1 record (1 turn): 1 session created, 0 appended;")
    assert tether(home, "memory", "add", "likes oolong").returncode == 0
    shown = tether(home, "memory", "show")
    assert "1 entry" in shown.stdout.splitlines()[0]


@pytest.mark.slow
def test_cli_import_then_recall_json(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path / "history.jsonl", TWO_SESSIONS)
    out = tether(home, "sessions", "import", str(src))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("imported 5 records (3 turns): 2 sessions created, 0 appended;")

    found = tether(home, "memory", "recall", "Where did we book a restaurant?", "-k", "2", "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert isinstance(hits, list)
    assert hits[0] == {
        "kind": "turn",
        "session": "trip",
        "turn": 1,
        "text": "We booked the Lantern restaurant in Lisbon",
        "tag": "memory",
        "score": hits[0]["score"],
        "time": "2024-03-02T09:00:00Z",
        "date": "2024-03-02",
    }
    keys = {"kind", "session", "turn", "text", "tag", "score", "time", "date"}
    assert all(set(h) == keys for h in hits)
    assert isinstance(hits[0]["score"], float)
    assert hits[0]["score"] > 0

    # A turn written after the import is found: recall indexes incrementally first.
    Session.open(home, "cat").append(
        User(time=datetime(2024, 3, 6, tzinfo=UTC), text="Milo caught a grasshopper")
    )
    fresh = json.loads(tether(home, "memory", "recall", "grasshopper", "--json").stdout)
    assert [(h["session"], h["turn"]) for h in fresh] == [("cat", 2)]

    human = tether(home, "memory", "recall", "grasshopper")
    assert human.returncode == 0
    assert "cat#2" in human.stdout
    assert "Milo caught a grasshopper" in human.stdout
    nothing = tether(home, "memory", "recall", 'AND OR NOT "(', "--json")
    assert (nothing.returncode, json.loads(nothing.stdout)) == (0, [])

    # "Milo" is in half the rows: FTS5's idf is 0 there, yet the score still means something.
    milo = tether(home, "memory", "recall", "Milo", "--json")
    scores = [h["score"] for h in json.loads(milo.stdout)]
    assert len(scores) == 2
    assert all(s >= 0.01 for s in scores)
    assert " 0.00 " not in tether(home, "memory", "recall", "Milo").stdout

    # --sessions ranks whole conversations, each with the turns that answer.
    by_session = tether(home, "memory", "recall", "Milo the cat", "--sessions", "--json")
    assert by_session.returncode == 0, by_session.stderr
    [cat] = json.loads(by_session.stdout)
    assert (cat["session"], [t["turn"] for t in cat["turns"]]) == ("cat", [1, 2])
    assert cat["score"] > 0
    assert set(cat["turns"][0]) == {
        "kind",
        "session",
        "turn",
        "text",
        "tag",
        "score",
        "time",
        "date",
    }
    human = tether(home, "memory", "recall", "Lantern restaurant", "--sessions", "-k", "1")
    assert human.returncode == 0, human.stderr
    [row] = human.stdout.splitlines()
    assert row.split()[:2] == ["memory", "trip"]
    assert "1 turn " in row
    assert "#1 We booked the Lantern restaurant in Lisbon" in row
    none = tether(home, "memory", "recall", "zebra", "--sessions")
    assert (none.returncode, none.stdout) == (0, "no matches\n")


@pytest.mark.slow
def test_cli_errors_exit_2_with_file_and_line(home: Path, tmp_path: Path) -> None:
    src = write(tmp_path / "bad.jsonl", [TWO_SESSIONS[0], line("x", "robot", "beep")])
    out = tether(home, "sessions", "import", str(src))
    assert out.returncode == 2
    assert f"{src}:2:" in out.stderr
    assert "Traceback" not in out.stderr
    assert list_sessions(home) == []

    missing = tether(home, "sessions", "import", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2
    assert "Traceback" not in missing.stderr

    bad_k = tether(home, "memory", "recall", "cats", "-k", "0")
    assert bad_k.returncode == 2
    assert "k must be at least 1" in bad_k.stderr
    assert "Traceback" not in bad_k.stderr
    bad_k = tether(home, "memory", "recall", "cats", "--sessions", "-k", "-3")
    assert bad_k.returncode == 2
    assert "k must be at least 1" in bad_k.stderr


@pytest.mark.slow
def test_a_log_rewritten_by_hand_is_indexed_again_by_recall_and_reindex(
    home: Path, tmp_path: Path
) -> None:
    src = write(tmp_path / "history.jsonl", TWO_SESSIONS)
    assert tether(home, "sessions", "import", str(src)).returncode == 0
    log = home / "sessions" / "trip" / "0.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-1]))  # the owner drops the last line by hand
    noted = tether(home, "memory", "recall", "flight", "--json")
    assert noted.returncode == 0
    assert "session trip: a log was rewritten since it was indexed" in noted.stderr
    assert json.loads(noted.stdout) == []  # the dropped line is gone from memory

    done = tether(home, "memory", "reindex", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"sessions": 2, "files": 2, "rows": 4, "errors": []}
    after = tether(home, "memory", "recall", "flight", "--json")
    assert after.stderr == ""
    assert json.loads(after.stdout) == []  # the dropped line is gone from memory too
    human = tether(home, "memory", "reindex")
    assert human.stdout == "reindexed 2 sessions (2 logs): 4 rows\n"
