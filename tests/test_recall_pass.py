"""The index pass every recall runs first costs what changed: with nothing new it opens
no session log (an audit hook sees every ``open``), and what did change is indexed all
the same: an appended turn, a new session, a log truncated, replaced by another file,
rewritten in place at the same size or longer, a torn tail completed later. Real session
files, real SQLite (and PostgreSQL where the lane is on), ``tether memory recall`` run
in process."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from audit_helpers import opened_files
from conftest import Ticker
from test_indexer_recall import NOW
from tether.cli.main import cli
from tether.memory.indexer import index_home
from tether.memory.recall import recall
from tether.ports import Store
from tether.records import Assistant, Baseline, User
from tether.sessions import Session
from tether.stores.sqlite import SqliteStore

BASE = Baseline(system="You are tether.", memory="")


def opens() -> contextlib.AbstractContextManager[list[str]]:
    """The session logs this process opens inside the block."""
    return opened_files(lambda path: "/sessions/" in path and path.endswith(".jsonl"))


def _session(home: Path, tick: Ticker, sid: str, *said: tuple[str, str]) -> Session:
    s = Session.create(home, sid, baseline=BASE, slot=0, time=tick())
    for user, reply in said:
        s.append(User(time=tick(), text=user), Assistant(time=tick(), text=reply))
    return s


def _texts(store: Store, question: str) -> set[str]:
    return {h.text for h in recall(store, question, 10, time=NOW) if h.turn is not None}


def _log(home: Path, sid: str, epoch: int = 0) -> Path:
    return home / "sessions" / sid / f"{epoch}.jsonl"


def _home_of_three(home: Path, tick: Ticker) -> None:
    _session(home, tick, "s1", ("the heron waits by the weir", "a patient bird"))
    s2 = _session(home, tick, "s2", ("book the dentist for tuesday", "booked"))
    s2.end_epoch(summary="dentist", baseline=BASE, time=tick())
    s2.append(User(time=tick(), text="the kestrel hovers"), Assistant(time=tick(), text="ok"))
    _session(home, tick, "s3", ("plant the basil in march", "noted"))


def test_a_pass_with_nothing_new_opens_no_session_log(
    home: Path, tick: Ticker, any_store: Store
) -> None:
    _home_of_three(home, tick)
    with opens() as first:
        report = index_home(home, any_store)
    assert report.files == 4
    assert report.errors == ()
    assert len(first) == 4  # every log read once
    with opens() as second:
        again = index_home(home, any_store)
    assert second == []
    assert (again.sessions, again.files, again.rows) == (3, 0, 0)
    assert _texts(any_store, "heron weir") == {"the heron waits by the weir"}


def test_an_appended_turn_and_a_new_session_are_indexed_and_only_they_are_read(
    home: Path, tick: Ticker, any_store: Store
) -> None:
    _home_of_three(home, tick)
    index_home(home, any_store)
    Session.open(home, "s1").append(
        User(time=tick(), text="the otter slides down the bank"), Assistant(time=tick(), text="ha")
    )
    _session(home, tick, "s4", ("the wren sings at dusk", "lovely"))
    with opens() as opened:
        report = index_home(home, any_store)
    assert sorted(Path(p).relative_to(home / "sessions").as_posix() for p in opened) == [
        "s1/0.jsonl",
        "s4/0.jsonl",
    ]
    assert report.rows == 4
    assert report.rewritten == ()
    hits = recall(any_store, "otter slides", 5, time=NOW)
    assert next((h.session, h.turn) for h in hits if h.turn is not None) == ("s1", 2)
    assert _texts(any_store, "wren dusk") == {"the wren sings at dusk"}
    assert _texts(any_store, "heron weir") == {"the heron waits by the weir"}  # not twice


def test_a_truncated_log_is_indexed_again_as_it_now_is(
    home: Path, tick: Ticker, any_store: Store
) -> None:
    _home_of_three(home, tick)
    Session.open(home, "s1").append(
        User(time=tick(), text="the otter slides down the bank"), Assistant(time=tick(), text="ha")
    )
    index_home(home, any_store)
    log = _log(home, "s1")
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-2]))  # the owner drops the last turn by hand
    report = index_home(home, any_store)
    assert report.rewritten == ("s1",)
    assert report.errors == ()
    assert _texts(any_store, "otter slides") == set()
    assert _texts(any_store, "heron weir") == {"the heron waits by the weir"}  # once
    # the next append goes on from the new end, numbered after what is left
    Session.open(home, "s1").append(
        User(time=tick(), text="the badger digs at night"), Assistant(time=tick(), text="hm")
    )
    assert index_home(home, any_store).rewritten == ()
    hits = recall(any_store, "badger digs", 5, time=NOW)
    assert next((h.session, h.turn) for h in hits if h.turn is not None) == ("s1", 2)


def test_a_log_replaced_by_another_file_of_the_same_size_is_indexed_again(
    home: Path, tick: Ticker, any_store: Store
) -> None:
    _home_of_three(home, tick)
    index_home(home, any_store)
    log = _log(home, "s2", 1)  # the second epoch of a session
    data = log.read_bytes()
    edited = data.replace(b"the kestrel hovers", b"the falcon stoops!")
    assert len(edited) == len(data)
    assert edited != data
    stat = log.stat()
    aside = log.with_suffix(".new")
    aside.write_bytes(edited)
    os.utime(aside, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime
    os.replace(aside, log)  # another inode
    report = index_home(home, any_store)
    assert report.rewritten == ("s2",)
    assert _texts(any_store, "kestrel hovers") == set()
    assert _texts(any_store, "falcon stoops") == {"the falcon stoops!"}
    assert _texts(any_store, "dentist tuesday") == {"book the dentist for tuesday"}  # once
    assert index_home(home, any_store).files == 0


def test_a_same_size_edit_in_place_is_seen_by_its_mtime(
    home: Path, tick: Ticker, any_store: Store
) -> None:
    _home_of_three(home, tick)
    index_home(home, any_store)
    log = _log(home, "s3")
    stat = log.stat()
    data = log.read_bytes()
    edited = data.replace(b"plant the basil", b"prune the roses")
    assert len(edited) == len(data)
    with log.open("r+b") as f:  # the same inode
        f.write(edited)
    # The pass trusts a log whose size, mtime and inode are what it recorded: put the
    # mtime back and the edit is not seen (it never opened the file)...
    os.utime(log, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with opens() as opened:
        assert index_home(home, any_store).rewritten == ()
    assert opened == []
    assert _texts(any_store, "basil march") == {"plant the basil in march"}
    # ... with the mtime the edit gave it, the session is indexed again.
    os.utime(log, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert index_home(home, any_store).rewritten == ("s3",)
    assert _texts(any_store, "basil") == set()
    assert _texts(any_store, "prune roses") == {"prune the roses in march"}


def test_a_log_rewritten_in_place_longer_is_not_taken_for_an_append(
    home: Path, tick: Ticker, any_store: Store
) -> None:
    _home_of_three(home, tick)
    index_home(home, any_store)
    log = _log(home, "s1")
    data = log.read_bytes()
    longer = data.replace(b"a patient bird", b"a very patient grey bird")
    longer += data.splitlines(keepends=True)[-1].replace(b"a patient bird", b"it stays")
    with log.open("r+b") as f:  # same inode, grown: only its old tail tells
        f.write(longer)
    report = index_home(home, any_store)
    assert report.rewritten == ("s1",)
    said = _texts(any_store, "patient bird")
    assert "a very patient grey bird" in said
    assert "a patient bird" not in said


def test_a_torn_tail_is_indexed_once_when_the_line_is_completed(
    home: Path, tick: Ticker, any_store: Store
) -> None:
    _home_of_three(home, tick)
    index_home(home, any_store)
    log = _log(home, "s3")
    whole = json.dumps(
        {"type": "User", "time": "2026-01-01T00:10:00Z", "text": "the moth finds the lamp"}
    ).encode()
    with log.open("ab") as f:
        f.write(whole[:20])  # a crash mid-append
    assert index_home(home, any_store).rows == 0
    with opens() as opened:
        assert index_home(home, any_store).rows == 0
    assert opened == []  # the torn tail is not read again until the file changes
    with log.open("ab") as f:
        f.write(whole[20:] + b"\n")
    report = index_home(home, any_store)
    assert (report.rows, report.rewritten) == (1, ())
    assert _texts(any_store, "moth lamp") == {"the moth finds the lamp"}
    assert index_home(home, any_store).rows == 0


def test_cursors_from_before_the_states_are_kept_and_learn_them(home: Path, tick: Ticker) -> None:
    """A home indexed before schema 9 has cursors without a state: the first pass reads
    no more than each log's last bytes, indexes nothing twice, and the next reads none."""
    _home_of_three(home, tick)
    store_path = home / "tether.db"
    store = SqliteStore(store_path)
    try:
        index_home(home, store)
        conn = sqlite3.connect(store_path)
        with conn:
            conn.execute(
                "UPDATE index_cursor SET size = NULL, mtime_ns = NULL, ino = NULL, tail = NULL"
            )
        conn.close()
        first = index_home(home, store)
        assert (first.rows, first.rewritten) == (0, ())
        with opens() as opened:
            index_home(home, store)
        assert opened == []
        Session.open(home, "s1").append(
            User(time=tick(), text="the otter slides down the bank"),
            Assistant(time=tick(), text="ha"),
        )
        assert index_home(home, store).rows == 2
        assert _texts(store, "heron weir") == {"the heron waits by the weir"}
        assert _texts(store, "otter slides") == {"the otter slides down the bank"}
    finally:
        store.close()


def test_memory_recall_after_an_append_finds_the_new_turn(home: Path, tick: Ticker) -> None:
    _home_of_three(home, tick)
    runner = CliRunner()

    def recall_json(question: str) -> list[dict[str, Any]]:
        done = runner.invoke(cli, ["--home", str(home), "memory", "recall", question, "--json"])
        assert done.exit_code == 0, done.output
        found: list[dict[str, Any]] = json.loads(done.stdout)
        return [h for h in found if h["turn"] is not None]

    assert [h["text"] for h in recall_json("heron weir")] == ["the heron waits by the weir"]
    assert recall_json("otter slides") == []
    Session.open(home, "s1").append(
        User(time=tick(), text="the otter slides down the bank"), Assistant(time=tick(), text="ha")
    )
    hits = recall_json("otter slides")
    assert [(h["session"], h["turn"], h["text"]) for h in hits][:1] == [
        ("s1", 2, "the otter slides down the bank")
    ]
    log = _log(home, "s1")
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:-2]))
    done = runner.invoke(cli, ["--home", str(home), "memory", "recall", "otter", "--json"])
    assert done.exit_code == 0, done.output
    assert [h for h in json.loads(done.stdout) if h["turn"] is not None] == []
    assert "session s1: a log was rewritten since it was indexed" in done.stderr
