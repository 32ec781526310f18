"""Session directories: open/resume, turns and trust over epochs, torn and malformed logs."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import Ticker
from tether.errors import (
    BaselineMismatchError,
    CorruptLogError,
    InvalidIdError,
    MissingCarryError,
    NotFoundError,
    SessionError,
)
from tether.records import (
    Assistant,
    Baseline,
    ToolCall,
    ToolResult,
    Usage,
    User,
)
from tether.sessions import Session, list_sessions

BASE = Baseline(system="You are tether.", memory="- likes tea")


def new(home: Path, tick: Ticker, sid: str = "s1", slot: int = 0) -> Session:
    return Session.create(home, sid, baseline=BASE, slot=slot, time=tick())


def test_create_writes_epoch_zero_files(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    d = home / "sessions" / "s1"
    assert sorted(p.name for p in d.iterdir()) == ["0.baseline.json", "0.jsonl"]
    assert s.epoch == 0
    assert s.epochs == [0]
    assert s.carry is None
    assert s.turns() == 0
    assert not s.untrusted()


def test_open_resume_loads_highest_epoch_and_carry(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    s.append(User(time=tick(), text="first"), Assistant(time=tick(), text="one"))
    s.end_epoch(summary="we talked about tea", baseline=BASE, time=tick())
    s.append(User(time=tick(), text="second"))

    again = Session.open(home, "s1")
    assert again.epoch == 1
    assert again.epochs == [0, 1]
    assert again.carry == "we talked about tea"
    assert [type(r).__name__ for r in again.records] == ["SessionStart", "User"]
    msgs = again.messages()
    assert [m.role for m in msgs] == ["system", "user", "user"]
    assert msgs[1].content.endswith("we talked about tea")
    assert msgs[2].content == "second"


def test_missing_carry_is_an_error_naming_the_file(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    s.append(User(time=tick(), text="first"))
    # Epoch 1 files exist, but epoch 0's log was never ended.
    Session.write_epoch_files(s.dir, 1, BASE, 0, tick())
    with pytest.raises(MissingCarryError) as info:
        Session.open(home, "s1")
    assert info.value.path == s.dir / "0.jsonl"
    assert "0.jsonl" in str(info.value)


def test_turns_span_epochs(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    s.append(User(time=tick(), text="a"), Assistant(time=tick(), text="A"))
    s.append(User(time=tick(), text="b"), Assistant(time=tick(), text="B"))
    s.end_epoch(summary="sum", baseline=BASE, time=tick())
    s.append(User(time=tick(), text="c"))
    assert s.turns() == 3
    assert Session.open(home, "s1").turns() == 3


def test_untrusted_in_epoch_zero_stays_untrusted(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    s.append(
        User(time=tick(), text="fetch it"),
        ToolCall(time=tick(), id="c1", name="http_fetch", args={"url": "http://x"}),
        ToolResult(time=tick(), tool_call_id="c1", content="<html>", class_="web", untrusted=True),
        Assistant(time=tick(), text="done"),
    )
    s.end_epoch(summary="fetched a page", baseline=BASE, time=tick())
    s.append(User(time=tick(), text="next"))
    assert s.untrusted()
    assert Session.open(home, "s1").untrusted()


def test_trusted_tool_result_does_not_taint(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    s.append(
        ToolResult(time=tick(), tool_call_id="c", content="x", class_="memory", untrusted=False)
    )
    assert not Session.open(home, "s1").untrusted()


def test_torn_last_line_ignored_then_cut_before_next_append(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    s.append(User(time=tick(), text="kept"))
    with open(s.log_path, "ab") as f:
        f.write(b'{"type":"User","time":"2026-11-01T09:00:09Z","te')  # crash mid-append
    again = Session.open(home, "s1")
    assert again.turns() == 1
    again.append(User(time=tick(), text="after"))
    lines = s.log_path.read_bytes().splitlines()
    assert len(lines) == 3
    final = Session.open(home, "s1")
    assert [r.text for r in final.records if isinstance(r, User)] == ["kept", "after"]


def test_complete_json_without_newline_counts_as_torn(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    with open(s.log_path, "ab") as f:
        f.write(b'{"type":"User","time":"2026-11-01T09:00:09Z","text":"half"}')
    assert Session.open(home, "s1").turns() == 0


def test_malformed_middle_line_refuses_and_rewrites_nothing(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    s.append(User(time=tick(), text="a"))
    with open(s.log_path, "ab") as f:
        f.write(b"not json at all\n")
        f.write(b'{"type":"User","time":"2026-11-01T09:00:09Z","text":"b"}\n')
    before = s.log_path.read_bytes()
    with pytest.raises(CorruptLogError) as info:
        Session.open(home, "s1")
    assert info.value.line == 3
    assert str(info.value).startswith(f"{s.log_path}:3:")
    assert s.log_path.read_bytes() == before


def test_append_refuses_to_build_on_a_foreign_malformed_line(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    with open(s.log_path, "ab") as f:
        f.write(b"garbage\n")
    before = s.log_path.read_bytes()
    with pytest.raises(CorruptLogError, match=":2:"):
        s.append(User(time=tick(), text="b"))
    assert s.log_path.read_bytes() == before


def test_record_with_unknown_field_is_malformed(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    with open(s.log_path, "ab") as f:
        f.write(b'{"type":"User","time":"2026-11-01T09:00:09Z","text":"x","mood":"ok"}\n')
    with pytest.raises(CorruptLogError, match="unknown field `mood`"):
        Session.open(home, "s1")


def test_non_utc_time_in_a_log_is_malformed(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    with open(s.log_path, "ab") as f:
        f.write(b'{"type":"User","time":"2026-11-01T09:00:09+02:00","text":"x"}\n')
    with pytest.raises(CorruptLogError, match=r":2: .*UTC"):
        Session.open(home, "s1")


def test_non_utc_time_is_never_written(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    before = s.log_path.read_bytes()
    local = datetime(2026, 11, 1, 9, tzinfo=timezone(timedelta(hours=1)))
    with pytest.raises(SessionError, match="non-UTC"):
        s.append(User(time=local, text="x"))
    assert s.log_path.read_bytes() == before


def test_edited_baseline_is_detected(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    path = s.dir / "0.baseline.json"
    path.write_bytes(path.read_bytes().replace(b"tea", b"coffee"))
    with pytest.raises(BaselineMismatchError, match=r"0\.baseline\.json"):
        Session.open(home, "s1")


@pytest.mark.parametrize("bad", ["", "UPPER", "a b", "../etc", "x" * 65, "ünï", "a/b", "a_b"])
def test_invalid_session_ids_are_refused(home: Path, tick: Ticker, bad: str) -> None:
    with pytest.raises(InvalidIdError) as info:
        Session.create(home, bad, baseline=BASE, slot=0, time=tick())
    assert info.value.exit_code == 2
    assert not (home / "sessions" / bad).exists() or bad in {"", "../etc"}


def test_open_unknown_session(home: Path) -> None:
    with pytest.raises(NotFoundError, match="no session 'ghost'"):
        Session.open(home, "ghost")


def test_create_twice_refused(home: Path, tick: Ticker) -> None:
    new(home, tick)
    with pytest.raises(SessionError, match="already exists"):
        new(home, tick)


def test_epoch_gap_is_an_error(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    Session.write_epoch_files(s.dir, 2, BASE, 0, tick())
    with pytest.raises(SessionError, match=r"missing for epoch\(s\) \[1\]"):
        Session.open(home, "s1")


def test_half_written_next_epoch_is_not_loaded(home: Path, tick: Ticker) -> None:
    # A baseline without its log (crash between the two writes) is not an epoch yet.
    s = new(home, tick)
    (s.dir / "1.baseline.json").write_bytes(b"{}")
    assert Session.open(home, "s1").epoch == 0


def test_append_picks_up_another_writers_records(home: Path, tick: Ticker) -> None:
    a = new(home, tick)
    b = Session.open(home, "s1")
    a.append(User(time=tick(), text="from a"))
    b.append(User(time=tick(), text="from b"))
    assert [r.text for r in b.records if isinstance(r, User)] == ["from a", "from b"]
    assert Session.open(home, "s1").turns() == 2


def test_ended_epoch_refuses_appends(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    stale = Session.open(home, "s1")
    s.end_epoch(summary="x", baseline=BASE, time=tick())
    with pytest.raises(SessionError, match="ended"):
        stale.append(User(time=tick(), text="late"))


def test_slot_and_last_usage(home: Path, tick: Ticker) -> None:
    s = new(home, tick, slot=1)
    assert s.slot == 1
    assert s.last_usage() is None
    s.append(Usage(time=tick(), cache_n=3, prompt_n=4, predicted_n=5))
    s.end_epoch(summary="x", baseline=BASE, time=tick())
    assert s.slot == 1  # the live slot survives compaction
    assert s.last_usage() is None  # depth is the current epoch's


def test_list_sessions_skips_foreign_entries(home: Path, tick: Ticker) -> None:
    new(home, tick, "b")
    new(home, tick, "a")
    (home / "sessions" / "Not-A-Session").mkdir()
    (home / "sessions" / "stray.txt").write_text("x")
    assert list_sessions(home) == ["a", "b"]


def test_append_is_durable_in_file(home: Path, tick: Ticker) -> None:
    s = new(home, tick)
    s.append(User(time=tick(), text="x"))
    assert os.path.getsize(s.log_path) == len(s.log_path.read_bytes())
    assert s.log_path.read_bytes().endswith(b"\n")
